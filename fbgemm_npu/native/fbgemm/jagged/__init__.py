"""The jagged family: jagged <-> dense, stacked jagged, jagged-dense elementwise and matmul."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.jagged import (
    bmm,
    elementwise,
    jagged_output,
    matmul,
    softmax_bmm,
    stacked,
    to_dense,
    to_jagged,
)
from fbgemm_npu.native.fbgemm.jagged.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        to_dense.KERNELS,
        to_jagged.KERNELS,
        elementwise.KERNELS,
        jagged_output.KERNELS,
        matmul.KERNELS,
        softmax_bmm.KERNELS,
        bmm.KERNELS,
        stacked.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
