"""The cumsum family: ``asynchronous_{complete,exclusive,inclusive}_cumsum``,
``asynchronous_batched_complete_cumsum``."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.cumsum import cumsum
from fbgemm_npu.native.fbgemm.cumsum.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        cumsum.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
