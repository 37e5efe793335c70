"""Opcheck samples of the linear_silu family (``mxrec::in_linear_silu``,
``distance_in_linear_silu``, ``in_linear_silu_backward``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]
SPLITS = [2, 4, 4, 6]  # unequal widths, n = 16
# float32 only: in half, AOT's traced backward decomposes silu_backward into half-precision
# parts (several roundings) where eager runs the one kernel, and opcheck's gradient
# comparison then sees rounding differences, a property of torch's decompositions


def _r(d: str, *shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(d, dtype)


def _forward(d: str) -> list[Sample]:
    return [
        ((_r(d, 5, 8, seed=0), _r(d, 16, 8, seed=1), _r(d, 16, seed=2), SPLITS), {}),
        (
            (
                _r(d, 3, 8, seed=3),
                _r(d, 16, 8, seed=4),
                _r(d, 16, seed=5),
                [4, 4, 4, 4],
            ),
            {},
        ),
    ]


def _backward(d: str) -> list[Sample]:
    x, w, b = _r(d, 5, 8, seed=0), _r(d, 16, 8, seed=1), _r(d, 16, seed=2)
    grads = [_r(d, 5, h, seed=10 + i) for i, h in enumerate(SPLITS)]
    z = torch.addmm(b, x, w.t())
    return [((x, w, b, *grads, z, SPLITS), {}), ((x, w, None, *grads, z, SPLITS), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::in_linear_silu": _forward,
    "mxrec::distance_in_linear_silu": _forward,
    "mxrec::in_linear_silu_backward": _backward,
}
