"""The quantize_mx family: upstream's MX4 (e2m1) quantize / dequantize ops on npu, in int32 /
float32 arithmetic on the bit patterns (no shifts: AI CPU on a 910B, docs/hardware.md).

``fbgemm::quantize_mx`` / ``fbgemm::dequantize_mx`` are defined by ``fbgemm_gpu.quantize`` (not
by ``import fbgemm_gpu``): it is imported first, so the schemas exist when ours register."""

from __future__ import annotations

import fbgemm_gpu.quantize  # noqa: F401  - defines the two ops' schemas (and their CPU kernels)

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.quantize_mx import mx4
from fbgemm_npu.native.fbgemm.quantize_mx.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(mx4.KERNELS))
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
