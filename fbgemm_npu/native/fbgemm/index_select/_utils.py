"""Helpers shared by the index-select family's modules (jagged, keyed, batch and group selects,
ranges, segment sums, unique indices).

* The data checks go through :class:`~fbgemm_npu.native._checks.DataChecks`: the conditions only
  the data knows (an index in range, offsets that do not decrease, a given size that matches the
  data), verified all at once, riding on a device-to-host read the op makes anyway or with one
  ``_assert_async``; :func:`index_range` and the table gathers add theirs to it.
* :func:`rows_gather_index`: the source row of every output row of a jagged index-select, from
  per-segment start distances, with ``searchsorted`` (so a truncated output needs no special case)
  or, when the output segments' lengths are known to sum to the output size, ``repeat_interleave``.
* :func:`table_gather` / :func:`table_gather_permuted`: the gather index selecting rows of many
  tables stored back to back (``batch_index_select_dim0``, ``group_index_select_dim0``) without a
  loop over the tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_tensor,
    dtype_name,
    dynamic_size,
    validation_enabled,
)
from fbgemm_npu.native._host import exclusive_cumsum

__all__ = [
    "GatherRows",
    "SelectedRows",
    "TableGather",
    "check_fits",
    "check_index_tensor",
    "check_non_negative",
    "contiguous",
    "dynamic_size",
    "index_range",
    "rows_gather_index",
    "same_dtype_or_raise",
    "select_rows_index",
    "sum_fits",
    "table_gather",
    "table_gather_permuted",
]


def check_index_tensor(
    op: str,
    arg: str,
    value: object,
    ndims: tuple[int, ...] = (1,),
    dtypes: tuple[torch.dtype, ...] = INDEX_DTYPES,
) -> torch.Tensor:
    """A tensor argument holding indices, offsets or lengths: type, dtype and rank checked."""
    t = check_tensor(op, arg, value)
    check_dtype(op, arg, t, dtypes)
    return check_ndim(op, arg, t, ndims)


def check_non_negative(op: str, arg: str, value: int | None) -> None:
    """A size argument given on the host must not be negative."""
    if value is not None and value < 0:
        raise ValueError(f"{op}: argument '{arg}' must be non-negative, got {value}")


def check_fits(op: str, arg: str, value: int, dtype: torch.dtype) -> None:
    """A size the kernel holds in ``dtype`` (``offsets_range`` computes its positions and the last
    segment's end in the offsets' dtype) must fit in it: past the limit they wrap."""
    limit = torch.iinfo(dtype).max
    if value > limit:
        raise ValueError(
            f"{op}: argument '{arg}' ({value}) must be below 2**{limit.bit_length()} for "
            f"{dtype_name(dtype)} offsets (the positions are {dtype_name(dtype)})"
        )


def sum_fits(arg: str, dtype: torch.dtype) -> str:
    """What a check of a running sum of ``arg`` (``cumsum(...).amin() >= 0``) says: with every
    term non-negative, the first sum past the dtype's range wraps to a negative one."""
    return f"argument '{arg}' must sum within {dtype_name(dtype)} (a running sum wrapped)"


def same_dtype_or_raise(op: str, expected_arg: str, **tensors: torch.Tensor) -> None:
    """Every tensor given must have the dtype of ``tensors[expected_arg]`` (upstream reads them
    all with one index type)."""
    want = tensors[expected_arg].dtype
    for arg, t in tensors.items():
        if t.dtype != want:
            raise ValueError(
                f"{op}: argument '{arg}' must have the dtype of '{expected_arg}' "
                f"({dtype_name(want)}), got {dtype_name(t.dtype)}"
            )


def select_rows_index(
    checks: DataChecks,
    d: torch.Tensor,
    out_ends: torch.Tensor,
    out_lengths: torch.Tensor,
    num_rows: int | None,
    arg: str,
    exact: bool = False,
) -> torch.Tensor:
    """:func:`rows_gather_index` of a jagged select, with its data checks run: the output has
    ``num_rows`` rows (the argument ``arg``), which must not exceed the selected lengths' sum
    (``exact``: must equal it) (one ``_assert_async`` round), or, when it is None, that sum, read
    back to the host with the checks riding on the read."""
    if num_rows is None:
        total = checks.read_with([out_ends[-1]])[0]
        return rows_gather_index(d, out_ends, total, lengths=out_lengths)
    if validation_enabled():
        if exact:
            what = f"argument '{arg}' ({num_rows}) must equal the sum of the selected lengths"
            checks.add(out_ends[-1], num_rows, num_rows, what)
        else:
            what = f"argument '{arg}' ({num_rows}) must not exceed the sum of the selected lengths"
            checks.add(out_ends[-1], num_rows, None, what)
        checks.assert_on_device()
    return rows_gather_index(d, out_ends, num_rows)  # a given size may truncate: searchsorted


def contiguous(boundaries: torch.Tensor) -> torch.Tensor:
    """``searchsorted`` wants contiguous boundaries (else it warns and copies): a ``clone`` of a
    strided input, nothing otherwise."""
    return boundaries if boundaries.is_contiguous() else boundaries.contiguous()


def rows_gather_index(
    d: torch.Tensor,
    out_ends: torch.Tensor,
    num_rows: int,
    clamp: bool = False,
    lengths: torch.Tensor | None = None,
) -> torch.Tensor:
    """``src[r] = r + d[s(r)]`` for output rows ``r < num_rows``, ``s(r)`` the segment holding r.

    ``out_ends`` are the inclusive ends of the output segments (non-decreasing), ``d`` one start
    distance per segment (``input start - output start``).  With ``lengths`` (the output
    segments' lengths, summing to exactly ``num_rows``) ``d`` is repeated over each segment with
    ``repeat_interleave`` (``output_size`` given: no sync; linear work).  Without, ``s(r)`` is
    ``searchsorted(out_ends, r, right=True)`` (after a copy when ``out_ends`` is strided), so
    ``num_rows`` may stop short of ``out_ends[-1]`` (a truncated output); ``clamp`` keeps ``s``
    inside ``d`` for rows past the last end (invalid input, refused by the caller's checks before
    the index is used).  Launches: ``arange``, then ``repeat_interleave`` or ``searchsorted`` and
    a gather, then ``add_``; ``clamp`` adds a ``clamp_max_``.
    """
    rows = torch.arange(num_rows, dtype=out_ends.dtype, device=out_ends.device)
    if lengths is not None:
        return torch.repeat_interleave(d, lengths, output_size=num_rows).add_(rows)
    seg = torch.searchsorted(contiguous(out_ends), rows, right=True)
    if clamp:
        seg = seg.clamp_max_(max(d.numel() - 1, 0))
    src = d.index_select(0, seg)
    return src.add_(rows)


# ---- row selection from tables stored back to back (batch / group index select) -------------


@dataclass
class TableGather:
    """How to gather selected rows from tables stored back to back in one flat buffer.

    ``src`` indexes ``buffer.view(-1, unit)``: rows when every table has the same row width
    (``unit`` = that width), single elements otherwise (``unit`` = 1).
    """

    src: torch.Tensor
    unit: int


def _add_row_check(
    checks: DataChecks | None, indices: torch.Tensor, limits: torch.Tensor, arg: str
) -> None:
    """``0 <= indices[k] < limits[k]`` (``limits`` broadcast to ``indices``): an ``amin``, a
    subtraction and an ``amax``, checked with the call's other conditions."""
    if checks is None:
        return
    what = f"argument '{arg}' must hold row indices in [0, rows) of their table"
    checks.add(indices.amin(), 0, None, what)
    checks.add((indices - limits).amax(), None, -1, what)


def table_gather(
    indices: torch.Tensor,
    rows: Sequence[int],
    cols: Sequence[int],
    counts: Sequence[int],
    checks: DataChecks | None,
    arg: str,
) -> TableGather:
    """Gather index for ``counts[t]`` rows of table ``t`` (shape ``(rows[t], cols[t])``), the
    selected rows (``indices``, back to back per table) laid out table after table.

    Same row width ``C`` everywhere: ``src[k] = indices[k] + R[t]`` (``R[t]`` the table's first
    row): a host-to-device copy of the per-table constants, ``repeat_interleave`` of them to the
    selected rows, ``add``.  Otherwise per run of ``g`` elements (``g`` the gcd of the widths,
    ``C[t]`` counted in runs) ``src[e] = e + d[k]``, ``d[k] = A[t] + (indices[k] - k) * C[t]``
    (``A[t]`` a host constant of the shapes): the copy, ``repeat_interleave``, ``arange``,
    ``sub``, ``addcmul``, ``repeat_interleave`` to the elements, ``arange``, ``add_``.  The index
    check (:func:`_add_row_check`) comes on top.
    """
    device = indices.device
    n_sel = indices.numel()
    if len(set(cols)) == 1 and cols[0] > 0:
        meta = torch.tensor([exclusive_cumsum(rows), list(rows), list(counts)], dtype=torch.int64)
        meta = meta.to(device)
        per_row = torch.repeat_interleave(meta[:2], meta[2], dim=1, output_size=n_sel)
        _add_row_check(checks, indices, per_row[1], arg)
        return TableGather(indices + per_row[0], cols[0])
    unit, m = _units(cols)
    starts = exclusive_cumsum([r * c for r, c in zip(rows, m, strict=True)])
    out_starts = exclusive_cumsum([n * c for n, c in zip(counts, m, strict=True)])
    sel_starts = exclusive_cumsum(counts)
    a = [s - o + k * c for s, o, k, c in zip(starts, out_starts, sel_starts, m, strict=True)]
    meta = torch.tensor([a, m, list(rows), list(counts)], dtype=torch.int64).to(device)
    per_row = torch.repeat_interleave(meta[:3], meta[3], dim=1, output_size=n_sel)
    _add_row_check(checks, indices, per_row[2], arg)
    k = torch.arange(n_sel, dtype=torch.int64, device=device)
    d = torch.addcmul(per_row[0], indices - k, per_row[1])
    total = sum(n * c for n, c in zip(counts, m, strict=True))
    src = torch.repeat_interleave(d, per_row[1], output_size=total)
    return TableGather(src.add_(torch.arange(total, dtype=torch.int64, device=device)), unit)


def _units(cols: Sequence[int]) -> tuple[int, list[int]]:
    """(``g``, ``cols / g``) for ``g`` the gcd of the widths: rows of mixed widths are gathered
    in runs of ``g`` elements (``g`` = 64 for widths 64 and 128), not element by element."""
    g = math.gcd(*cols) if cols else 1
    g = max(g, 1)
    return g, [c // g for c in cols]


def table_gather_permuted(
    indices: torch.Tensor,
    rows: Sequence[int],
    cols: Sequence[int],
    n: int,
    checks: DataChecks | None,
    arg: str,
) -> TableGather:
    """As :func:`table_gather` with ``n`` rows per table laid out ``[n, sum(cols)]``: row ``i``
    of the output holds ``table_t[indices[t * n + i]]`` for every ``t``, side by side.

    Same row width: ``src[i, t] = indices[t * n + i] + R[t]``: the constants copy and an ``add``
    into a contiguous buffer (the transposed view is free).  Otherwise per (``i``, ``t``):
    ``d = (O[t] - D[t]) + idx * C[t] - i * sum(C)`` (``D[t]`` the table's first output column):
    the constants copy, ``arange`` and ``sub`` (the ``(n, T)`` base), ``addcmul``, the repeats'
    ``clone``, ``repeat_interleave``, ``arange``, ``add_``.  The index check
    (:func:`_add_row_check`) comes on top.
    """
    device = indices.device
    n_t = len(rows)
    idx2d = indices.view(n_t, n).t()  # (n, T): row i, table t
    if len(set(cols)) == 1 and cols[0] > 0:
        meta = torch.tensor([exclusive_cumsum(rows), list(rows)], dtype=torch.int64).to(device)
        _add_row_check(checks, idx2d, meta[1].view(1, -1), arg)
        src = torch.empty((n, n_t), dtype=torch.int64, device=device)
        torch.add(idx2d, meta[0].view(1, -1), out=src)
        return TableGather(src.view(-1), cols[0])
    unit, m = _units(cols)
    width = sum(m)
    starts = exclusive_cumsum([r * c for r, c in zip(rows, m, strict=True)])
    b = [s - c for s, c in zip(starts, exclusive_cumsum(m), strict=True)]
    meta = torch.tensor([b, m, list(rows)], dtype=torch.int64).to(device)
    _add_row_check(checks, idx2d, meta[2].view(1, -1), arg)
    # the (n, T) base first: elementwise outputs take the layout of their first full operand,
    # so d is row-major although idx2d is transposed (an out= would be, in eager only: under
    # functionalization the result keeps idx2d's strides)
    row_starts = torch.arange(0, n * width, width, dtype=torch.int64, device=device)
    base = meta[0].view(1, -1) - row_starts.view(-1, 1)
    d = torch.addcmul(base, idx2d, meta[1].view(1, -1))
    repeats = meta[1].view(1, -1).expand(n, n_t).reshape(-1)
    total = n * width
    src = torch.repeat_interleave(d.reshape(-1), repeats, output_size=total)
    return TableGather(src.add_(torch.arange(total, dtype=torch.int64, device=device)), unit)


def index_range(checks: DataChecks, indices: torch.Tensor, n: int, arg: str) -> torch.Tensor:
    """Require ``0 <= indices < n`` and return indices safe to gather with until the checks ran
    (clamped when validating; launches: ``aminmax`` + ``clamp``)."""
    if not validation_enabled() or indices.numel() == 0:
        return indices
    low, high = torch.aminmax(indices)
    what = f"argument '{arg}' must hold indices in [0, {n})"
    checks.add(low, 0, None, what)
    checks.add(high, None, n - 1, what)
    return indices.clamp(0, max(n - 1, 0))


class SelectedRows(torch.autograd.Function):
    """Rows of ``x`` selected by an op, differentiable in ``x``.

    Forward: ``call(x)``, the op itself below autograd (so that a trace records the op, which
    its fake kernel sizes, not the host reads of its kernel), a list whose first output is
    ``x.index_select(0, src)`` for a gather index ``src`` the kernel computed, the second the
    output lengths; the others are not differentiable.  Backward: ``src = index(*saved,
    out_lengths, num_rows)`` rebuilt from the tensors saved (device ops sized by the output:
    no sync, traceable), then
    ``grad_x = zeros_like(x).index_add_(0, src, grad)`` (upstream's ``jagged_index_add`` math:
    repeated segments add up).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        x: torch.Tensor,
        call: Callable[[torch.Tensor], Sequence[torch.Tensor]],
        index: Callable[..., torch.Tensor],
        saved: tuple[torch.Tensor, ...],
    ) -> tuple[torch.Tensor, ...]:
        outs = tuple(call(x))
        # the output's size, not the gradient's: traced, the forward's (unbacked) size is what
        # the partitioner can hand to the backward
        ctx.index, ctx.x_shape, ctx.num_rows = index, x.shape, outs[0].size(0)
        ctx.save_for_backward(*saved, outs[1])  # the output lengths
        ctx.mark_non_differentiable(*outs[1:])
        ctx.set_materialize_grads(False)  # no zeros for the outputs without a gradient
        return outs

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor | None, *_: object
    ) -> tuple[torch.Tensor | None, None, None, None]:
        if grad is None or not ctx.needs_input_grad[0]:
            return None, None, None, None
        src = ctx.index(*ctx.saved_tensors, ctx.num_rows)
        return grad.new_zeros(ctx.x_shape).index_add_(0, src, grad), None, None, None


class GatherRows(torch.autograd.Function):
    """``out = x.index_select(0, src)`` with ``src`` computed by the forward kernel (where that
    program traces: an output size given, no host read); the backward scatters:
    ``grad_x = zeros_like(x).index_add_(0, src, grad_out)``.  Extra outputs are not
    differentiable.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        x: torch.Tensor,
        src: torch.Tensor,
        *extras: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        ctx.save_for_backward(src)
        ctx.x_shape = x.shape
        out = x.index_select(0, src)
        ctx.mark_non_differentiable(*extras)
        ctx.set_materialize_grads(False)  # no zeros for the outputs without a gradient
        return (out, *extras)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor | None, *_: object
    ) -> tuple[torch.Tensor | None, ...]:
        (src,) = ctx.saved_tensors
        nones = [None] * (1 + len(_))
        if grad is None or not ctx.needs_input_grad[0]:
            return (None, *nones)
        return (grad.new_zeros(ctx.x_shape).index_add_(0, src, grad), *nones)
