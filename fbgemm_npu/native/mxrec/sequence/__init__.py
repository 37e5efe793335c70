"""The sequence family: Rec SDK's ``mxrec::multislice_concat`` and ``mxrec::reverse_sequence``
(autograd).

Our own schemas (Rec SDK's, verbatim); the same tensor program at PrivateUse1 and CPU, Meta
kernels, and autograd (AutogradPrivateUse1 / AutogradCPU) for reverse_sequence, whose backward
is itself.  Semantics: Rec SDK's ``multislice_concat.cpp`` / ``reverse_sequence.cpp`` and their
tests; each module's docstring has the math.
"""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.mxrec.sequence import multislice, reverse
from fbgemm_npu.native.mxrec.sequence.budgets import BUDGETS

KERNELS = guard_tensor_arguments(merge_kernels(multislice.KERNELS, reverse.KERNELS))
SCHEMAS: dict[str, str] = {**multislice.SCHEMAS, **reverse.SCHEMAS}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
