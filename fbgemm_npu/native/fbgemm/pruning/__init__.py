"""The pruning family: the IntNBit TBE's row-pruning remaps (``fbgemm::pruned_hashmap_insert``,
``fbgemm::pruned_hashmap_lookup``, ``fbgemm::pruned_array_lookup``), which upstream's
``IntNBitTableBatchedEmbeddingBagsCodegen`` builds in ``set_index_remappings`` and applies to
the raw indices before its lookup (``split_table_batched_embeddings_ops_inference.py``)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.pruning import insert, lookup
from fbgemm_npu.native.fbgemm.pruning.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(lookup.KERNELS, insert.KERNELS))
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
