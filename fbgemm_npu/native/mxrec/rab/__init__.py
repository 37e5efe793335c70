"""The rab family: Rec SDK's relative attention bias, ``mxrec::relative_attn_bias_pos``,
``mxrec::relative_attn_bias_time`` (+ ``_with_index``) and ``_time_backward``.

Our own schemas (Rec SDK's, verbatim); the same device-generic tensor program at PrivateUse1
and CPU, Meta kernels, and autograd (AutogradPrivateUse1 / AutogradCPU) for the time bias's
weights.  Semantics: Rec SDK's cust_op relative_attn_bias READMEs and test goldens
(``cust_op/test/relative_attn_bias/torch/utils.py``); each module's docstring has the math.
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.rab import pos, time
from fbgemm_npu.native.mxrec.rab.budgets import BUDGETS

KERNELS = guard_tensor_arguments(merge_kernels(pos.KERNELS, time.KERNELS))
SCHEMAS: dict[str, str] = {**pos.SCHEMAS, **time.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
