"""The bucketize family: ``block_bucketize_sparse_features`` (and its variants),
``bucketize_sparse_features``, and the ops around them: ``populate_bucketized_permute``,
``get_source_mask``, ``get_unique_indices`` (and ``_with_inverse``)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.bucketize import bucketize, populate, source_mask, unique
from fbgemm_npu.native.fbgemm.bucketize.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        bucketize.KERNELS,
        populate.KERNELS,
        source_mask.KERNELS,
        unique.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
