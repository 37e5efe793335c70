"""The jagged2d family: Rec SDK's ``mxrec::concat_2d_jagged`` and ``mxrec::split_2d_jagged``
(the seed's ``concat_jagged_tensor`` / ``_grad``), each the other's backward.

Our own schemas (Rec SDK's, verbatim); the same tensor program at PrivateUse1 and CPU, Meta
kernels, autograd at AutogradPrivateUse1 / AutogradCPU.  Rec SDK's reserved arguments
(``isReplace``, ``nPrefixFromRight``, ``nPrefixToRight``, ``dense_size``) do what
generative-recommenders' ``pt_jagged_tensors`` / triton jagged ops make them do; ``_plan.py``
has the row arithmetic.
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.jagged2d import concat, split
from fbgemm_npu.native.mxrec.jagged2d.budgets import BUDGETS

KERNELS = guard_tensor_arguments(merge_kernels(concat.KERNELS, split.KERNELS))
SCHEMAS: dict[str, str] = {**concat.SCHEMAS, **split.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
