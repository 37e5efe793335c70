"""Upstream's TBE Python classes on npu: what adapts them, not what they compute.

The per-call TBE kernels (forward, backward, optimizers, the lookup autograd, the dense TBE,
metadata) are the tbe family, :mod:`fbgemm_npu.native.fbgemm.tbe`; this package only adapts the
classes:

* :mod:`fbgemm_npu.split_table.device`: the narrow patches that let upstream's classes run on npu;
* :func:`register_tbe_layout`: hands a TBE's layout (``D_offsets``, ``weights_offsets``, the
  optimizer states' offsets) from the host-side attributes of upstream's module to the kernels'
  cache, so that no call needs a host sync to learn it (otherwise the first call with a new
  layout reads it back once); :func:`register_host_values` does the same for one tensor.
"""

from __future__ import annotations

from itertools import accumulate

import torch

from fbgemm_npu.native.fbgemm.tbe._utils import register_host_values

__all__ = ["register_host_values", "register_tbe_layout"]

_STATE_PREFIXES = ("weights", "momentum1", "momentum2", "prev_iter", "row_counter")


def register_tbe_layout(tbe: torch.nn.Module) -> None:
    """Seed the layout cache of the TBE kernels from an upstream TBE module (no device reads).

    Works for upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` and
    ``DenseTableBatchedEmbeddingBagsCodegen``: ``D_offsets`` from ``embedding_specs`` and
    ``feature_table_map``, the ``<state>_offsets`` buffers from the ``<state>_physical_offsets``
    host lists.  Call it again after moving the
    module to another device (the buffers are new tensors then).
    """
    specs = tbe.embedding_specs
    ftm = list(getattr(tbe, "feature_table_map", None) or range(len(specs)))
    dims = [int(specs[t][1]) for t in ftm]
    d_offsets = getattr(tbe, "D_offsets", None)
    if isinstance(d_offsets, torch.Tensor) and d_offsets.numel() == len(ftm) + 1:
        register_host_values(d_offsets, [0, *accumulate(dims)])
    for prefix in _STATE_PREFIXES:
        physical = getattr(tbe, f"{prefix}_physical_offsets", None)
        buf = getattr(tbe, f"{prefix}_offsets", None)
        if physical is None or not isinstance(buf, torch.Tensor) or buf.numel() != len(ftm):
            continue
        register_host_values(buf, [int(physical[t]) for t in ftm])
