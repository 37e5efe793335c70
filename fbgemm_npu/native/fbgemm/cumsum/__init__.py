"""The cumsum family: ``asynchronous_{complete,exclusive,inclusive}_cumsum``."""

from __future__ import annotations

from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.cumsum import cumsum
from fbgemm_npu.native.fbgemm.cumsum.budgets import BUDGETS

KERNELS = merge_kernels(
    cumsum.KERNELS,
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
