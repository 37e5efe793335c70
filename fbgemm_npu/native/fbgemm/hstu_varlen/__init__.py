"""FBGEMM's varlen HSTU attention (the ops of ``fbgemm_gpu.experimental.hstu``):
``fbgemm::hstu_varlen_fwd_80`` and ``fbgemm::hstu_varlen_bwd_80``, schemas defined here
(fbgemm-gpu-cpu ships no HSTU), kernels on npu, CPU and Meta.  The Python API is
``fbgemm_npu.experimental.hstu``.  (Named ``hstu_varlen``, not ``hstu``: family names are unique
across namespaces, and ``mxrec`` has an ``hstu`` family.)"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.hstu_varlen import varlen
from fbgemm_npu.native.fbgemm.hstu_varlen.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(varlen.KERNELS))
SCHEMAS: dict[str, str] = dict(varlen.SCHEMAS)

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
