"""Opcheck samples of the pruning family (the IntNBit TBE's row-pruning ops), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _insert_args(idx: torch.dtype, ht: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Two tables of 6 rows (capacity 32 each), B = 1, rows 1 and 4 pruned."""
    keys = torch.cat([torch.arange(6), torch.arange(6) * 3]).to(idx)
    dense = torch.tensor([0, -1, 1, 2, -1, 3, 0, 1, 2, 3, 4, 5]).to(idx)
    offsets = torch.tensor([0, 6, 12]).to(idx)
    return keys, dense, offsets, torch.full((64, 2), -1, dtype=ht), torch.tensor([0, 32, 64])


def _pruned_hashmap_insert(d: str) -> list[Sample]:
    out = []
    for idx, ht in ((torch.int32, torch.int32), (torch.int64, torch.int64)):
        out.append((tuple(t.to(d) for t in _insert_args(idx, ht)), {}))
    return out


def _pruned_hashmap_lookup(d: str) -> list[Sample]:
    out = []
    for idx, ht in ((torch.int32, torch.int32), (torch.int64, torch.int32)):
        keys, dense, offsets, table, hto = _insert_args(idx, ht)
        torch.ops.fbgemm.pruned_hashmap_insert(keys, dense, offsets, table, hto)
        q = torch.tensor([0, 1, 5, 7, 3, 6, 9, -1]).to(idx)
        qo = torch.tensor([0, 2, 4, 6, 8]).to(idx)  # T = 2, B = 2
        out.append((tuple(t.to(d) for t in (q, qo, table, hto)), {}))
    return out


def _pruned_array_lookup(d: str) -> list[Sample]:
    remap = torch.tensor([0, -1, 1, 2, -1, 3])
    ro = torch.tensor([0, 6, 6])  # the second table unpruned
    q = torch.tensor([0, 1, 5, 7, 3, 9])
    qo = torch.tensor([0, 3, 6])
    return [
        ((q.to(d), qo.to(d), remap.to(d), ro.to(d)), {}),
        ((q.int().to(d), qo.int().to(d), remap.int().to(d), ro.to(d)), {}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::pruned_hashmap_insert": _pruned_hashmap_insert,
    "fbgemm::pruned_hashmap_lookup": _pruned_hashmap_lookup,
    "fbgemm::pruned_array_lookup": _pruned_array_lookup,
}
