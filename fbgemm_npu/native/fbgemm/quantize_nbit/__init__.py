"""The quantize_nbit family: upstream's fused N-bit row-wise quantize ops with a half scale and
bias ("SBHalf"): float / half rows to packed 1..8-bit codes and back (``quantize.py``,
``dequantize.py``); the packing itself is ``_pack.py``, shared with the IntNBit TBE."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.quantize_nbit import dequantize, quantize
from fbgemm_npu.native.fbgemm.quantize_nbit.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(quantize.KERNELS, dequantize.KERNELS))
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
