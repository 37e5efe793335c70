"""The HSTU family (Rec SDK's attention): ``mxrec::hstu_jagged.equal``, ``mxrec::hstu_dense``,
``mxrec::hstu_jagged.delta`` and their backwards."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.hstu import hstu_delta, hstu_dense, hstu_jagged
from fbgemm_npu.native.mxrec.hstu.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(hstu_jagged.KERNELS, hstu_dense.KERNELS, hstu_delta.KERNELS)
)
SCHEMAS: dict[str, str] = {**hstu_jagged.SCHEMAS, **hstu_dense.SCHEMAS, **hstu_delta.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
