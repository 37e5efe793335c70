"""Stacked (keyed) jagged to dense: ``fbgemm::stacked_jagged_1d_to_dense`` and
``fbgemm::stacked_jagged_2d_to_dense`` on npu.

``lengths`` is ``[T, B]`` (T keys, B rows each).  Upstream, per key ``t``: the values slice
``values[offset_per_key[t]:offset_per_key[t + 1]]`` (ATen slice rules: negative bounds wrap, bounds
clamp to ``[0, N]``), offsets = complete cumsum of ``lengths[t]``, then ``jagged_to_padded_dense``
with ``max_lengths_per_key[t]``::

    out[t][b, j] = values[start_t + sum(lengths[t, :b]) + j]   if j < min(lengths[t, b], L_t)
                 = padding_value                               otherwise, or if slice t is empty

Reads run past the slice when the lengths say so (upstream does the same: the slice is a view);
reads past ``values`` itself raise.  Lists longer than ``T + 1`` / ``T`` are ignored, as upstream
does; shorter ones raise (upstream reads past the end of the vector).

How, for all keys at once: one ``[B, C]`` grid, ``C = sum(L_t)``, key ``t`` owning the columns
``C_t .. C_t + L_t`` (so no key is padded to the longest).  Each column's key, the position its
padding test compares (``j``, or 2**62 for a key whose slice is empty: all padding) and ``j``
plus its key's slice start (host data: the int lists) travel in one pinned, non-blocking upload
(no host stall).  ``cat`` (cached zeros) + an int32 ``cumsum`` give upstream's per-key offsets
(checked to lie in ``[0, 2**31)``, as upstream reads them as 32-bit ints; int64 lengths are
checked to fit int32 as well, so the int32 scan is exact), one ``index_select`` brings each
column the ends of its rows, then sub / le / add give the grid's padding and rows (int64),
clamped into the values; one gather, its padding fill and one ``split_with_sizes_copy`` cut the
grid into the T outputs: each its own contiguous tensor, as upstream's (views of one buffer
would alias each other, which its schema does not allow).  Launches: the upload, cat, cumsum,
index_select, sub, le, add, clamp_, index_select, masked_fill_ (``where`` for int64),
split_with_sizes_copy (none for one key), whatever T and B, and the data check on top; none on
a 910B's AI CPU (an int64 cumsum, masked_fill_ or constant_pad_nd would be).  Over the
catalogue's target because the per-key constants cost the upload and the gather, the padding
its own test and fill, and the split a copy.  Launches and syncs: ``BUDGETS`` in
``budgets.py`` (docs/ops.md).

Values: float32, float16, bfloat16, int32, int64 (1-D for ``_1d``, 2-D for ``_2d``); lengths
int32 or int64.  Autograd: CUDA registers it for ``stacked_jagged_2d_to_dense`` (its
``StackedJagged2DToDenseGPUOp``), so we do; the CPU build records it through its inner ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    allocation_of,
    check_dtype,
    check_ndim,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import filled_i32
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.jagged._utils import (
    READ_CHECK,
    assert_no_bad,
    beyond_rows,
    check_values,
    fill_padding,
    int32_bad,
    numel_of,
    padding_scalar,
    write_rows,
)

__all__ = ["KERNELS", "stacked_jagged_1d_to_dense_npu", "stacked_jagged_2d_to_dense_npu"]

_F = torch.ops.fbgemm
STACKED_JAGGED_1D_TO_DENSE = "fbgemm::stacked_jagged_1d_to_dense"
STACKED_JAGGED_2D_TO_DENSE = "fbgemm::stacked_jagged_2d_to_dense"


def _slice_bounds(lo: int, hi: int, n: int) -> tuple[int, int]:
    """ATen ``slice(0, lo, hi)`` bounds on a dim of size ``n``."""
    lo, hi = lo + n if lo < 0 else lo, hi + n if hi < 0 else hi
    lo, hi = min(max(lo, 0), n), min(max(hi, 0), n)
    return lo, max(lo, hi)


def _plan(
    op: str,
    values: object,
    lengths: object,
    offset_per_key: Sequence[int],
    max_lengths_per_key: Sequence[int],
    ndim: int,
) -> tuple[torch.Tensor, torch.Tensor, list[int], list[tuple[int, int]]]:
    """Checks; returns values, lengths, the per-key max lengths and slice bounds."""
    v = check_ndim(op, "values", check_values(op, "values", values), (ndim,))
    ln = check_dtype(
        op,
        "lengths",
        check_ndim(op, "lengths", check_tensor(op, "lengths", lengths), (2,)),
        INDEX_DTYPES,
    )
    if ln.device != v.device:
        raise RuntimeError(
            f"{op}: arguments 'values' ({v.device}) and 'lengths' ({ln.device}) must be on the "
            "same device"
        )
    t = ln.size(0)
    if len(offset_per_key) < t + 1 or len(max_lengths_per_key) < t:
        raise ValueError(
            f"{op}: 'offset_per_key' needs T + 1 = {t + 1} entries and 'max_lengths_per_key' T = "
            f"{t}, got {len(offset_per_key)} and {len(max_lengths_per_key)}"
        )
    maxl = [int(m) for m in max_lengths_per_key[:t]]
    for k, m in enumerate(maxl):
        if m < 0:
            raise ValueError(f"{op}: argument 'max_lengths_per_key[{k}]' must be >= 0, got {m}")
    n = v.size(0)
    bounds = [
        _slice_bounds(int(offset_per_key[k]), int(offset_per_key[k + 1]), n) for k in range(t)
    ]
    return v, ln, maxl, bounds


def _grid(
    op: str,
    values: torch.Tensor,
    lengths: torch.Tensor,
    maxl: list[int],
    bounds: list[tuple[int, int]],
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Value rows (int64, clamped into ``[0, n)``) and padding mask on the ``[B, C]`` grid
    (``C = sum(L_t)``: key ``t`` owns the columns ``C_t .. C_t + L_t``); ``None`` when nothing
    can be read."""
    t, b = lengths.shape
    n = values.size(0)
    row_numel = values[:1].numel()  # elements per value row (0 when D == 0)
    # A key whose slice is empty is all padding upstream: its limit becomes 0.
    limits = [
        m if hi > lo and row_numel > 0 else 0 for m, (lo, hi) in zip(maxl, bounds, strict=True)
    ]
    if b == 0 or sum(maxl) == 0 or max(limits) == 0 or n == 0:
        return None
    key, j_cmp, j_abs = _columns(maxl, limits, bounds, lengths)
    # Upstream's per-key offsets, a complete scan of each key's lengths, in int32 (an int64
    # cumsum runs on a 910B's AI CPU): exact while they lie in [0, 2**31), which the data check
    # holds (upstream reads them as 32-bit ints too).  Row b of a column's key spans
    # scan[b] .. scan[b + 1]; one gather brings both ends to every column.
    zeros = filled_i32(t, 0, lengths.device).view(t, 1)
    with_zero = torch.cat([zeros, lengths], dim=1)  # contiguous, whatever the lengths' strides
    scan = with_zero.cumsum(1, dtype=torch.int32)  # [T, B + 1]
    ends = scan.t().index_select(1, key)  # [B + 1, C]
    start = ends[:-1]
    pad = (ends[1:] - start) <= j_cmp  # j >= the row's length (int32: exact, see above)
    idx = start + j_abs  # int64: the key's slice start plus the row start plus j
    if validation_enabled():
        bad = [int32_bad(scan), beyond_rows(idx, pad, n)]
        if lengths.dtype == torch.int64:  # a length the int32 scan would truncate
            bad.append(torch.div(with_zero, 2**31, rounding_mode="trunc"))
        assert_no_bad(op, bad, f"arguments 'lengths' / 'offset_per_key': {READ_CHECK}")
    return idx.clamp_(0, n - 1), pad  # no read leaves the values, whatever the data


def _columns(
    maxl: list[int], limits: list[int], bounds: list[tuple[int, int]], lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per grid column (host data, built by CPU tensor ops: no Python loop over the columns, and
    one pinned non-blocking upload to ``lengths``' device): its key, the position ``j`` its
    padding test compares (``2**62`` for a key with limit 0, so all padding) and ``j`` plus its
    key's slice start."""
    c, widths = sum(maxl), torch.tensor(maxl)
    col_key = torch.repeat_interleave(torch.arange(len(maxl)), widths, output_size=c)
    col_j = torch.arange(c) - torch.repeat_interleave(
        widths.cumsum(0) - widths, widths, output_size=c
    )
    col_start = torch.tensor([lo for lo, _ in bounds], dtype=torch.int64).index_select(0, col_key)
    live = torch.tensor(limits).index_select(0, col_key) > 0
    j_cmp = torch.where(live, col_j, 2**62)
    meta = upload(torch.cat([col_key, j_cmp, col_j + col_start]), torch.int64, lengths.device)
    return meta[:c], meta[c : 2 * c], meta[2 * c :]


def _split_keys(grid: torch.Tensor, maxl: list[int], inner: tuple[int, ...]) -> list[torch.Tensor]:
    """Key ``t``'s ``[B, L_t, *inner]`` from the ``[B, C, *inner]`` grid: each its own contiguous
    tensor, as upstream's (one ``split_with_sizes_copy``; none for one key)."""
    b, row = grid.size(0), numel_of(inner)
    if len(maxl) == 1:
        return [grid.view(b, maxl[0], *inner)]
    outs = [grid.new_empty((b, m * row)) for m in maxl]
    widths = [m * row for m in maxl]
    torch.split_with_sizes_copy(grid.view(b, sum(widths)), widths, dim=1, out=outs)
    return [o.view(b, m, *inner) for o, m in zip(outs, maxl, strict=True)]


def _stacked(
    op: str,
    values: object,
    lengths: object,
    offset_per_key: Sequence[int],
    max_lengths_per_key: Sequence[int],
    padding_value: int,
    ndim: int,
) -> tuple[list[torch.Tensor], tuple[torch.Tensor, torch.Tensor] | None, list[int]]:
    """The outputs, the grid's rows and padding (for the backward) and the per-key max
    lengths."""
    v, ln, maxl, bounds = _plan(op, values, lengths, offset_per_key, max_lengths_per_key, ndim)
    t, b = ln.shape
    if t == 0:
        return [], None, maxl
    inner = () if ndim == 1 else (v.size(1),)
    pad_value = padding_scalar(float(padding_value), v.dtype)
    what = f"the outputs of 'max_lengths_per_key' (B = {b} rows of {sum(maxl)} in all)"
    with allocation_of(op, what):
        grid_rows = _grid(op, v, ln, maxl, bounds)
        if grid_rows is None:
            grid = v.new_full((b, sum(maxl), *inner), pad_value)
        else:
            rows, pad = grid_rows
            flat = rows.reshape(-1)
            if ndim == 1 or v.size(1) == 1:  # 1-D gathers are far faster than [N, 1] gathers
                got = v.reshape(v.size(0)).index_select(0, flat)
            else:
                got = v.index_select(0, flat)
            grid = fill_padding(got, pad.reshape(-1), pad_value).view(b, sum(maxl), *inner)
        return _split_keys(grid, maxl, inner), grid_rows, maxl


def stacked_jagged_1d_to_dense_npu(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offset_per_key: list[int],
    max_lengths_per_key: list[int],
    padding_value: int,
) -> list[torch.Tensor]:
    """``fbgemm::stacked_jagged_1d_to_dense``: T tensors ``[B, L_t]`` (see module docstring)."""
    return _stacked(
        STACKED_JAGGED_1D_TO_DENSE,
        values,
        lengths,
        offset_per_key,
        max_lengths_per_key,
        padding_value,
        1,
    )[0]


def stacked_jagged_2d_to_dense_npu(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offset_per_key: list[int],
    max_lengths_per_key: list[int],
    padding_value: int = 0,
) -> list[torch.Tensor]:
    """``fbgemm::stacked_jagged_2d_to_dense``: T tensors ``[B, L_t, D]``."""
    return _stacked(
        STACKED_JAGGED_2D_TO_DENSE,
        values,
        lengths,
        offset_per_key,
        max_lengths_per_key,
        padding_value,
        2,
    )[0]


class _Stacked2D(torch.autograd.Function):
    """d(out_t)/d(values): each key's gradient scattered back to the rows it read (summed).

    Backward launches (independent of T): ``cat`` of the key gradients (none for one key; they
    are the ``[B, C, D]`` grid of the forward's rows), the rows with padding sent to a spare row
    (``where``, ``remainder_``: :func:`._utils.write_rows`), ``zeros``, ``index_add_``.
    """

    @staticmethod
    def forward(ctx, values, lengths, offset_per_key, max_lengths_per_key, padding_value):  # type: ignore[override]
        outs, rows, maxl = _stacked(
            STACKED_JAGGED_2D_TO_DENSE,
            values,
            lengths,
            offset_per_key,
            max_lengths_per_key,
            padding_value,
            2,
        )
        ctx.rows, ctx.maxl, ctx.shape = rows, maxl, values.shape
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):  # type: ignore[override]
        n, d = ctx.shape
        ref = next(g for g in grads if g is not None)
        if ctx.rows is None:
            return (ref.new_zeros((n, d)), None, None, None, None)
        b = ctx.rows[0].size(0)
        blocks = [  # [B, L_t * D] each: their cat is the [B, C, D] grid, rows' layout
            (g if g is not None else ref.new_zeros((b, m, d))).reshape(b, m * d)
            for g, m in zip(grads, ctx.maxl, strict=True)
        ]
        flat = (blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=1)).view(-1, d)
        rows, pad = ctx.rows
        # padding positions add to the spare row n (index_add_ at dim 0: on the AI Core)
        spare = write_rows(rows.reshape(-1), pad.reshape(-1), n, None)
        grad_values = ref.new_zeros((n + 1, d)).index_add_(0, spare, flat)
        return (grad_values[:n], None, None, None, None)


def _stacked_2d_autograd(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offset_per_key: list[int],
    max_lengths_per_key: list[int],
    padding_value: int = 0,
) -> list[torch.Tensor]:
    if needs_grad(values):
        return list(
            _Stacked2D.apply(values, lengths, offset_per_key, max_lengths_per_key, padding_value)
        )
    return below_autograd(
        _F.stacked_jagged_2d_to_dense,
        values,
        lengths,
        offset_per_key,
        max_lengths_per_key,
        padding_value,
    )


def _stacked_meta(ndim: int) -> Callable[..., list[torch.Tensor]]:
    def meta(
        values: torch.Tensor,
        lengths: torch.Tensor,
        offset_per_key: list[int],
        max_lengths_per_key: list[int],
        padding_value: int = 0,
    ) -> list[torch.Tensor]:
        t = lengths.size(0)
        inner = () if ndim == 1 else (values.size(1),)
        return [
            values.new_empty((lengths.size(1), int(m), *inner)) for m in max_lengths_per_key[:t]
        ]

    return meta


KERNELS = {
    STACKED_JAGGED_1D_TO_DENSE: {
        "PrivateUse1": stacked_jagged_1d_to_dense_npu,
        "Meta": _stacked_meta(1),
    },
    STACKED_JAGGED_2D_TO_DENSE: {
        "PrivateUse1": stacked_jagged_2d_to_dense_npu,
        "AutogradPrivateUse1": _stacked_2d_autograd,
        "Meta": _stacked_meta(2),
    },
}
