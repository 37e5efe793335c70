"""The cumsum family: ``asynchronous_{complete,exclusive,inclusive}_cumsum``."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget, merge_kernels
from fbgemm_npu.native.fbgemm.cumsum import cumsum

KERNELS = merge_kernels(
    cumsum.KERNELS,
)
SCHEMAS: dict[str, str] = {}
BUDGETS: dict[str, Budget] = {}
