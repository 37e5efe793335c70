"""The bucketize family: ``block_bucketize_sparse_features`` (and its variants) and
``bucketize_sparse_features``."""

from __future__ import annotations

from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.bucketize import bucketize
from fbgemm_npu.native.fbgemm.bucketize.budgets import BUDGETS

KERNELS = merge_kernels(
    bucketize.KERNELS,
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
