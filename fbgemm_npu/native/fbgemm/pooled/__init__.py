"""The pooled family: pooled-embedding permutes, KeyedTensor regroup, merges across devices."""

from __future__ import annotations

from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.pooled import merge, pooled, regroup
from fbgemm_npu.native.fbgemm.pooled.budgets import BUDGETS

KERNELS = merge_kernels(
    pooled.KERNELS,
    regroup.KERNELS,
    merge.KERNELS,
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
