"""The input_combine family: upstream's ``tbe_input_combine`` ops, which join per-table TBE inputs
(indices, offsets or lengths, per-sample weights) into one int32 / float32 input
(``combine.py``: offsets; ``with_length.py``: lengths)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.input_combine import combine, with_length
from fbgemm_npu.native.fbgemm.input_combine.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(combine.KERNELS, with_length.KERNELS))
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
