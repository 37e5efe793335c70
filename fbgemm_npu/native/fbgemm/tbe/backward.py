"""Backward of the TBE lookup: per-row aggregated gradients and in-place row writes.

Math: for index ``i`` of feature ``t`` in bag ``k`` (sample ``b``) the gradient of its table row
is ``g_i = s_i * grad_output[b, D_offsets[t] : D_offsets[t] + D_t]`` with ``s_i`` the per-sample
weight (1 unweighted), divided by the bag length for MEAN; pooling NONE takes row ``i`` of
``grad_output``.  Rows hit several times in a batch receive the sum of their ``g_i`` (upstream's
"exact" optimizers de-duplicate the same way), and the optimizer then updates each touched row
once.  Indices past ``offsets[-1]`` get no gradient.  With ``gradient_clipping`` the caller
first clamps ``grad_output`` to ``[-max_gradient, max_gradient]``, as upstream does.

Program per table class (:mod:`._utils`), without a host sync, without a buffer the size of a
table -- every intermediate is ``O(L x D)`` for ``L`` indices -- and without an op a 910B runs on
its AI CPU (docs/hardware.md: integer ``sort``, ``searchsorted``, int64 ``cumsum``):

1. sort the de-duplication keys (``weights row + 1``; 0 for indices of other classes, which so
   form one run of their own) stably *as float32*, exact while the keys stay below ``2**24`` --
   decided on the host from the class's row count (``TableClass.key_bound``); larger tables sort
   two 24-bit digits in two stable float passes (an LSD radix sort, exact below ``2**48``) --
   and permute the class's index matrix with the sort;
2. run ids ``1, 2, ...`` by an int32 cumsum over "key differs from its predecessor" (a one at
   sorted position 0);
3. the runs' start positions by counting: an int32 ``index_add`` of ones at each run id gives
   the run lengths, their int32 cumsum the starts (``searchsorted`` of the run ids before);
   they are bag offsets: one ``_embedding_bag`` over ``grad_output``'s rows, with the per-index
   scale as per-sample weights, sums each run's gradient into row ``k`` of an ``[L, D]`` buffer
   (zero past the last run), in sorted -- that is index -- order within a run, as before;
4. ``index_put`` the permuted index matrix at its run ids (out of place, into cached zeros):
   column ``k`` names run ``k``'s rows in every buffer (the copies of a run agree on every
   row the optimizer reads; row 2, the gradient row, is not read again); a slot whose key is 0
   is empty or holds the other classes' run: it must change nothing.

The order of the slots -- ascending rows, each touched row once -- and so every optimizer
update is what the integer sort gave.  int32 run ids need ``L < 2**31`` (decided on the host);
above it the ids are int64 (an AI-CPU cumsum and ``index_add``: a fused kernel is the remedy).

The optimizer (:mod:`.optimizers`) computes new values for the ``L`` run slots
(or, in its fast form, updates that are exact zeros on skipped slots, added as they are);
:func:`write_rows` adds ``new - old`` at each valid slot's row with ``index_add`` and 0 at the
others, so padding slots and foreign runs change nothing; the new value is rounded
to the buffer's dtype before the difference is taken, so a row ends exactly at its new value
whenever old and new are within a factor of two of each other (Sterbenz), and within one rounding
otherwise.

Where Triton is chosen (``native/_triton.py``; :func:`triton_backward` says which calls), the
fused kernels of :mod:`._triton_backward` replace steps 2-4 and the optimizer's tensor program:
a key kernel, the sort of step 1 and one kernel that sums and updates each touched row once, for
every class at once (3 launches per call).

Launches (one class, non-VBE, SUM, fp32 gradient, keys below ``2**24``): the float key, sort,
permute, the run ids (``fill_``, a compare, ``cumsum``), the run starts (``index_add``,
``cumsum``), _embedding_bag, index_put, the skip mask (10; two-digit keys: 7 more); the
class's columns are selected when the class is not the whole output, per-sample weights and
MEAN add the per-index scale, a half-precision gradient its cast to fp32.  Writing one buffer:
the difference, its mask and the ``index_add`` (after a rounding for half precision).  Launches
and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.native._index import filled_i32
from fbgemm_npu.native.fbgemm.tbe._utils import TableClass, TbePlan, arange_cached, zeros_cached
from fbgemm_npu.native.fbgemm.tbe.forward import POOLING_MEAN, POOLING_NONE, ForwardState, VbeArgs

__all__ = [
    "RunSlots",
    "accumulate_rows",
    "aggregate_class",
    "aggregate_rows",
    "grad_rows_unsorted",
    "index_scale",
    "sort_keys",
    "run_triton_backward",
    "triton_backward",
    "write_rows",
]


@dataclass
class RunSlots:
    """One class's de-duplicated rows: ``L`` slots, the first ones holding the runs."""

    agg: torch.Tensor  # [L, D] fp32: aggregated gradient of run k (0 for empty slots)
    index: torch.Tensor  # [m, L]: run k's rows (see TableClass.rows), 0 for empty slots; row 1
    # (the key) is 0 exactly for the slots to skip: empty, or the run of other classes' indices
    seg: torch.Tensor | None = None  # [L] run of each index in sorted order, from 1 (int32)
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
    return aggregate_rows(
        mat, g2d, per_index, state, offsets, pooling_mode, indice_weights, cls.key_bound
    )


# float32 holds every integer up to 2**24 exactly: keys below it sort as float32 keys (a 910B
# sorts float keys on its AI Core, integer keys on its AI CPU); larger ones by 24-bit digits
F32_EXACT = 1 << 24
_DIGIT = 1 << 24


def sort_keys(keys: torch.Tensor, key_bound: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(keys in ascending order, the permutation)`` of the non-negative int64 ``keys``, stable
    (equal keys keep their order), without an integer sort.

    ``key_bound``: an exclusive bound of the keys known on the host (None: unknown).  Below
    ``2**24``: one stable sort of the keys as float32 (2 launches; the sorted keys come back as
    float32, exact).  Else an LSD radix sort of two 24-bit digits, each a stable float32 sort
    (9 launches; keys below ``2**48``, the sorted keys int64); above ``2**48`` (no table has
    so many rows) the int64 sort, which a 910B runs on its AI CPU.
    """
    if key_bound is not None and key_bound <= F32_EXACT:
        return torch.sort(keys.to(torch.float32), stable=True)
    if key_bound is not None and key_bound > _DIGIT * _DIGIT:
        return torch.sort(keys, stable=True)
    low = torch.remainder(keys, _DIGIT).to(torch.float32)
    by_low = torch.sort(low, stable=True).indices
    high = torch.div(keys.index_select(0, by_low), _DIGIT, rounding_mode="floor")
    perm = by_low.index_select(0, torch.sort(high.to(torch.float32), stable=True).indices)
    return keys.index_select(0, perm), perm


def _run_ids(key_sorted: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The run of each sorted key, numbered from 1: a one where a run starts (position 0 and
    every change of key), then a cumsum in ``dtype`` (int32: the AI Core).  3 launches."""
    starts = torch.empty(key_sorted.shape, dtype=torch.bool, device=key_sorted.device)
    starts[:1].fill_(True)
    torch.ne(key_sorted[1:], key_sorted[:-1], out=starts[1:])
    return torch.cumsum(starts, 0, dtype=dtype)


def _run_starts(run: torch.Tensor, L: int) -> torch.Tensor:
    """``[L + 1]``: where run ``k`` (from 0) starts in the sorted order, ``L`` past the last
    run -- ``searchsorted(run - 1, arange(L + 1))`` by counting: the length of run ``k`` at
    ``k + 1`` (an ``index_add`` of ones at the 1-based run ids), then a cumsum, in ``run``'s
    dtype.  2 launches."""
    dev = run.device
    if run.dtype == torch.int32:
        zeros, ones = filled_i32(L + 1, 0, dev), filled_i32(L, 1, dev)
    else:
        zeros = torch.zeros(L + 1, dtype=run.dtype, device=dev)
        ones = torch.ones(L, dtype=run.dtype, device=dev)
    return torch.cumsum(torch.index_add(zeros, 0, run, ones), 0, dtype=run.dtype)


def aggregate_rows(
    mat: torch.Tensor,
    g2d: torch.Tensor,
    per_index: bool,
    state: ForwardState,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    key_bound: int | None = None,
) -> RunSlots:
    """Steps 1-4 given the gradient rows ``g2d``: row ``i`` is index ``i``'s when
    ``per_index`` (pooling NONE, or rows gathered per index by the traced lookup), else row 2 of
    the index matrix names each index's row.  ``key_bound``: see :func:`sort_keys`."""
    L = mat.size(1)
    dev = mat.device
    key_sorted, perm = sort_keys(mat[1], key_bound)
    index_sorted = mat.index_select(1, perm)
    # int32 run ids while they fit (decided from L on the host): int64 cumsum is AI CPU
    run = _run_ids(key_sorted, torch.int32 if L < 2**31 else torch.int64)

    # Run k is positions run_start[k] .. run_start[k + 1] of the sorted order (empty past the
    # last run): one _embedding_bag gathers, scales and sums each run's gradient rows.
    run_start = _run_starts(run, L)
    if g2d.dtype != torch.float32:  # accumulate in fp32, as upstream does
        g2d = g2d.to(torch.float32)
    scale = index_scale(state, offsets, pooling_mode, indice_weights)
    psw = None if scale is None else scale.to(torch.float32).index_select(0, perm)
    # the gradient row of each sorted index: row 2 of the matrix, or the index's own position,
    # which the sort's permutation is
    g_rows = perm if per_index else index_sorted[2]
    agg = torch._embedding_bag(g2d, g_rows, run_start, False, 0, False, psw, True, -1)[0]
    # column k + 1 of the buffer is run k (ids from 1): an out-of-place index_put along dim 1
    # into cached zeros takes the int32 ids (index_copy_ wants int64 ones: a cast)
    zeros = zeros_cached(mat.size(0) * (L + 1), mat.dtype, dev).view(mat.size(0), L + 1)
    slots = torch.ops.aten.index_put.default(zeros, [None, run], index_sorted)
    return RunSlots(agg=agg, index=slots[:, 1:], seg=run, perm=perm)


def write_rows(
    target: torch.Tensor,
    rows: torch.Tensor,
    old: torch.Tensor,
    new: torch.Tensor | float,
    invalid: torch.Tensor,
) -> None:
    """``target[rows[k]] = new[k]`` for every valid slot ``k``, in place, deterministic.

    ``target``: a ``[n, D]`` view or a 1-D buffer; ``old``: the values gathered at ``rows`` (in
    ``target``'s dtype); ``new``: the new values (any float dtype), or one Python float for
    every slot (``prev_iter := iter``).  Launches: the difference, its mask and the
    ``index_add``, after a rounding when ``new`` is not in ``target``'s dtype.
    """
    if isinstance(new, float):
        # one op: the kernel rounds the constant to the op's dtype (prev_iter is fp32, and
        # iterations below 2**24 are exact in it)
        delta = torch.rsub(old, new)
    else:
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


# The optimizers the fused Triton step (:mod:`._triton_backward`) runs, and its widest D.
TRITON_OPTIMIZERS = frozenset(
    ("sgd", "adagrad", "rowwise_adagrad", "adam", "partial_rowwise_adam", "lamb",
     "partial_rowwise_lamb", "lars_sgd")
)  # fmt: skip
TRITON_MAX_D = 2048


def triton_backward(
    call: Any, plan: TbePlan, state: ForwardState, grad_output: torch.Tensor
) -> bool:
    """Whether the backward and optimizer step run as the fused Triton kernels of
    :mod:`._triton_backward` (:func:`run_triton_backward`: the keys, their sort, one step
    kernel for every class): the kernel mode and the call allow it; ``False``: the caller runs
    the tensor program.  Not supported (the tensor program serves them): other optimizers,
    Adam's rowwise bias correction, global weight decay, VBE, a device learning rate, traced
    calls, D above ``TRITON_MAX_D``.  ``call``: the :class:`.call.LookupCall`."""
    from fbgemm_npu.native._triton import use_triton
    from fbgemm_npu.native.fbgemm.tbe.optimizers import OPTIMIZERS

    opt = call.optimizer
    ok = (
        opt in TRITON_OPTIMIZERS
        and len(call.states) == len(OPTIMIZERS[opt].states)
        and call.gwd is None
        and call.vbe is None
        and not call.traced
        and not isinstance(call.step.lr, torch.Tensor)
        and grad_output.dim() == 2
        and grad_output.dtype in (torch.float32, torch.float16, torch.bfloat16)
        and len(state.mats) == len(plan.classes) > 0
        and all(cls.D <= TRITON_MAX_D for cls in plan.classes)
    )
    return use_triton(call.op, grad_output.device, supported=ok)


def run_triton_backward(
    call: Any, plan: TbePlan, state: ForwardState, grad_output: torch.Tensor, iw_grad: bool
) -> torch.Tensor | None:
    """The fused step :func:`triton_backward` chose, in place; returns the per-sample-weight
    gradient when ``iw_grad`` (written by the same kernels), else None."""
    from fbgemm_npu.native.fbgemm.tbe._triton_backward import step_triton

    return step_triton(call, plan, state, grad_output, iw_grad)
