"""The table-batched-embedding family: every per-call TBE kernel (lookups with their fused
optimizers, metadata, the dense TBE)."""

from __future__ import annotations

from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.tbe import metadata, ops
from fbgemm_npu.native.fbgemm.tbe.budgets import BUDGETS

KERNELS = merge_kernels(
    ops.KERNELS,
    metadata.KERNELS,
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
