"""The pooled family: pooled-embedding permutes, KeyedTensor regroup, merges across devices."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget, merge_kernels
from fbgemm_npu.native.fbgemm.pooled import merge, pooled, regroup

KERNELS = merge_kernels(
    pooled.KERNELS,
    regroup.KERNELS,
    merge.KERNELS,
)
SCHEMAS: dict[str, str] = {}
BUDGETS: dict[str, Budget] = {}
