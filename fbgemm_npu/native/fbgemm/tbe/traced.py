"""The TBE lookups when traced (torch.compile, AOTAutograd, ``torch.library.opcheck``).

The eager kernels group the tables by a host-side plan (:mod:`._utils`): ``D_offsets`` and
``weights_offsets`` read on the host once per layout, tables of one D read through one
``[rows, D]`` view.  A traced call has no values to read -- its tensors are fake, and whatever
the trace computed on the host would be baked into the graph -- so it runs a layout-free program
instead, built from the call's device tensors and its integer arguments ``max_D`` / ``total_D``
alone: every embedding row is read and written as ``max_D`` elements of its flat buffer, the
first ``D_t`` of them valid and the others masked to 0.  The math is the eager kernels' (see
:mod:`.forward`, :mod:`.backward`, :mod:`.lookup`); only the addressing differs:

* the layout table ``tab`` ``[T + 1, 2 m + 2]`` (``TableClass.rows``' convention: ``m`` bases,
  ``m`` multipliers, the index bounds) gives, for feature ``t`` and row ``idx``, row ``k`` of the
  index matrix ``tab[t, k] + idx * tab[t, m + k]``: ``k = 0`` the row's first element
  ``weights_offsets[t] + idx * D_t``; ``k = 1`` the de-duplication key (that element + 1, 0 for
  zero-width features and the dummy ``T``); ``k = 2`` the first element of the index's gradient
  row in ``grad_output`` (its feature's column ``D_offsets[t]``, plus ``b * total_D`` or the VBE
  bag offset set by the forward); ``k = 3 + s`` the row of optimizer state ``s`` (its first
  element, or its element for a rowwise state); the last ``k`` the row's width ``D_t``;
* the bounds ``[0, E_t - 1]`` with ``E_t = (next table's start - start) // D_t``, the rows of the
  feature's table as the eager plan counts them, from ``weights_offsets`` on the device (each
  table's next start by a ``[T, T + 1]`` compare).

The bag and feature of each index come from segment ids (an int32 ``index_add`` + ``cumsum``),
as in the eager forward, and the backward is the eager one's (:func:`.backward.aggregate_rows`):
a traced step launches nothing a 910B runs on its AI CPU.

Rowwise optimizer means divide by each row's own D (:class:`.optimizers.StepArgs` ``width``).
The learning rate stays a tensor (a graph input, so ``set_learning_rate`` reaches a compiled
graph).  Not budgeted: the table is rebuilt in every call (some 30 small launches) and rows are
element gathers; what a traced step launches is the graph's business, the eager budgets hold the
eager kernels.  The backward and the autograd functions are in :mod:`.traced_backward`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

from fbgemm_npu.native._checks import check_on_device, validation_enabled
from fbgemm_npu.native._index import segment_ids
from fbgemm_npu.native.fbgemm.tbe.forward import (
    POOLING_MEAN,
    POOLING_NONE,
    POOLING_SUM,
    ForwardState,
    VbeArgs,
    _bounded_indices,
    closed_offsets,
    vbe_row_output_offsets,
)

__all__ = [
    "TracedLayout",
    "at_most",
    "masked_rows",
    "traced_forward",
    "traced_layout",
    "write_elements",
]

I64 = torch.iinfo(torch.int64)


@dataclass
class TracedLayout:
    """One call's layout as device tensors (see the module docstring)."""

    T: int
    max_D: int
    total_D: int
    m: int  # rows of the index matrix: 4 + number of optimizer states
    tab: torch.Tensor  # [T + 1, 2 m + 2] int64
    dims: torch.Tensor  # [T] int64
    col_feature: torch.Tensor  # [total_D] int64: the feature of each output column
    col_src: torch.Tensor  # [total_D] int64: the column within its feature's row

    @property
    def width_row(self) -> int:
        return self.m - 1


def traced_layout(
    op: str,
    D_offsets: torch.Tensor,
    weights_offsets: torch.Tensor,
    states: list[tuple[torch.Tensor, bool]],
    weights_numel: int,
    max_D: int,
    total_D: int,
) -> TracedLayout:
    """The layout table of a traced call from its offsets tensors (``states``: each optimizer
    state's offsets and whether it is rowwise)."""
    T = D_offsets.numel() - 1
    d_off = D_offsets.to(torch.int64)
    dims = d_off[1:] - d_off[:-1]
    w_off = weights_offsets.to(torch.int64)
    has = (dims > 0).to(torch.int64)
    # a table ends where the next one starts (or the buffer ends), as the eager plan counts it:
    # the least start past its own (the largest of all where none is), by a [T, T + 1] compare
    # -- no integer sort or searchsorted, which a 910B runs on its AI CPU
    cand = torch.cat([w_off, w_off.new_full((1,), weights_numel)])
    later = cand[None, :] > w_off[:, None]
    nxt = torch.where(later, cand[None, :], cand.amax()).amin(1)
    rows = torch.div(nxt - w_off, dims.clamp(min=1), rounding_mode="floor")
    if validation_enabled():
        check_on_device(
            op,
            ((rows > 0) | (dims <= 0)).all(),
            "argument 'weights_offsets' puts a table where the weights buffer has no rows for it",
        )
    zero = torch.zeros_like(dims)
    bases = [w_off * has, (w_off + 1) * has, d_off[:-1]]
    muls = [dims, dims, zero]
    for offsets, rowwise in states:
        bases.append(offsets.to(torch.int64))
        muls.append(has if rowwise else dims)
    bases.append(dims)
    muls.append(zero)
    lo = torch.where(has > 0, 0, I64.min)
    hi = torch.where(has > 0, rows - 1, I64.max).clamp_(min=0)
    m = len(bases)
    tab = torch.stack([*bases, *muls, lo, hi], dim=1)
    dummy = torch.zeros((1, 2 * m + 2), dtype=torch.int64, device=tab.device)
    dummy[0, -2], dummy[0, -1] = I64.min, I64.max  # indices past offsets[-1]: never read
    cols = torch.arange(total_D, device=tab.device)
    col_feature = segment_ids(d_off, total_D).to(torch.int64)
    col_src = cols - d_off.index_select(0, col_feature)
    return TracedLayout(
        T=T,
        max_D=max_D,
        total_D=total_D,
        m=m,
        tab=torch.cat([tab, dummy]),
        dims=dims,
        col_src=col_src,
        col_feature=col_feature,
    )


def at_most(x: torch.Tensor, n: int) -> torch.Tensor:
    """``x`` clamped to ``[.., max(n, 0)]`` (a tensor bound: a symbolic scalar bound costs
    tracing far more)."""
    return torch.clamp(x, max=torch.full((), max(n, 0), dtype=x.dtype, device=x.device))


def masked_rows(
    flat: torch.Tensor, start: torch.Tensor, width: torch.Tensor, max_D: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rows [L, max_D], elements [L, max_D], mask [L, max_D])``: row ``i`` holds
    ``flat[start[i] + d]`` for ``d < width[i]`` and 0 past it (the masked elements address
    element 0, so every read stays inside the buffer)."""
    cols = torch.arange(max_D, device=start.device)
    mask = cols[None, :] < width[:, None]
    elem = at_most(torch.where(mask, start[:, None] + cols[None, :], 0), flat.numel() - 1)
    if guard_or_false(flat.numel() == 0):  # unknown when symbolic: callers keep it non-empty
        return flat.new_zeros(elem.shape), elem, torch.zeros_like(mask)
    rows = flat.index_select(0, elem.reshape(-1)).view(elem.shape)
    return rows.masked_fill(~mask, 0), elem, mask


def write_elements(
    flat: torch.Tensor,
    elem: torch.Tensor,
    old: torch.Tensor,
    new: torch.Tensor,
    mask: torch.Tensor,
) -> None:
    """``flat[elem] = new`` where ``mask`` holds, in place (``index_add`` of the rounded
    difference, as :func:`.backward.write_rows`: 0 elsewhere)."""
    if new.dtype != flat.dtype:
        new = new.to(flat.dtype)
    delta = (new - old).masked_fill_(~mask, 0)
    torch.index_add(flat, 0, elem.reshape(-1), delta.reshape(-1), out=flat)


def traced_forward(
    op: str,
    lay: TracedLayout,
    weights: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    pooling_mode: int,
    indice_weights: torch.Tensor | None,
    output_dtype: torch.dtype,
    vbe: VbeArgs | None = None,
    for_backward: bool = True,
    index_scale: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, ForwardState]:
    """:func:`.forward.tbe_forward` for a traced call (same arguments, ``lay`` for the plan).
    A pre-allocated VBE output (``vbe.out``, upstream's ``vbe_output``) is written in place as
    in eager -- under AOTAutograd the graph's mutation of that input, its other elements kept --
    and returned (the compiled graph returns its values; whether it shares the buffer's storage
    is AOTAutograd's choice)."""
    indices, offsets = indices.contiguous(), offsets.contiguous()
    L = indices.numel()
    dev = indices.device
    total_bags = offsets.numel() - 1
    ar = torch.arange(L, device=dev, dtype=offsets.dtype)
    # the bag and feature of each index by segment ids, as the eager forward (searchsorted is
    # a 910B's AI CPU)
    bag = segment_ids(offsets, L)
    if vbe is None:
        B = total_bags // lay.T if lay.T > 0 else 0
        # no bags: every index lies past offsets[-1] (the dummy feature T), as bag // B says
        t = torch.div(bag, B, rounding_mode="floor") if B > 0 else torch.full_like(bag, lay.T)
    else:
        B = -1
        t = segment_ids(vbe.B_offsets, total_bags + 1).index_select(0, bag)
    tab = lay.tab.index_select(0, t)  # [L, 2m + 2]
    m = lay.m
    safe, ends, _ = _bounded_indices(op, indices, tab.T[-2], tab.T[-1], offsets, traced=True)
    mat = torch.addcmul(tab.T[:m], tab.T[m : 2 * m], safe).contiguous()  # [m, L] int64
    row_starts = None
    if vbe is not None:
        row_starts, _ = vbe_row_output_offsets(
            vbe.B_offsets,
            vbe.B_offsets_rank_per_feature,
            vbe.output_offsets_feature_rank,
            lay.dims,
            total_bags,
        )
    if for_backward and pooling_mode != POOLING_NONE:
        if row_starts is not None:  # the bag's output offset (indices past the end: any bag)
            mat[2].copy_(row_starts.index_select(0, at_most(bag, total_bags - 1)))
        else:
            mat[2].add_(torch.remainder(bag, max(B, 1)), alpha=lay.total_D)
    state = ForwardState(bag=bag, t=t, mats=[mat], B=B, row_starts=row_starts)
    scale = None if index_scale is None else index_scale(t, safe)
    state.index_scale = scale
    rows = masked_rows(weights, mat[0], mat[lay.width_row], lay.max_D)[0]  # [L, max_D]

    if pooling_mode == POOLING_NONE:
        if scale is not None:
            rows = (rows.to(torch.float32) * scale[:, None]).to(weights.dtype)
        return rows.to(output_dtype), state

    if scale is not None:
        indice_weights = scale if indice_weights is None else indice_weights * scale
    mode = 0 if (pooling_mode == POOLING_SUM or indice_weights is not None) else 1
    psw = None if indice_weights is None else indice_weights.to(weights.dtype)
    bag_offsets = offsets
    if mode == 1:  # see .forward: torch's mean counts the indices past offsets[-1]
        bag_offsets = ends if ends is not None else closed_offsets(offsets, L, traced=True)
    pooled = torch._embedding_bag(rows, ar, bag_offsets, False, mode, False, psw, True, -1)[0]
    if mode == 1:
        pooled = pooled[:-1]
    if pooling_mode == POOLING_MEAN and indice_weights is not None:
        pooled = pooled / (offsets[1:] - offsets[:-1]).clamp_(min=1)[:, None]
    if vbe is not None:
        assert row_starts is not None
        t_bag = segment_ids(vbe.B_offsets, total_bags)
        width = lay.dims.index_select(0, at_most(t_bag, lay.T - 1))
        cols = torch.arange(lay.max_D, device=dev)
        elem = torch.where(
            cols[None, :] < width[:, None], row_starts[:, None] + cols[None, :], vbe.output_size
        )
        if vbe.out is None:
            out_ext = weights.new_zeros((vbe.output_size + 1,), dtype=output_dtype)
        else:  # upstream's pre-allocated output: keep what other lookups wrote to it
            out_ext = torch.cat([vbe.out, vbe.out.new_zeros((1,))])
        out_ext.index_put_((elem,), pooled.to(output_dtype))
        if vbe.out is not None:  # written in place: the graph's mutation of its input
            return vbe.out.copy_(out_ext[: vbe.output_size]), state
        return out_ext[: vbe.output_size], state
    # out[b, c] = pooled[bag (feature of c, sample b), column of c within its feature]
    b = torch.arange(B, device=dev)
    src = (lay.col_feature[None, :] * B + b[:, None]) * lay.max_D + lay.col_src[None, :]
    out = pooled.reshape(-1).index_select(0, src.reshape(-1)).view(B, lay.total_D)
    return out.to(output_dtype), state
