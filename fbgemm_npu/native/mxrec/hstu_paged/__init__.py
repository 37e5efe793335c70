"""The paged HSTU family (Rec SDK's inference attention over a paged KV cache):
``mxrec::hstu_paged``, forward only."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.hstu_paged import hstu_paged
from fbgemm_npu.native.mxrec.hstu_paged.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(hstu_paged.KERNELS))
SCHEMAS: dict[str, str] = dict(hstu_paged.SCHEMAS)

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
