"""Opcheck samples of the norm family (``mxrec::ln_mul``, ``token_mixing``,
``norm_multiply_dropout`` and its backward), merged into :mod:`fbgemm_npu.testing.op_samples`:
small valid calls built fresh on ``device``.  The dropout samples use ``dropout_ratio`` 0 and 1
only: opcheck compares eager with traced runs, and a mask drawn twice would differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _r(d: str, *shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(d, dtype)


def _ln_mul(d: str) -> list[Sample]:
    return [
        ((_r(d, 4, 16, seed=0), _r(d, 4, 16, seed=1), _r(d, 16, seed=2), _r(d, 16, seed=3)), {})
    ]


def _token_mixing(d: str) -> list[Sample]:
    x, g, b = _r(d, 2, 8, 8, seed=0), _r(d, 8, seed=1), _r(d, 8, seed=2)
    return [((x, g, b), {"epsilon": 1e-6}), ((x.clone(), g.clone(), b.clone()), {})]


def _nmd(d: str) -> list[Sample]:
    def args(p: float) -> tuple[Any, ...]:
        x, u = _r(d, 3, 16, seed=0), _r(d, 3, 16, seed=1)
        return (x, u, _r(d, 16, seed=2), _r(d, 16, seed=3), 1e-5, p)

    return [(args(0.0), {}), (args(1.0), {})]


def _nmd_backward(d: str) -> list[Sample]:
    def args(mask: torch.Tensor | None, p: float) -> tuple[Any, ...]:
        g, x, u = _r(d, 3, 16, seed=4), _r(d, 3, 16, seed=0), _r(d, 3, 16, seed=1)
        return (g, x, u, _r(d, 16, seed=2), _r(d, 16, seed=3), mask, 1e-5, p)

    keep = _r("cpu", 3, 16, seed=5).gt(0).to(d)
    return [(args(None, 0.0), {}), (args(keep, 0.5), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::ln_mul": _ln_mul,
    "mxrec::token_mixing": _token_mixing,
    "mxrec::norm_multiply_dropout": _nmd,
    "mxrec::norm_multiply_dropout_backward": _nmd_backward,
}
