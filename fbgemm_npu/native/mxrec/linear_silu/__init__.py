"""The linear_silu family: Rec SDK's fused UVQK projection, ``mxrec::in_linear_silu``
(differentiable), ``mxrec::distance_in_linear_silu`` (the same forward, no autograd) and
``mxrec::in_linear_silu_backward``.

Our own schemas (Rec SDK's, verbatim but for the backward's ``Tensor?[]`` result); the same
device-generic tensor program at PrivateUse1 and CPU, Meta kernels, and autograd
(AutogradPrivateUse1 / AutogradCPU) for ``in_linear_silu``.  Semantics: Rec SDK's
``in_linear_silu.cpp`` and its backward test golden; each module's docstring has the math.
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.linear_silu import backward, forward
from fbgemm_npu.native.mxrec.linear_silu.budgets import BUDGETS

_kernels = merge_kernels(forward.KERNELS, backward.KERNELS)
_kernels[forward.IN_LINEAR_SILU].update(backward.AUTOGRAD)
KERNELS = guard_tensor_arguments(_kernels)
SCHEMAS: dict[str, str] = {**forward.SCHEMAS, **backward.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
