"""Opcheck samples of the jagged family's softmax_bmm.py and bmm.py ops, merged into
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


def _jj_bmm(d: str) -> list[Sample]:
    o64, o32 = _offsets(d)
    x = torch.randn(7, 3, generator=_g(4)).to(d)
    y = torch.randn(7, 2, generator=_g(5)).to(d)
    return [
        ((x.clone().requires_grad_(), y.clone().requires_grad_(), o64, 2), {}),
        ((x.clone().requires_grad_(), y, o32, 5), {}),
        ((x, y, o64, 3), {}),
    ]


def _jj_bmm_forward(d: str) -> list[Sample]:
    o64, o32 = _offsets(d)
    x = torch.randn(7, 3, generator=_g(6)).to(d)
    y = torch.randn(7, 2, generator=_g(7)).to(d)
    return [((x, y, o64, 2), {}), ((x.half(), y.half(), o32, 4), {})]


def _jd_bmm(d: str) -> list[Sample]:
    o64, o32 = _offsets(d)
    x = torch.randn(7, 3, generator=_g(8)).to(d)
    y = torch.randn(3, 3, 2, generator=_g(9)).to(d)
    return [
        ((x.clone().requires_grad_(), o64, y.clone().requires_grad_(), 2), {}),
        ((x, o32, y.clone().requires_grad_(), 5), {}),
        ((x, o64, y, 3), {}),
    ]


def _jd_bmm_forward(d: str) -> list[Sample]:
    o64, o32 = _offsets(d)
    x = torch.randn(7, 3, generator=_g(10)).to(d)
    y = torch.randn(3, 3, 2, generator=_g(11)).to(d)
    return [((x, o64, y, 2), {}), ((x.half(), o32, y.half(), 4), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::jagged_softmax": _softmax,
    "fbgemm::jagged_softmax_forward": _softmax_forward,
    "fbgemm::jagged_softmax_backward": _softmax_backward,
    "fbgemm::jagged_jagged_bmm": _jj_bmm,
    "fbgemm::jagged_jagged_bmm_forward": _jj_bmm_forward,
    "fbgemm::jagged_dense_bmm": _jd_bmm,
    "fbgemm::jagged_dense_bmm_forward": _jd_bmm_forward,
}
