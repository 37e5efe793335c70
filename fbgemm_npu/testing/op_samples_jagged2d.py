"""Opcheck samples of the jagged2d family (``mxrec::concat_2d_jagged``,
``mxrec::split_2d_jagged``), merged into :mod:`fbgemm_npu.testing.op_samples`: small valid
calls built fresh on ``device``, values requiring grad first (the autograd kernels), the last
sample of each op without; prefix, replace and dense sides."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _offsets(d: str) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.tensor([0, 2, 2, 5], dtype=torch.int64).to(d),
        torch.tensor([0, 3, 3, 7], dtype=torch.int32).to(d),
    )


def _concat(d: str) -> list[Sample]:
    oa, ob = _offsets(d)
    a = torch.randn(5, 4, generator=_g(0)).to(d)
    b = torch.randn(7, 4, generator=_g(1)).to(d)
    dense = torch.randn(3, 2, 4, generator=_g(2)).to(d)
    empty = torch.empty(0, dtype=torch.int64).to(d)
    return [
        ((4, a.clone().requires_grad_(), b.clone().requires_grad_(), oa, ob, False, 2), {}),
        ((4, a.clone().requires_grad_(), b.clone().requires_grad_(), oa, ob, True, 0), {}),
        ((4, dense, b, empty, ob), {}),
        ((4, a, b, oa, ob), {}),
    ]


def _split(d: str) -> list[Sample]:
    oa, ob = _offsets(d)
    v = torch.randn(12, 4, generator=_g(3)).to(d)
    empty = torch.empty(0, dtype=torch.int64).to(d)
    return [
        ((v.clone().requires_grad_(), 4, empty, ob, 2, 1), {}),
        ((v[:13], 4, oa, ob, 0, 1), {}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::concat_2d_jagged": _concat,
    "mxrec::split_2d_jagged": _split,
}
