"""Opcheck samples of the jagged family's slicing.py, select.py, accumulate.py and pack.py ops,
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``
(for ``jagged_slice``, ``pack_segments`` and ``pack_segments_v2``, whose autograd kernels are
ours, :mod:`.op_samples` makes the float values require grad and adds the first sample again
without); empty segments, truncation, int32 and int64 lengths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _i64(values: list[int], d: str) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64).to(d)


def _slice(d: str) -> list[Sample]:
    x = torch.randn(10, generator=_g(12)).to(d)
    lengths, start = _i64([3, 0, 4, 3], d), _i64([1, 0, 2, 3], d)
    return [
        ((x, lengths, start, 2), {}),
        ((x.to(torch.int32), lengths, start, 5), {}),
        ((x, lengths, _i64([0, 0, 0, 0], d), 0), {}),
    ]


def _slice_forward(d: str) -> list[Sample]:
    x = torch.randn(10, generator=_g(13)).to(d)
    lengths, src = _i64([3, 0, 4, 3], d), _i64([1, 0, 2, 3], d)
    out_lengths, tgt = _i64([3, 1, 3, 1], d), _i64([1, 0, 0, 1], d)
    return [
        ((x, lengths, src, out_lengths, tgt, 8, 5, True), {}),
        ((x.half(), lengths, src, out_lengths, tgt, 9, 1, False), {}),
    ]


def _masked_select(d: str) -> list[Sample]:
    v = torch.randn(10, generator=_g(14)).to(d)
    mask = torch.tensor([1, 0, 1, 1, 1, 0, 0, 1, 1, 1], dtype=torch.bool).to(d)
    return [
        ((v, _i64([3, 0, 4, 3], d), mask), {}),
        ((v.to(torch.int32), torch.tensor([5, 5], dtype=torch.int32).to(d), mask, True), {}),
    ]


def _truncated(d: str) -> list[Sample]:
    v = torch.randn(10, generator=_g(15)).to(d)
    return [
        ((v, _i64([3, 0, 4, 3], d), 2), {}),
        ((v.to(torch.int64), torch.tensor([6, 4], dtype=torch.int32).to(d), 5), {}),
    ]


def _acc(d: str) -> list[Sample]:
    w = torch.randn(6, generator=_g(16)).to(d)
    ids = _i64([0, 2, 0, 1, 2, 2], d)
    return [((w, ids, 3), {}), ((w.half(), ids.to(torch.int32), 5), {})]


def _hash_size_cumsum(d: str) -> list[Sample]:
    offsets = _i64([0, 2, 3, 3, 3, 7, 8], d)
    indices = _i64([5, 1, 9, 0, 3, 2, 7, 2**40 + 3], d)
    return [
        ((offsets, indices, 2), {}),
        (
            (
                offsets.to(torch.int32),
                torch.tensor([4, 1, 2, 3, 0, 6, 6, 8], dtype=torch.int32).to(d),
                3,
            ),
            {},
        ),
    ]


def _pack(d: str) -> list[Sample]:
    x = torch.randn(5, 2, generator=_g(17)).to(d)
    lengths = _i64([2, 0, 3], d)
    return [((x, lengths, 3), {}), ((x[:, 0].contiguous(), lengths.to(torch.int32), 2), {})]


def _pack_v2(d: str) -> list[Sample]:
    x = torch.randn(5, 2, generator=_g(18)).to(d)
    lengths = _i64([2, 0, 3], d)
    return [
        ((x, lengths, 3, True, True), {}),
        ((x.to(torch.int64), lengths.to(torch.int32), 2), {}),
    ]


def _pack_backward(d: str) -> list[Sample]:
    data = torch.randn(3, 2, 2, generator=_g(19)).to(d)
    lengths = _i64([2, 0, 3], d)
    return [((data, lengths, 5, 2), {}), ((data[:, :, 0].contiguous(), lengths, 6, 2), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::jagged_slice": _slice,
    "fbgemm::jagged_slice_forward": _slice_forward,
    "fbgemm::masked_select_jagged_1d": _masked_select,
    "fbgemm::jagged_1d_to_truncated_values": _truncated,
    "fbgemm::jagged_acc_weights_and_counts": _acc,
    "fbgemm::jagged_hash_size_cumsum": _hash_size_cumsum,
    "fbgemm::pack_segments": _pack,
    "fbgemm::pack_segments_v2": _pack_v2,
    "fbgemm::pack_segments_backward": _pack_backward,
}
