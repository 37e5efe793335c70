"""The table-batched-embedding family: every per-call TBE kernel (lookups with their fused
optimizers, metadata, the dense TBE) and the TBE utilities upstream serves on CUDA only
(``transpose_embedding_input``, ``reset_weight_momentum``)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.tbe import metadata, ops, reset, transpose
from fbgemm_npu.native.fbgemm.tbe.budgets import BUDGETS

KERNELS = merge_kernels(
    ops.KERNELS,
    metadata.KERNELS,
    # the utilities check their tensor arguments first (None, objects): native/_checks.py
    guard_tensor_arguments(merge_kernels(transpose.KERNELS, reset.KERNELS)),
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
