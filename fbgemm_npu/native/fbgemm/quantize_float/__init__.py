"""The quantize_float family: upstream's float-format quantize ops (bfloat16, HFP8, FP8 rowwise)
on npu, encoded in int32 / float32 arithmetic on the bit patterns (a 910B's torch_npu has no
float8 kernels, and shifts run on its AI CPU)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.quantize_float import (
    _alloc,
    bfloat16,
    fp8_rowwise,
    hfp8,
    padded,
    padded_dequant,
)
from fbgemm_npu.native.fbgemm.quantize_float.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py; an
# output too large for the memory is refused by name (_alloc.py)
KERNELS = guard_tensor_arguments(
    _alloc.name_allocations(
        merge_kernels(
            bfloat16.KERNELS,
            hfp8.KERNELS,
            fp8_rowwise.KERNELS,
            padded.KERNELS,
            padded_dequant.KERNELS,
        )
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
