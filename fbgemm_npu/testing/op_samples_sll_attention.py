"""Opcheck samples of the sll_attention family (``fbgemm_npu/native/fbgemm/sll_attention/``),
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``,
with a gradient where upstream has a backward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]

_LENGTHS = (2, 0, 3, 1)


def _offsets(d: str, squares: bool = False) -> torch.Tensor:
    lengths = torch.tensor([n * n if squares else n for n in _LENGTHS])
    return torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]).to(d)


def _rand(*shape: int, seed: int = 0, grad: bool = False, d: str = "cpu") -> torch.Tensor:
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(d)
    return t.requires_grad_() if grad else t


def _softmax(d: str) -> list[Sample]:
    o = _offsets(d)
    return [
        ((_rand(6, 3, d=d, grad=True), o, 3), {}),
        ((_rand(6, 2, seed=1, d=d).half(), o.int(), 2), {"use_fbgemm_kernel": False}),
        ((_rand(3, 6, seed=2, d=d).t(), o, 4), {}),  # transposed: the output is contiguous
    ]


def _softmax2(d: str) -> list[Sample]:
    o, ot = _offsets(d), _offsets(d, squares=True)
    return [
        ((_rand(14, d=d, grad=True), o, ot, 3, False), {}),
        ((_rand(14, seed=1, d=d), o.int(), ot.int(), 4, True), {}),
    ]


def _padded(d: str) -> list[Sample]:
    ot = _offsets(d, squares=True)
    return [
        ((_rand(14, d=d, grad=True), ot, 3, -1.0), {}),
        ((torch.arange(14).to(d), ot.int(), 4, 2.5), {}),
    ]


def _dense(d: str) -> list[Sample]:
    o = _offsets(d)
    q, v = _rand(6, 4, d=d, grad=True), _rand(6, 3, seed=1, d=d, grad=True)
    k, bias = _rand(4, 4, 5, seed=2, d=d, grad=True), _rand(4, 3, 5, seed=3, d=d, grad=True)
    short = _rand(4, 2, 5, seed=4, d=d)
    return [((q, k, v, bias, o, 3), {}), ((q.detach(), k.detach(), v.detach(), short, o, 3), {})]


def _basic(d: str) -> list[Sample]:
    o = _offsets(d)
    q, k = _rand(6, 4, d=d, grad=True), _rand(6, 4, seed=1, d=d, grad=True)
    v = _rand(6, 2, seed=2, d=d, grad=True)
    return [((q, k, v, o, 3), {}), ((q.detach(), k.detach(), v.detach(), o.int(), 4, True), {})]


def _multi_head(d: str) -> list[Sample]:
    o = _offsets(d)
    q, k = _rand(2, 6, 4, d=d, grad=True), _rand(2, 6, 4, seed=1, d=d, grad=True)
    v = _rand(2, 6, 4, seed=2, d=d, grad=True)
    permuted = _rand(6, 2, 4, seed=3, d=d).permute(1, 0, 2)  # the output is contiguous
    return [
        ((q, k, v, o, 2), {}),
        ((q.detach(), k.detach(), v.detach(), o, 4), {}),
        ((permuted, k.detach(), v.detach(), o, 3), {}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::sll_jagged_softmax": _softmax,
    "fbgemm::sll_jagged2_softmax": _softmax2,
    "fbgemm::sll_jagged2_to_padded_dense": _padded,
    "fbgemm::sll_jagged_dense_flash_attention": _dense,
    "fbgemm::sll_jagged_flash_attention_basic": _basic,
    "fbgemm::sll_multi_head_jagged_flash_attention": _multi_head,
}
