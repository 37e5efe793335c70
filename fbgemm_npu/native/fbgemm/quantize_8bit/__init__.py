"""The quantize_8bit family: upstream's fused 8-bit row-wise quantize ops on npu (float32 /
float16 rows to uint8 rows with a float32 scale and bias each, and back to float32 / float16 /
bfloat16, and ``...MixedDim``: tables of mixed widths side by side), bit-exact against
upstream's CPU kernels for the uint8 encodings."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.quantize_8bit import dequantize, mixed_dim, quantize
from fbgemm_npu.native.fbgemm.quantize_8bit.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(quantize.KERNELS, dequantize.KERNELS, mixed_dim.KERNELS)
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
