"""Opcheck samples of the TBE utilities upstream serves on CUDA only
(``transpose_embedding_input``, ``reset_weight_momentum``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _transpose(d: str) -> list[Sample]:
    hsc = torch.tensor([0, 10, 25, 40])
    off = torch.tensor([0, 2, 3, 3, 5, 6, 8])  # T = 3 features, B = 2
    idx = torch.tensor([3, 1, 9, 0, 14, 2, 2, 7])
    b_t = torch.tensor([(t << 26) | b for t in range(3) for b in range(2)], dtype=torch.int32)
    return [
        ((hsc.to(d), 6, idx.to(d), off.to(d)), {}),
        ((hsc.int().to(d), 6, idx.int().to(d), off.int().to(d)), {"nobag": True}),
        ((hsc.to(d), 30, idx.to(d), off.to(d)), {"total_unique_indices": 8}),
        (
            (hsc.to(d), 6, idx.to(d), off.to(d)),
            {"vbe_b_t_map": b_t.to(d), "info_B_mask": (1 << 26) - 1},
        ),
        ((hsc.to(d), 6, idx[:0].to(d), torch.zeros(7, dtype=torch.int64).to(d)), {}),
    ]


def reset_args(d: str) -> dict[str, Any]:
    """Two tables (D 8 and 4, 5 and 3 rows), buffers 0 and 1 reset in tables 1 and 0."""
    g = torch.Generator().manual_seed(0)
    none = torch.zeros(0, device=d)
    i32 = torch.int32
    return {
        "dev_weights": torch.rand(52, generator=g).to(d),
        "uvm_weights": none,
        "lxu_cache_weights": torch.zeros(0, 0, device=d),
        "weights_placements": torch.zeros(2, dtype=i32, device=d),
        "weights_offsets": torch.tensor([0, 40], device=d),
        "momentum1_dev": torch.rand(8, generator=g).to(d),
        "momentum1_uvm": none,
        "momentum1_placements": torch.zeros(2, dtype=i32, device=d),
        "momentum1_offsets": torch.tensor([0, 5], device=d),
        "D_offsets": torch.tensor([0, 8, 12], dtype=i32, device=d),
        "pruned_indices": torch.tensor([2, 0, 4, 1], device=d),
        "pruned_indices_offsets": torch.tensor([0, 1, 4], device=d),
        "logical_table_ids": torch.tensor([1, 0], dtype=i32, device=d),
        "buffer_ids": torch.tensor([0, 1], dtype=i32, device=d),
        "cache_hash_size_cumsum": torch.zeros(0, dtype=torch.int64, device=d),
        "lxu_cache_state": torch.zeros(0, dtype=torch.int64, device=d),
        "total_cache_hash_size": 0,
    }


def _reset(d: str) -> list[Sample]:
    return [((), reset_args(d))]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::transpose_embedding_input": _transpose,
    "fbgemm::reset_weight_momentum": _reset,
}
