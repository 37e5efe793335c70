"""Forward of the table-batched embedding (TBE) lookup as device-generic tensor programs.

Math (upstream's ``split_embedding_codegen_forward``): the flat buffer ``weights`` holds every
table; feature ``t`` reads table rows ``weights[weights_offsets[t] + idx * D_t : ... + D_t]``.
Bag ``k`` of the ``T * B`` bags (feature-major: ``k = t * B + b``) holds the indices
``indices[offsets[k] : offsets[k + 1]]``; with per-sample weights ``w`` and ``n_k`` its length,

* SUM:  ``out[b, D_offsets[t] + d] = sum_i w_i * W_t[idx_i, d]``;
* MEAN: the SUM divided by ``n_k`` (an empty bag gives 0);
* NONE (sequence): ``out[i, d] = W_t[idx_i, d]``, one row per index (one D for all features).

With variable batch size per feature (VBE) the bags of feature ``t`` are ``B_offsets[t] ..
B_offsets[t + 1]``, ordered rank by rank, and the output is 1-D: the bag of rank ``r``, feature
``t``, local sample ``b`` sits at ``vbe_output_offsets_feature_rank[r * T + t] + b * D_t``
(measured on upstream's CPU kernel).

Dtypes: weights fp32 / fp16 / bf16; indices and offsets int32 or int64; per-sample weights fp32;
output fp32 / fp16 / bf16 (upstream's ``SparseType`` ints 0 / 1 / 5).  Pooling runs in
``torch._embedding_bag`` (aclnn EmbeddingBag on Ascend) in the weights' dtype: for half-precision
weights the bag sum is rounded to the weights' dtype before the cast to the output dtype, where
upstream accumulates in fp32 -- a difference of one half-precision rounding, within the stated
half-precision tolerances.  Per-sample weights are rounded to the weights' dtype for the same
reason (the kernel takes them in that dtype).

Program (per call, then per table class of :mod:`fbgemm_npu.native.fbgemm.tbe._utils`):

1. ``bag = searchsorted(offsets[1:], arange(L), right=True)`` (int32), the bag of each index
   (``T * B`` past ``offsets[-1]``, which upstream ignores), by ``_utils.segment_ids`` (no AI-CPU
   searchsorted); ``t = bag // B`` (VBE: each bag's block id by ``segment_ids`` and its
   feature by a gather of a cached table, :mod:`.vbe`, then gathered by bag).
2. per class: one ``index_select`` of the class's per-feature (base, mul, bounds) table by ``t``
   and one ``addcmul`` give the index matrix (row 0: the row in the class's ``[n, D]`` view of
   the weights; the other rows serve the backward); before the first class's ``addcmul`` the
   indices are clamped into their own tables with the bounds the gather brought
   (:func:`_bounded_indices`: an index outside its table raises with the data checks on, as
   upstream's CPU kernels raise, and never reads or updates another table's rows);
3. ``_embedding_bag`` over all bags with ``offsets`` (non-member features read row 0 into bags
   that are never written out), then the pooled rows are written to their output columns.

Strided ``indices`` / ``offsets`` views are copied to contiguous tensors first (torch's CPU
``_embedding_bag`` reads their raw buffer); contiguous ones cost nothing.  Where Triton is
chosen (``native/_triton.py``), the calls :func:`_triton_supported` accepts run the fused
kernel of :mod:`._triton_forward` (1 launch, + 1 for the data check).

Launches (non-VBE, one class, fp32): the bag ids (clamp, index_add, cumsum), floor_divide,
index_select, the clamp, addcmul, _embedding_bag, the transposing copy into the output (dtype
conversion included); the index and offsets check with the data checks on (:func:`_bounded_indices`;
unweighted MEAN reuses its closed offsets, or closes them itself with the checks off); the gradient
row of each index when autograd will need the backward (see ``_set_grad_rows``); a cast of
half-precision per-sample weights; for weighted MEAN the bag lengths, a clamp and a divide; a cast
of int32 offsets when the indices are int64 (upstream's module makes them match). Each further class
adds its index_select, addcmul and _embedding_bag, and the member select, cast and index_put_ into
the output. VBE: the per-bag output offsets are data the call brings (:mod:`.vbe`: the block
ids, 4, the feature of each bag and of each index, 2, the output starts, 6), plus the element
scatter (each further class: its member mask, a ``where``): over the catalogue's target for a
fixed-batch lookup (a fused kernel is the remedy).  Nothing a 910B runs on its AI CPU.  The
first call with a new table layout reads the layout on the host unless
``fbgemm_npu.split_table.register_tbe_layout`` gave it; later calls read nothing back.
Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.native._checks import assert_on_device, validation_enabled
from fbgemm_npu.native._triton import use_triton
from fbgemm_npu.native.fbgemm.tbe._utils import TbePlan, arange_cached, class_view, segment_ids
from fbgemm_npu.native.fbgemm.tbe.vbe import (
    VbeBlocks,
    row_output_offsets,
    scatter_member_starts,
    vbe_blocks,
    vbe_row_output_offsets,
)

__all__ = [
    "POOLING_MEAN",
    "POOLING_NONE",
    "POOLING_SUM",
    "ForwardState",
    "VbeArgs",
    "closed_offsets",
    "output_dtype_of",
    "tbe_forward",
    "vbe_row_output_offsets",
]

POOLING_SUM = 0
POOLING_MEAN = 1
POOLING_NONE = 2

INDEX_CHECK = (  # the data check's message, the tensor program's and the Triton kernel's
    "argument 'indices' holds an index outside [0, rows of its table) (-1 included; upstream "
    "raises too), or argument 'offsets' does not start at 0, decreases or ends past the indices "
    "(BoundsCheckMode.WARNING / IGNORE repair all but -1)"
)
# upstream SparseType.as_int() -> torch dtype, for the output dtypes a training TBE supports
_OUTPUT_DTYPES = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16}


def output_dtype_of(op: str, output_dtype: int) -> torch.dtype:
    """Upstream's ``SparseType`` int -> torch dtype; ValueError naming the argument otherwise."""
    if output_dtype not in _OUTPUT_DTYPES:
        raise ValueError(
            f"{op}: argument 'output_dtype' must be 0 (fp32), 1 (fp16) or 5 (bf16) for a "
            f"training lookup, got {output_dtype}"
        )
    return _OUTPUT_DTYPES[output_dtype]


@dataclass
class VbeArgs:
    """Variable-batch-size metadata as upstream's invoker passes it."""

    B_offsets: torch.Tensor  # [T + 1] int32, bags per feature (all ranks)
    output_offsets_feature_rank: torch.Tensor  # [R * T + 1] int64
    B_offsets_rank_per_feature: torch.Tensor  # [T, R + 1] int32
    output_size: int
    # a pre-allocated merged output (upstream's vbe_output): written at vbe_output_offsets
    # (then output_offsets_feature_rank, output_size its numel) and returned
    out: torch.Tensor | None = None


@dataclass
class ForwardState:
    """What the backward needs from the forward (all device tensors, no host values)."""

    bag: torch.Tensor  # [L] bag of each index (T * B past offsets[-1])
    t: torch.Tensor  # [L] feature of each index (T past offsets[-1])
    mats: list[torch.Tensor]  # per class: [m, L] index matrix (see TableClass)
    B: int  # batch size (non-VBE); -1 with VBE
    row_starts: torch.Tensor | None  # VBE: [total_B] output offset of each bag
    index_scale: torch.Tensor | None = None  # [L] fp32 factor of each looked-up row, or None

    def save(self, ctx: Any) -> None:
        """Keep the state for the backward in ``ctx`` as saved tensors: autograd frees them
        after a backward without ``retain_graph`` and keeps them for a second one with it
        (upstream's autograd function saves its tensors the same way)."""
        ctx.save_for_backward(self.bag, self.t, self.row_starts, self.index_scale, *self.mats)
        ctx.tbe_B = self.B

    @classmethod
    def saved(cls, ctx: Any) -> ForwardState:
        """The state :meth:`save` kept in ``ctx``."""
        bag, t, row_starts, scale, *mats = ctx.saved_tensors
        return cls(bag=bag, t=t, mats=mats, B=ctx.tbe_B, row_starts=row_starts, index_scale=scale)


def _bags_and_features(
    plan: TbePlan, indices: torch.Tensor, offsets: torch.Tensor, vbe: VbeArgs | None
) -> tuple[torch.Tensor, torch.Tensor, int, VbeBlocks | None]:
    L = indices.numel()
    total_bags = offsets.numel() - 1
    # int32 for either offsets dtype: bags and features only index (no searchsorted: AI CPU)
    bag = segment_ids(offsets, L)
    if vbe is None:
        B = total_bags // plan.T if plan.T > 0 else 0
        # no bags: every index lies past offsets[-1] (the dummy feature T), as bag // B says
        t = torch.div(bag, B, rounding_mode="floor") if B > 0 else torch.full_like(bag, plan.T)
        return bag, t, B, None
    # the block and feature of each bag (T for the bag past the end), then of each index
    blocks = vbe_blocks(
        vbe.B_offsets, vbe.B_offsets_rank_per_feature, plan.dims_t, total_bags, plan.vbe_cache
    )
    assert blocks.feature is not None
    return bag, blocks.feature.index_select(0, bag), -1, blocks


def _set_grad_rows(
    plan: TbePlan, mats: list[torch.Tensor], bag: torch.Tensor, B: int, pooling_mode: int, vbe: bool
) -> None:
    """Row 2 of each index matrix := the row of the index's gradient in the backward's view of
    ``grad_output`` (``fbgemm_npu.native.fbgemm.tbe.backward``): sample ``b`` and member ``j`` give
    ``b * T_c + j`` (pooled), the bag with VBE.  Done here so that the backward gets it permuted
    with the rest of the matrix.  With pooling NONE the row is the index itself, which the
    backward's sort permutation already is: nothing to do.  Launches: a copy or an add per class
    (after one shared remainder when pooled without VBE)."""
    if pooling_mode == POOLING_NONE:
        return
    if vbe:
        for mat in mats:
            mat[2].copy_(bag)
    else:
        b = torch.remainder(bag, max(B, 1))
        for cls, mat in zip(plan.classes, mats, strict=True):
            mat[2].add_(b, alpha=cls.n_members)


def _bounded_indices(
    op: str,
    indices: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    offsets: torch.Tensor,
    traced: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``indices`` clamped to their tables (``lo``, ``hi``: each index's bounds): an index
    outside ``[0, E_t)`` -- ``-1`` included -- then reads and updates its own table, never
    another.  With the data checks on it raises instead, as upstream's CPU kernels do in every
    ``BoundsCheckMode`` (FATAL refuses it in ``bounds_check_indices``, WARNING and IGNORE repair
    all but ``-1``, NONE checks nothing), and so do ``offsets`` that do not start at 0, decrease
    or end past the indices (only NONE lets them through: upstream's kernel then reads past its
    buffers, or skips the indices before a first offset above 0, which torch's bag cannot).
    Returns the clamped indices and, with the checks on, :func:`closed_offsets` (which MEAN
    needs) and the check's 0-d flag (the forward bags with :func:`safe_offsets` under it).
    Launches: the clamp; the checks add ``cat``, ``eq``, ``ge``, ``eq``, ``cat``, ``all``, the
    ``_assert_async`` (none when the check is deferred)."""
    safe = torch.clamp(indices, lo, hi)
    if validation_enabled():
        ends = closed_offsets(offsets, indices.numel(), traced)
        ok = torch.cat(
            [torch.eq(safe, indices), torch.ge(ends[1:], ends[:-1]), torch.eq(offsets[:1], 0)]
        ).all()
        assert_on_device(
            op,
            ok,
            INDEX_CHECK,
        )
        return safe, ends, ok
    return safe, None, None


def safe_offsets(offsets: torch.Tensor, ok: torch.Tensor | None) -> torch.Tensor:
    """The bag offsets ``_embedding_bag`` may read: ``offsets`` where the call's check passed,
    all zeros where it failed (every bag empty).  With the check deferred the kernel keeps
    running on the bad data: offsets that do not start at 0, decrease or pass the indices would
    make the bag kernel read outside ``indices`` (torch's CPU kernel raises, a 910B's reads
    past the buffer); the result is then unspecified and the queued check raises.  ``ok`` None
    (checks off): the caller vouches for the offsets.  Launches: a ``where`` with the checks on.
    """
    if ok is None:
        return offsets
    zero = arange_cached(1, offsets.device, offsets.dtype)[0]  # cached: a Python 0 is a fill
    return torch.where(ok, offsets, zero)


def closed_offsets(offsets: torch.Tensor, L: int, traced: bool = False) -> torch.Tensor:
    """``offsets`` followed by ``L``: the indices past ``offsets[-1]`` closed into a bag of
    their own (one ``cat`` of a cached bound: an int64 ``pad`` runs on a 910B's AI CPU;
    traced, a ``full`` and a ``cat``: a symbolic value would specialise the graph on ``L``)."""
    if traced:
        bound = torch.full((1,), L, dtype=offsets.dtype, device=offsets.device)
        return torch.cat([offsets, bound])
    # L is the last element of the cached arange(L + 1): one cat (an int64 pad is AI CPU)
    return torch.cat([offsets, arange_cached(L + 1, offsets.device, offsets.dtype)[L:]])


def _triton_supported(plan: TbePlan, w: torch.Tensor, L: int, offsets: torch.Tensor, pool: int,
                      vbe: VbeArgs | None, scale: object) -> bool:  # fmt: skip
    """The calls the fused kernel serves: no global weight decay, a bag and a table class at
    least, positions in int32, a flat weights buffer, one D and no VBE for pooling NONE."""
    ok = (vbe is None or pool != POOLING_NONE) and scale is None and 1 < offsets.numel() < 2**31
    ok = ok and bool(plan.classes) and (vbe is None or isinstance(vbe.output_size, int))
    ok = ok and L < 2**31 - 1 and w.dim() == 1 and w.stride(0) == 1
    return ok and (pool != POOLING_NONE or len(set(plan.dims)) == 1)


def tbe_forward(
    op: str,
    plan: TbePlan,
    weights: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    output_dtype: torch.dtype,
    vbe: VbeArgs | None = None,
    for_backward: bool = True,
    index_scale: Callable[..., torch.Tensor] | None = None,
) -> tuple[torch.Tensor, ForwardState]:
    """The lookup of every feature: pooled ``[B, total_D]`` (VBE: ``[output_size]``) or, with
    pooling NONE, ``[L, D]``.  ``weights`` is the flat 1-D buffer of all tables.

    ``for_backward=False`` computes only the rows the forward needs (inference).
    ``index_scale``: given the feature of each index (``[L]``, ``T`` past ``offsets[-1]``), the
    indices bounded to their tables and the classes' index matrices, the ``[L]`` fp32 factor
    of each looked-up row (global weight decay): folded into the per-sample weights (a
    multiply with per-sample weights, and a cast for half-precision weights) or, with pooling
    NONE, multiplied into the rows; saved in the state for the backward.
    """
    L = indices.numel()
    # torch's CPU _embedding_bag (and searchsorted's fast path) read the raw buffer of a strided
    # offsets or indices view: honour the strides with a copy (none for contiguous inputs)
    indices, offsets = indices.contiguous(), offsets.contiguous()
    pick = _triton_supported(plan, weights, L, offsets, pooling_mode, vbe, index_scale)
    if use_triton(op, weights.device, pick):
        from fbgemm_npu.native.fbgemm.tbe._triton_forward import forward_state as fused

        args = (plan, weights, indices, offsets, pooling_mode, indice_weights, output_dtype)
        return fused(op, *args, for_backward, vbe)
    bag, t, B, blocks = _bags_and_features(plan, indices, offsets, vbe)
    mats = []
    safe, ends, ok = indices, None, None
    for i, cls in enumerate(plan.classes):
        tab = (cls.rows if for_backward else cls.fwd_rows).index_select(0, t)  # [L, 2m + 2]
        m = (tab.size(1) - 2) // 2
        if i == 0:
            safe, ends, ok = _bounded_indices(op, indices, tab.T[-2], tab.T[-1], offsets)
        mat = torch.empty((m, L), dtype=torch.int64, device=indices.device)
        torch.addcmul(tab.T[:m], tab.T[m : 2 * m], safe, out=mat)  # [m, L], rows contiguous
        mats.append(mat)
    if for_backward:
        _set_grad_rows(plan, mats, bag, B, pooling_mode, vbe is not None)
    state = ForwardState(bag=bag, t=t, mats=mats, B=B, row_starts=None)
    scale = None if index_scale is None else index_scale(t, safe, mats)
    state.index_scale = scale

    if pooling_mode == POOLING_NONE:
        cls = plan.classes[0] if plan.classes else None
        D = plan.dims[0] if plan.dims else 0
        if cls is None:
            return weights.new_zeros((L, D), dtype=output_dtype), state
        out = class_view(weights, cls.D, cls.w_residue).index_select(0, mats[0][0])
        if scale is not None:
            out = (out.to(torch.float32) * scale[:, None]).to(weights.dtype)
        return (out if out.dtype == output_dtype else out.to(output_dtype)), state

    if scale is not None:
        indice_weights = scale if indice_weights is None else indice_weights * scale
    mode = 0 if (pooling_mode == POOLING_SUM or indice_weights is not None) else 1
    psw = None
    if indice_weights is not None:
        psw = (
            indice_weights
            if indice_weights.dtype == weights.dtype
            else indice_weights.to(weights.dtype)
        )
    bag_offsets = offsets
    if mode == 1:
        # torch's mean bag divides the last bag by a count that includes the indices past
        # offsets[-1] (upstream ignores them): close those into a bag of their own, dropped below
        bag_offsets = ends if ends is not None else closed_offsets(offsets, L)
    offs = bag_offsets if bag_offsets.dtype == indices.dtype else bag_offsets.to(indices.dtype)
    offs = safe_offsets(offs, ok)
    inv_len = None
    if pooling_mode == POOLING_MEAN and indice_weights is not None:
        inv_len = (offsets[1:] - offsets[:-1]).clamp_(min=1)

    if blocks is not None:
        assert vbe is not None
        row_starts = row_output_offsets(
            blocks, vbe.output_offsets_feature_rank, offsets.numel() - 1
        )
        state.row_starts = row_starts
        max_D = max(plan.dims) if plan.dims else 0
        if vbe.out is None:
            out_ext = weights.new_empty((vbe.output_size + max_D,), dtype=output_dtype)
        else:  # keep what other lookups wrote to the shared buffer; the tail is the trash
            out_ext = torch.cat([vbe.out, vbe.out.new_empty((max_D,))])
    else:
        out = weights.new_empty((B, plan.total_D), dtype=output_dtype)

    for cls, mat in zip(plan.classes, mats, strict=True):
        view = class_view(weights, cls.D, cls.w_residue)
        pooled = torch._embedding_bag(view, mat[0], offs, False, mode, False, psw, True, -1)[0]
        if mode == 1:
            pooled = pooled[:-1]
        if inv_len is not None:
            pooled = pooled / inv_len[:, None]
        if blocks is not None:
            _scatter_vbe(plan, cls, pooled, state, vbe, out_ext, blocks)
        elif plan.single_class:
            out.view(B, plan.T, cls.D).copy_(pooled.view(plan.T, B, cls.D).transpose(0, 1))
        else:
            src = pooled.view(plan.T, B, cls.D).index_select(0, cls.member_index)
            if src.dtype != output_dtype:
                src = src.to(output_dtype)
            b_ix = arange_cached(B, weights.device)[None, :, None]
            out.index_put_((b_ix, cls.cols[:, None, :]), src)
    if vbe is not None and vbe.out is not None:
        return vbe.out.copy_(out_ext[: vbe.output_size]), state
    if vbe is not None:
        return out_ext[: vbe.output_size], state
    return out, state


def _scatter_vbe(
    plan: TbePlan,
    cls: object,
    pooled: torch.Tensor,
    state: ForwardState,
    vbe: VbeArgs,
    out_ext: torch.Tensor,
    blocks: VbeBlocks,
) -> None:
    """Write the member bags of one class into the 1-D VBE output; other bags go to the trash
    tail of ``out_ext`` (past ``output_size``), so no data-dependent selection is needed."""
    D = cls.D  # type: ignore[attr-defined]
    starts = state.row_starts
    assert starts is not None
    if not plan.single_class:
        starts = scatter_member_starts(cls, starts, blocks, vbe.output_size)
    elem = starts[:, None] + arange_cached(D, pooled.device)[None, :]
    src = pooled if pooled.dtype == out_ext.dtype else pooled.to(out_ext.dtype)
    out_ext.index_put_((elem,), src)
