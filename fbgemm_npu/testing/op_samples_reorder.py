"""Opcheck samples of the reorder family (``fbgemm_npu/native/fbgemm/reorder/``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device`` (3 requests
of 2, 0 and 1 ads, 2 tables; no float input requires grad: upstream has no autograd here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]

_BO = [0, 2, 2, 3]  # NA = 3
_LENGTHS = [1, 2, 0, 3, 2, 1]  # [B][T][n_b]: request 0 (t0: 1, 2; t1: 0, 3), request 2 (2; 1)
_REORDERED = [1, 2, 2, 0, 3, 1]  # [T][NA]
_BCAST = [2, 1, 0, 4, 3, 1]  # [B][T]
_BCAST_REORDERED = [2, 2, 3, 1, 1, 1]


def _offsets(lengths: list[int], dtype: torch.dtype, d: str) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=dtype).to(d)


def _bo(d: str, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    return torch.tensor(_BO, dtype=dtype).to(d)


def _lengths(d: str) -> list[Sample]:
    i32 = torch.tensor(_LENGTHS, dtype=torch.int32).to(d)
    f32 = torch.tensor(_LENGTHS, dtype=torch.float32).to(d)
    bcast = torch.tensor(_BCAST, dtype=torch.int64).to(d)
    return [
        ((i32, _bo(d), 3), {}),
        ((f32, _bo(d, torch.int64), 3, False, 5), {}),
        ((bcast, _bo(d), 3, True), {}),
    ]


def _indices(d: str) -> list[Sample]:
    c, r = _offsets(_LENGTHS, torch.int32, d), _offsets(_REORDERED, torch.int32, d)
    cb, rb = _offsets(_BCAST, torch.int64, d), _offsets(_BCAST_REORDERED, torch.int64, d)
    values = torch.arange(9, dtype=torch.int64).mul(7).to(d)
    return [
        ((c, values, r, _bo(d), 3), {}),
        ((cb, torch.arange(11, dtype=torch.float16).to(d), rb, _bo(d), 3, True, 10), {}),
    ]


def _sequence(d: str) -> list[Sample]:
    c, r = _offsets(_LENGTHS, torch.int64, d), _offsets(_REORDERED, torch.int64, d)
    emb = torch.randn(9, 4, generator=torch.Generator().manual_seed(0)).to(d)
    return [((c, emb, r, _bo(d, torch.int64), 3), {})]


def _cat(d: str) -> list[Sample]:
    c, r = _offsets(_LENGTHS, torch.int32, d), _offsets(_REORDERED, torch.int32, d)
    values = torch.arange(9, dtype=torch.float32).to(d)
    parts = [values[:6], values[6:6], values[6:]]  # request b: C[T bo[b]] : C[T bo[b + 1]]
    padded = _offsets([1, 2, 2, 0, 0, 3, 1, 0], torch.int32, d)  # max_batch_size 4
    return [
        ((c, parts, r, _bo(d), 3, False, 9), {}),
        ((c, parts, padded, _bo(d), 3, False, 9, False, 4), {}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::reorder_batched_ad_lengths": _lengths,
    "fbgemm::reorder_batched_ad_indices": _indices,
    "fbgemm::reorder_batched_sequence_embeddings": _sequence,
    "fbgemm::cat_reorder_batched_ad_indices": _cat,
}
