"""Backward of the TBE lookup: per-row aggregated gradients and in-place row writes.

Math: for index ``i`` of feature ``t`` in bag ``k`` (sample ``b``) the gradient of its table row
is ``g_i = s_i * grad_output[b, D_offsets[t] : D_offsets[t] + D_t]`` with ``s_i`` the per-sample
weight (1 unweighted), divided by the bag length for MEAN; pooling NONE takes row ``i`` of
``grad_output``.  Rows hit several times in a batch receive the sum of their ``g_i`` (upstream's
"exact" optimizers de-duplicate the same way), and the optimizer then updates each touched row
once.  Indices past ``offsets[-1]`` get no gradient.  With ``gradient_clipping`` the caller
first clamps ``grad_output`` to ``[-max_gradient, max_gradient]``, as upstream does.

Program per table class (:mod:`._utils`), without a host sync and without a
buffer the size of a table -- every intermediate is ``O(L x D)`` for ``L`` indices:

1. sort the de-duplication keys (``weights row + 1``; 0 for indices of other classes, which so
   form one run of their own) and permute the class's index matrix with the sort;
2. run ids by a cumsum over "key differs from its predecessor" (runs numbered from 0);
3. the runs' start positions (a searchsorted of the run ids) are bag offsets: one
   ``_embedding_bag`` over ``grad_output``'s rows, with the per-index scale as per-sample weights,
   sums each run's gradient into row ``k`` of an ``[L, D]`` buffer (zero past the last run);
4. ``index_copy`` the permuted index matrix to its run id: column ``k`` names run ``k``'s rows in
   every buffer (duplicates of a run write identical values, so the result is deterministic);
   a slot whose key is 0 is empty or holds the other classes' run: it must change nothing.

The optimizer (:mod:`.optimizers`) computes new values for the ``L`` run slots
(or, in its fast form, updates that are exact zeros on skipped slots, added as they are);
:func:`write_rows` adds ``new - old`` at each valid slot's row with ``index_add`` and 0 at the
others, so padding slots and foreign runs change nothing; the new value is rounded
to the buffer's dtype before the difference is taken, so a row ends exactly at its new value
whenever old and new are within a factor of two of each other (Sterbenz), and within one rounding
otherwise.

Launches (one class, non-VBE, SUM, fp32 gradient): sort, permute, the run ids (``zero_``, a compare,
``cumsum``), the run starts, _embedding_bag, zeros + index_copy, the skip mask; the class's columns
are selected when the class is not the whole output, per-sample weights and MEAN add the per-index
scale, a half-precision gradient its cast to fp32.  Writing one buffer: the difference, its mask and
the ``index_add`` (after a rounding for half precision).  Launches and syncs: ``BUDGETS`` in
``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native.fbgemm.tbe._utils import TableClass, TbePlan, arange_cached
from fbgemm_npu.native.fbgemm.tbe.forward import POOLING_MEAN, POOLING_NONE, ForwardState, VbeArgs

__all__ = [
    "RunSlots",
    "accumulate_rows",
    "aggregate_class",
    "aggregate_rows",
    "grad_rows_unsorted",
    "index_scale",
    "write_rows",
]


@dataclass
class RunSlots:
    """One class's de-duplicated rows: ``L`` slots, the first ones holding the runs."""

    agg: torch.Tensor  # [L, D] fp32: aggregated gradient of run k (0 for empty slots)
    index: torch.Tensor  # [m, L]: run k's rows (see TableClass.rows), 0 for empty slots; row 1
    # (the key) is 0 exactly for the slots to skip: empty, or the run of other classes' indices
    seg: torch.Tensor | None = None  # [L] run of each index in sorted order
    perm: torch.Tensor | None = None  # [L] the sort's permutation (sorted position -> index)


def _class_grad_2d(
    plan: TbePlan,
    cls: TableClass,
    grad_output: torch.Tensor,
    state: ForwardState,
    pooling_mode: int,
    vbe: VbeArgs | None,
) -> torch.Tensor:
    """``grad_output`` as a ``[rows, D]`` matrix whose rows row 2 of the index matrix addresses
    (set by the forward)."""
    go = grad_output.contiguous()
    if pooling_mode == POOLING_NONE:
        return go.view(-1, cls.D)
    if vbe is not None:
        starts = state.row_starts
        assert starts is not None
        elem = starts[:, None] + arange_cached(cls.D, go.device)[None, :]
        # Bags of other classes may be narrower: keep their (unused) reads inside the buffer.
        elem = elem.clamp_(max=max(go.numel() - 1, 0))
        return go.view(-1)[elem]
    B = state.B
    if plan.single_class:
        return go.view(B * plan.T, cls.D)
    return go.view(B, plan.total_D).index_select(1, cls.cols.view(-1)).view(-1, cls.D)


def index_scale(
    state: ForwardState,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
) -> torch.Tensor | None:
    """Per-index factor of the gradient rows (per-sample weight, 1 / bag length), or None."""
    scale = indice_weights
    if pooling_mode == POOLING_MEAN:
        lengths = (offsets[1:] - offsets[:-1]).clamp_(min=1)
        n = lengths.index_select(0, state.bag.clamp(max=max(lengths.numel() - 1, 0)))
        # reciprocal promotes the integer lengths to float itself: no separate cast launch
        scale = torch.reciprocal(n) if scale is None else scale / n
    return scale


def grad_rows_unsorted(
    plan: TbePlan,
    cls: TableClass,
    mat: torch.Tensor,
    grad_output: torch.Tensor,
    state: ForwardState,
    pooling_mode: int,
    vbe: VbeArgs | None,
) -> torch.Tensor:
    """Each index's ``grad_output`` row for this class, in index order (no scaling): ``[L, D]``."""
    g2d = _class_grad_2d(plan, cls, grad_output, state, pooling_mode, vbe)
    if pooling_mode == POOLING_NONE:
        return g2d  # row i is index i's (the forward leaves row 2 of the matrix unset)
    return g2d.index_select(0, mat[2])


def aggregate_class(
    plan: TbePlan,
    cls: TableClass,
    mat: torch.Tensor,
    grad_output: torch.Tensor,
    state: ForwardState,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    vbe: VbeArgs | None,
) -> RunSlots:
    """Steps 1-4 of the module docstring for one class; see there for what it launches."""
    g2d = _class_grad_2d(plan, cls, grad_output, state, pooling_mode, vbe)
    per_index = pooling_mode == POOLING_NONE
    return aggregate_rows(mat, g2d, per_index, state, offsets, pooling_mode, indice_weights)


def aggregate_rows(
    mat: torch.Tensor,
    g2d: torch.Tensor,
    per_index: bool,
    state: ForwardState,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
) -> RunSlots:
    """Steps 1-4 given the gradient rows ``g2d``: row ``i`` is index ``i``'s when
    ``per_index`` (pooling NONE, or rows gathered per index by the traced lookup), else row 2 of
    the index matrix names each index's row."""
    L = mat.size(1)
    dev = mat.device
    key_sorted, perm = torch.sort(mat[1], stable=True)
    index_sorted = mat.index_select(1, perm)
    seg = torch.empty(L, dtype=torch.int64, device=dev)
    seg[:1].zero_()
    torch.cumsum(key_sorted[1:] != key_sorted[:-1], 0, dtype=torch.int64, out=seg[1:])

    # Run k is positions run_start[k] .. run_start[k + 1] of the sorted order (empty past the
    # last run): one _embedding_bag gathers, scales and sums each run's gradient rows.
    run_start = torch.searchsorted(seg, arange_cached(L + 1, dev))
    if g2d.dtype != torch.float32:  # accumulate in fp32, as upstream does
        g2d = g2d.to(torch.float32)
    scale = index_scale(state, offsets, pooling_mode, indice_weights)
    psw = None if scale is None else scale.to(torch.float32).index_select(0, perm)
    # the gradient row of each sorted index: row 2 of the matrix, or the index's own position,
    # which the sort's permutation is
    g_rows = perm if per_index else index_sorted[2]
    agg = torch._embedding_bag(g2d, g_rows, run_start, False, 0, False, psw, True, -1)[0]
    index = torch.zeros_like(mat).index_copy_(1, seg, index_sorted)
    return RunSlots(agg=agg, index=index, seg=seg, perm=perm)


def write_rows(
    target: torch.Tensor,
    rows: torch.Tensor,
    old: torch.Tensor,
    new: torch.Tensor,
    invalid: torch.Tensor,
) -> None:
    """``target[rows[k]] = new[k]`` for every valid slot ``k``, in place, deterministic.

    ``target``: a ``[n, D]`` view or a 1-D buffer; ``old``: the values gathered at ``rows`` (in
    ``target``'s dtype); ``new``: the new values (any float dtype).  Launches: the difference,
    its mask and the ``index_add``, after a rounding when ``new`` is not in ``target``'s dtype.
    """
    if new.dtype != target.dtype:
        new = new.to(target.dtype)
    delta = new - old
    # masked_fill, not a multiply: the values of invalid slots may be inf / nan
    delta.masked_fill_(invalid if delta.dim() == 1 else invalid[:, None], 0)
    accumulate_rows(target, rows, delta)


def accumulate_rows(target: torch.Tensor, rows: torch.Tensor, delta: torch.Tensor) -> None:
    """``target[rows[k]] += delta[k]`` in place: one ``index_add`` written into ``target``
    itself, which torch_npu runs natively (its in-place ``index_add_`` is not in the list) and
    the CPU runs about twice as fast as ``index_put_(accumulate=True)``."""
    torch.index_add(target, 0, rows, delta, out=target)
