"""Jagged <-> padded dense: ``fbgemm::jagged_to_padded_dense`` (+ ``_forward``, ``_backward``),
``jagged_1d_to_dense``, ``jagged_2d_to_dense``, ``dense_to_jagged`` (+ ``_forward``) on npu.

This module is the family's public face for them: the kernels are in :mod:`.to_dense` and
:mod:`.to_jagged`, re-exported here.  Math (``k`` jagged dims, ``values`` of ``N`` rows, see
:mod:`._utils` for the walk)::

    to_dense:  out[b, j_1..j_k, :] = values[row(b, j)]   if the walk reaches a row, else padding
    to_jagged: out[row(b, j), :]   = dense[b, j_1..j_k, :] for every such position; other rows 0

Rows longer than ``max_lengths`` are truncated, empty and decreasing rows are padding, exactly as
upstream's loops do.  Values: float32, float16, bfloat16, int32, int64 (upstream's dtypes, CPU and
CUDA alike); offsets: int32 or int64, one dtype for all jagged dims; 1 to 5 jagged dims.  ``values``
may be 1-D (no inner dim) or ``[N, ..., D]`` with size-1 middle dims, as upstream allows.

How: ``dense_index`` gives every dense position its value row (``k`` levels of add of a cached
int64 ``arange`` / compare / pair gather) and its padding mask; to_dense is then one
``index_select`` from ``values`` at the rows clamped into range and one fill of the padding
positions (``masked_fill_``; a ``where`` for int64), to_jagged one ``index_copy_`` into a zeroed
output whose spare row absorbs the padding positions (``where`` / ``remainder`` send them there).
No step runs on a 910B's AI CPU for any dtype (docs/hardware.md), and no read or write leaves its
tensor whatever the data.

Launches: add, ge, clamp, index_select, masked_fill_ (to_dense) or add, ge, where, remainder_,
zero_, index_copy_ (to_jagged), and one more index level per further jagged dim (clamp,
index_select, add, ge, logical_or); the data check (the offsets' int32 range, the rows' compare,
``cat``, ``any``, ``logical_not``, plus each further dim's own check; ``FBGEMM_NPU_VALIDATE=0``
drops it) comes on top.  A fused kernel would do the op and its checks at once.
``dense_to_jagged`` without ``total_L`` reads the output length (the data's
``offsets[-1].max()``) back to the host, as upstream does too.  Launches and syncs: ``BUDGETS``
in ``budgets.py`` (docs/ops.md).

Upstream registers autograd for ``jagged_to_padded_dense_forward``, ``jagged_1d_to_dense``,
``jagged_2d_to_dense`` and ``dense_to_jagged_forward``, and so do we.  The two composite ops
(``jagged_to_padded_dense``, ``dense_to_jagged``) are upstream's ``CompositeImplicitAutograd``
kernels calling the forward ops.  We give them no ``PrivateUse1`` kernel: torch would then treat
them as fused ops on npu, so ``torch.export(...).run_decompositions()`` would keep them where it
decomposes them on CPU (and ``dense_to_jagged`` would be an op of ours returning its input
offsets).  Their ``AutogradPrivateUse1`` kernels run the composites' own program (the forward
op) after the family's argument guard, which upstream's composite lacks; below autograd
(inference mode) upstream's composite runs as it is.  Data errors name the forward op.
Gradients: to_dense's is ``jagged_to_padded_dense_backward`` (to_jagged of the incoming
gradient), to_jagged's is ``jagged_to_padded_dense_forward`` of the
gradient with padding 0, as upstream's.

Rows that overlap (only decreasing offsets make them) are written by several positions; upstream's
loop lets the last one win, ours lets one of them win (the last on CPU and the simulator; on a
device ``index_copy_`` does not order them).  Well-formed offsets never overlap.
"""

from __future__ import annotations

from fbgemm_npu.native.fbgemm.jagged.to_dense import (
    jagged_1d_to_dense_npu,
    jagged_2d_to_dense_npu,
    jagged_to_padded_dense_forward_npu,
    jagged_to_padded_dense_npu,
    to_dense,
)
from fbgemm_npu.native.fbgemm.jagged.to_jagged import (
    dense_to_jagged_forward_npu,
    dense_to_jagged_npu,
    jagged_to_padded_dense_backward_npu,
    scatter_rows,
    to_jagged,
)

__all__ = [
    "dense_to_jagged_forward_npu",
    "dense_to_jagged_npu",
    "jagged_1d_to_dense_npu",
    "jagged_2d_to_dense_npu",
    "jagged_to_padded_dense_backward_npu",
    "jagged_to_padded_dense_forward_npu",
    "jagged_to_padded_dense_npu",
    "scatter_rows",
    "to_dense",
    "to_jagged",
]
