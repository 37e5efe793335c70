"""The inference family: upstream's inference TBE lookup
(``fbgemm::int_nbit_split_embedding_codegen_lookup_function``, behind
``IntNBitTableBatchedEmbeddingBagsCodegen.forward``) on npu."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.inference import lookup
from fbgemm_npu.native.fbgemm.inference.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(lookup.KERNELS))
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
