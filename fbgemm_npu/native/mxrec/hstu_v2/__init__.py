"""The HSTU v2 family: Rec SDK's v2 interface, ``mxrec::hstu_forward_v2`` and
``mxrec::hstu_backward_v2`` (window sizes, context and targets, rab, arbitrary interval masks),
on the HSTU family's shared tile program (``mxrec/hstu/_attention.py``, ``_spans.py``)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.mxrec.hstu_v2 import hstu_v2
from fbgemm_npu.native.mxrec.hstu_v2.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(hstu_v2.KERNELS)
SCHEMAS: dict[str, str] = dict(hstu_v2.SCHEMAS)

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
