"""The table-batched-embedding family: every per-call TBE kernel (lookups with their fused
optimizers, metadata, the dense TBE)."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget, merge_kernels
from fbgemm_npu.native.fbgemm.tbe import metadata, ops

KERNELS = merge_kernels(
    ops.KERNELS,
    metadata.KERNELS,
)
SCHEMAS: dict[str, str] = {}
BUDGETS: dict[str, Budget] = {}
