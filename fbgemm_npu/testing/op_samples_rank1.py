"""Opcheck samples of the rank1 family (``mxrec::gather_for_rank1`` and its backward), merged
into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``; the
gather's first sample requires grad (its autograd kernel), the last does not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _gather(d: str) -> list[Sample]:
    x = torch.randn(7, generator=_g(0)).to(d)
    i32 = torch.tensor([0, 6, 6, 2, 3], dtype=torch.int32).to(d)
    i64 = torch.tensor([5, 1], dtype=torch.int64).to(d)
    return [((x.clone().requires_grad_(), i32), {}), ((x, i64), {})]


def _backward(d: str) -> list[Sample]:
    g = torch.randn(5, generator=_g(1)).to(d)
    x = torch.randn(7, generator=_g(2)).to(d)
    i = torch.tensor([0, 6, 6, 2, 3], dtype=torch.int64).to(d)
    return [((g, x, i), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::gather_for_rank1": _gather,
    "mxrec::index_select_for_rank1_backward": _backward,
}
