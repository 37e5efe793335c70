"""The FuXi HSTU family (Rec SDK's FuXi-alpha attention): ``mxrec::hstu_fuxi`` and
``mxrec::hstu_dense_backward_fuxi``, bound by autograd (``fuxi.py``)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.hstu_fuxi import fuxi
from fbgemm_npu.native.mxrec.hstu_fuxi.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(fuxi.KERNELS))
SCHEMAS: dict[str, str] = dict(fuxi.SCHEMAS)

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
