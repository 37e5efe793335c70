"""The reorder family: upstream's inference batching ops (``sparse_ops_cpu.cpp``), which turn
the request-major data of ``B`` batched requests into table-major data -- lengths
(``reorder_batched_ad_lengths``), indices (``reorder_batched_ad_indices``, and
``cat_reorder_batched_ad_indices`` for one tensor per request) and sequence embedding rows
(``reorder_batched_sequence_embeddings``).  Each is one gather by an int32-scan index
(``_utils.py``)."""

from __future__ import annotations

from fbgemm_npu.native._checks import guard_tensor_arguments
from fbgemm_npu.native.family import merge_kernels
from fbgemm_npu.native.fbgemm.reorder import cat, indices, lengths
from fbgemm_npu.native.fbgemm.reorder.budgets import BUDGETS

# every kernel checks its tensor arguments first (None, objects): native/_checks.py
KERNELS = guard_tensor_arguments(merge_kernels(lengths.KERNELS, indices.KERNELS, cat.KERNELS))
SCHEMAS: dict[str, str] = {}

__all__ = ["BUDGETS", "KERNELS", "SCHEMAS"]
