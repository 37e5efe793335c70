"""The jagged family: jagged <-> dense, stacked jagged, jagged-dense elementwise and matmul,
softmax / bmm, packed segments."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.jagged import (
    accumulate,
    bmm,
    elementwise,
    jagged_output,
    matmul,
    pack,
    select,
    slicing,
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
        pack.KERNELS,
        accumulate.KERNELS,
        slicing.KERNELS,
        select.KERNELS,
        stacked.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
