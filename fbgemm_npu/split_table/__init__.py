"""Table-batched embeddings (TBE) on npu.

* :mod:`fbgemm_npu.split_table.lookup`: the autograd function behind every
  ``split_embedding_codegen_lookup_<opt>_function_pt2`` op on npu (forward, and a backward that
  applies the optimizer to the touched rows in place);
* :mod:`fbgemm_npu.split_table.optimizers`: the optimizers' math over de-duplicated rows;
* :mod:`fbgemm_npu.split_table.dense`: ``dense_embedding_codegen_lookup_function``.

:func:`register_host_values` lets module-level code hand the kernels a TBE's layout (the host
values of ``D_offsets``, ``weights_offsets``, state offsets) so that no call needs a host sync to
learn it.
"""

from __future__ import annotations

from fbgemm_npu.native._tbe_utils import register_host_values

__all__ = ["register_host_values"]
