"""The norm family: Rec SDK's fused layer-norm ops, ``mxrec::ln_mul``, ``mxrec::token_mixing``
and ``mxrec::norm_multiply_dropout`` (+ our ``norm_multiply_dropout_backward``), each with
autograd (Rec SDK's ln_mul and token_mixing have none).

Our own schemas (Rec SDK's, verbatim; the backward's ours, as Rec SDK has no torch op for it);
the same device-generic tensor program at PrivateUse1 and CPU, Meta kernels, autograd at
AutogradPrivateUse1 / AutogradCPU.  Built on torch's ``native_layer_norm`` /
``native_layer_norm_backward`` (one torch_npu kernel each).  Semantics: Rec SDK's adapters and
test goldens; each module's docstring has the math.
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.norm import dropout, ln_mul, token_mixing
from fbgemm_npu.native.mxrec.norm.budgets import BUDGETS

KERNELS = guard_tensor_arguments(
    merge_kernels(ln_mul.KERNELS, token_mixing.KERNELS, dropout.KERNELS)
)
SCHEMAS: dict[str, str] = {**ln_mul.SCHEMAS, **token_mixing.SCHEMAS, **dropout.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
