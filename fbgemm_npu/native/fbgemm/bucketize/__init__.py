"""The bucketize family: ``block_bucketize_sparse_features`` (and its variants) and
``bucketize_sparse_features``."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.bucketize import bucketize
from fbgemm_npu.native.fbgemm.bucketize.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        bucketize.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
