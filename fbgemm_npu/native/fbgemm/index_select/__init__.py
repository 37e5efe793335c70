"""The index-select family: jagged, keyed, batch (list and tensor forms) and group index selects,
ranges, segment sums, unique indices, ``index_select_dim0``."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.index_select import (
    batch,
    batch_tensor,
    dim0,
    group,
    index_select,
    keyed,
    ranges,
    unique,
)
from fbgemm_npu.native.fbgemm.index_select.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(
        index_select.KERNELS,
        dim0.KERNELS,
        keyed.KERNELS,
        batch.KERNELS,
        batch_tensor.KERNELS,
        group.KERNELS,
        ranges.KERNELS,
        unique.KERNELS,
    )
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
