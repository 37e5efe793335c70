"""The sll_attention family: upstream's SLL softmax, jagged2 padding and attention ops
(``fbgemm::sll_jagged_softmax``, ``sll_jagged2_softmax``, ``sll_jagged2_to_padded_dense``,
``sll_jagged_dense_flash_attention``, ``sll_jagged_flash_attention_basic``,
``sll_multi_head_jagged_flash_attention``).

Their schemas come from ``fbgemm_gpu.sll``, which ``import fbgemm_gpu`` does not load: it is
imported here first (it defines the ops and registers upstream's CPU / AutogradCPU kernels;
nothing that existed before changes)."""

from __future__ import annotations

import fbgemm_gpu.sll  # noqa: F401  - the sll_* schemas and upstream's CPU kernels

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.sll_attention import basic, dense, padded, softmax
from fbgemm_npu.native.fbgemm.sll_attention.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(
    merge_kernels(softmax.KERNELS, padded.KERNELS, dense.KERNELS, basic.KERNELS)
)
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
