"""The permute family: sparse-data permutes, ``invert_permute``, ``expand_into_jagged_permute``."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget, merge_kernels
from fbgemm_npu.native.fbgemm.permute import permute

KERNELS = merge_kernels(
    permute.KERNELS,
)
SCHEMAS: dict[str, str] = {}
BUDGETS: dict[str, Budget] = {}
