"""Opcheck samples of the jagged family's softmax / bmm ops (``softmax_bmm.py``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``, values
requiring grad first (the autograd kernels), the last sample of each op without; empty rows,
rows longer than ``max_L``, int32 and int64 offsets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _offsets(d: str) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.tensor([0, 3, 3, 7], dtype=torch.int64).to(d),
        torch.tensor([0, 2, 5, 7], dtype=torch.int32).to(d),
    )


def _softmax(d: str) -> list[Sample]:
    o64, o32 = _offsets(d)
    v = torch.randn(7, 4, generator=_g(0)).to(d)
    return [
        ((v.clone().requires_grad_(), o64, 2), {}),
        ((v.clone().requires_grad_(), o32, 5), {}),
        ((v, o64, 3), {}),
    ]


def _softmax_forward(d: str) -> list[Sample]:
    o64, o32 = _offsets(d)
    v = torch.randn(7, 4, generator=_g(1)).to(d)
    return [((v, o64, 2), {}), ((v.half(), o32, 4), {})]


def _softmax_backward(d: str) -> list[Sample]:
    o64, o32 = _offsets(d)
    y = torch.softmax(torch.randn(7, 4, generator=_g(2)), 0).to(d)
    g = torch.randn(7, 4, generator=_g(3)).to(d)
    return [((g, y, o64, 2), {}), ((g, y, o32, 4), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::jagged_softmax": _softmax,
    "fbgemm::jagged_softmax_forward": _softmax_forward,
    "fbgemm::jagged_softmax_backward": _softmax_backward,
}
