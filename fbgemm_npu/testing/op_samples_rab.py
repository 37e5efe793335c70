"""Opcheck samples of the rab family (``mxrec::relative_attn_bias_*``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _pos(d: str) -> list[Sample]:
    bias = torch.randn(6, 6, generator=_g(0)).to(d)
    ident = torch.eye(6).to(d)
    return [((bias, ident, [0, 2, 7]), {})]


def _time(d: str) -> list[Sample]:
    t = torch.tensor([[0, 3, 100], [5, 5, 40000]], dtype=torch.int32).to(d)
    w = torch.randn(2, 9, generator=_g(1)).to(d)
    return [((t, w, 0.301), {})]


def _backward(d: str) -> list[Sample]:
    g = torch.randn(2, 2, 6, 6, generator=_g(2)).to(d)
    k = torch.tensor([[[0, 1, 8], [2, 0, 3], [8, 3, 0]]] * 2, dtype=torch.int32).to(d)
    return [((g, k, 9), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::relative_attn_bias_pos": _pos,
    "mxrec::relative_attn_bias_time": _time,
    "mxrec::relative_attn_bias_time_with_index": _time,
    "mxrec::relative_attn_bias_time_backward": _backward,
}
