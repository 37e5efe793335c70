"""The optim family: Rec SDK's fused sparse optimizers, ``mxrec::fused_sgd`` and
``mxrec::fused_lazy_adam``, in-place row updates of an embedding table (and its state).

Rec SDK has them for TensorFlow only; the schemas are ours (the issue's): the mutated buffers
are ``Tensor(a!)`` arguments returned as the outputs.  The same device-generic tensor program at
PrivateUse1 and CPU, Meta kernels; no autograd (they are the optimizer step).
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.optim import fused_lazy_adam, fused_sgd
from fbgemm_npu.native.mxrec.optim.budgets import BUDGETS

KERNELS = guard_tensor_arguments(merge_kernels(fused_sgd.KERNELS, fused_lazy_adam.KERNELS))
SCHEMAS: dict[str, str] = {**fused_sgd.SCHEMAS, **fused_lazy_adam.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
