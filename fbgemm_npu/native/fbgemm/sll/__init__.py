"""The sll family: upstream's SLL jagged ops (``fbgemm_gpu.sll``) on npu -- the jagged-dense and
jagged-jagged bmms (dense or jagged output), the dense-jagged cat, the self subtraction and the
elementwise add / mul.  The attention-side SLL ops (softmaxes, jagged2_to_padded_dense, the flash
attentions) are the ``sll_attention`` family.

``fbgemm_gpu.sll`` defines the schemas and is not imported by ``import fbgemm_gpu``: it is
imported here, before the registrar reads ``KERNELS`` (it adds ops and their CPU kernels only;
no existing dispatch entry changes, tests/core/test_import.py).
"""

from __future__ import annotations

import fbgemm_gpu.sll  # noqa: F401  (the sll_* schemas and their CPU / Meta kernels)

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.sll import bmm, cat_sub, elementwise, jagged_out_autograd
from fbgemm_npu.native.fbgemm.sll.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(bmm.KERNELS, elementwise.KERNELS, cat_sub.KERNELS, jagged_out_autograd.KERNELS)
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
