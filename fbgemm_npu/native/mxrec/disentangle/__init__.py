"""The disentangle family: Rec SDK's DeBERTa disentangled attention,
``mxrec::disentangle_attention`` (Rec SDK's schema, verbatim; forward only there) and our own
``mxrec::disentangle_attention_backward``.

The same device-generic tensor program at PrivateUse1 and CPU, Meta kernels, and autograd
(AutogradPrivateUse1 / AutogradCPU) for all three outputs, which Rec SDK lacks.  Semantics: Rec
SDK's golden (``cust_op/test/disetangle_attention/torch/gloden.py``); ``attention.py`` has the
math and how it differs from HuggingFace DeBERTa-v2, ``backward.py`` the gradients.
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.disentangle import attention, backward
from fbgemm_npu.native.mxrec.disentangle.budgets import BUDGETS

_kernels = merge_kernels(attention.KERNELS, backward.KERNELS)
_kernels[attention.DISENTANGLE_ATTENTION].update(backward.AUTOGRAD)
KERNELS = guard_tensor_arguments(_kernels)
SCHEMAS: dict[str, str] = {**attention.SCHEMAS, **backward.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
