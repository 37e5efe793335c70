"""The permute family: sparse-data permutes, ``invert_permute``, ``expand_into_jagged_permute``;
``permute_sequence_embeddings`` and ``permute102_baddbmm_permute102`` (:mod:`.sequence`), the
duplicate pooled permutes (:mod:`.duplicate`), the embedding-gradient recats (:mod:`.recat`)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.permute import duplicate, permute, recat, sequence
from fbgemm_npu.native.fbgemm.permute.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        permute.KERNELS,
        sequence.KERNELS,
        duplicate.KERNELS,
        recat.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
