"""The rank1 family: Rec SDK's ``mxrec::gather_for_rank1`` (autograd) and
``mxrec::index_select_for_rank1_backward``.

Our own schemas (Rec SDK's, the backward's ``Tensor[]`` result as ``Tensor?[]`` so it can hold
the ``None`` of the index's gradient); the same tensor program at PrivateUse1 and CPU, Meta
kernels, autograd at AutogradPrivateUse1 / AutogradCPU.  Semantics: Rec SDK's
``gather_for_rank1.cpp`` and its tests; ``gather.py``'s docstring has the math.
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.rank1 import gather
from fbgemm_npu.native.mxrec.rank1.budgets import BUDGETS

KERNELS = guard_tensor_arguments(merge_kernels(gather.KERNELS))
SCHEMAS: dict[str, str] = {**gather.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
