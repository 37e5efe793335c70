"""The pooled family: pooled-embedding permutes, KeyedTensor regroup, merges across devices."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.pooled import merge, pooled, regroup
from fbgemm_npu.native.fbgemm.pooled.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        pooled.KERNELS,
        regroup.KERNELS,
        merge.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
