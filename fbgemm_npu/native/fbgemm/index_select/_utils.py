"""Helpers shared by the index-select family's modules (jagged, keyed, batch and group selects,
ranges, segment sums, unique indices).

* The data checks go through :class:`~fbgemm_npu.native._checks.DataChecks`: the conditions only
  the data knows (an index in range, offsets that do not decrease, a given size that matches the
  data), verified all at once, riding on a device-to-host read the op makes anyway or queued on
  the device; :func:`index_range` and the table gathers add theirs to it.
* Index arithmetic kept on a 910B's AI Core (docs/hardware.md, "AI-CPU routes"): scans in int32
  where the host knows from sizes alone that the values fit (:func:`scan_dtype`), counts of
  points at or below each position without ``searchsorted`` (:func:`count_le`), and the gather
  index of a jagged select built from them (:func:`rows_gather_index`).
* The table gathers of ``batch_index_select_dim0`` / ``group_index_select_dim0`` are in
  :mod:`._tables`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    allocation_of,
    check_dtype,
    check_ndim,
    check_tensor,
    dtype_name,
    dynamic_size,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32

__all__ = [
    "INT32_LIMIT",
    "GatherRows",
    "SelectedRows",
    "check_fits",
    "check_index_tensor",
    "check_non_negative",
    "check_selected_size",
    "count_le",
    "dynamic_size",
    "index_range",
    "jagged_select_src",
    "rows_gather_index",
    "same_dtype_or_raise",
    "scan_dtype",
    "segment_starts",
    "select_rows_index",
    "sum_fits",
]

INT32_LIMIT = 2**31


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


def scan_dtype(*bounds: int | torch.SymInt) -> torch.dtype:
    """int32 when every bound is below 2**31, else int64: the dtype of a scan (or other index
    arithmetic) whose values the host bounds by ``bounds`` from sizes alone (numel, a size
    argument), never by reading the data.  int32 keeps a 910B's ``cumsum`` and ``index_add`` on
    its AI Core; int64 (sizes of 2**31 and more) runs them on its AI CPU but never wraps.  A
    symbolic size (a traced call) counts as below only when its bounds prove it (no guard)."""
    fits = all(statically_known_true(b < INT32_LIMIT) for b in bounds)
    return torch.int32 if fits else torch.int64


def count_le(points: torch.Tensor, n: int, clamp: bool = True) -> torch.Tensor:
    """``c[i] = #{k : points[k] <= i}`` for ``i < n``, int32.

    For non-decreasing ``points`` this is ``searchsorted(points, arange(n), right=True)``: the
    segment of item ``i`` when ``points`` are the segments' inclusive ends.  Built without it (a
    910B runs ``searchsorted`` on its AI CPU): a one at every point, ``marks =
    index_add(zeros(n + 1), clamp(points, 0, n), 1)``, then ``c = cumsum(marks[:n])``, all int32
    (AI Core).  The clamp keeps a point outside ``[0, n]`` in the buffer with the same count (below
    0 counts for every item, above ``n`` for none) and makes bad data harmless; ``clamp=False``
    for points the host built inside ``[0, n]``.  Launches: clamp, an out-of-place ``index_add``
    (of cached zeros and ones), cumsum.
    """
    dev = points.device
    at = points.clamp(0, n) if clamp else points
    marks = torch.index_add(filled_i32(n + 1, 0, dev), 0, at, filled_i32(at.numel(), 1, dev))
    return torch.cumsum(marks[:n], 0, dtype=torch.int32)


def segment_starts(
    inclusive: torch.Tensor, other: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``([0, *inclusive], [0, *other[:-1]])``: the start of every segment of both inclusive
    offset tensors (int64) from one ``cat`` behind a cached zero (an int64 ``constant_pad_nd``
    runs on a 910B's AI CPU)."""
    zero = arange_cached(1, inclusive.device, inclusive.dtype)
    both = torch.cat([zero, inclusive, zero, other[:-1]])
    return both[: inclusive.numel() + 1], both[inclusive.numel() + 1 :]


def select_rows_index(
    checks: DataChecks,
    d: torch.Tensor,
    out_ends: torch.Tensor,
    num_rows: int | None,
    arg: str,
    n_src: int,
    exact: bool = False,
) -> torch.Tensor:
    """:func:`rows_gather_index` of a jagged select, with its data checks run: the output has
    ``num_rows`` rows (the argument ``arg``), which must not exceed the selected lengths' sum
    (``exact``: must equal it), checked on the device, or, when it is None, that sum, read back
    to the host with the checks riding on the read (which raises before any gather).

    Given a size, the index is built first (a size no memory holds fails named, before a check
    is queued), then the checks are queued and, while validating, the index is clamped into the
    ``n_src`` source rows (one launch, the checks' own): under deferred checks the gather runs on
    bad data, and must stay inside its buffer.  The caller refuses on the host a ``num_rows > 0``
    with ``n_src == 0`` (no valid call reaches it)."""
    if num_rows is None:
        total = checks.read_with([out_ends[-1]])[0]
        return rows_gather_index(d, out_ends, total, clamp=validation_enabled())
    validate = validation_enabled()
    with allocation_of(checks.op, f"the output of '{arg}' = {num_rows} rows"):
        # a size that may stop short of the last end (a truncated output) keeps the clamp
        src = rows_gather_index(d, out_ends, num_rows, clamp=validate or not exact)
    if validate:
        if exact:
            what = f"argument '{arg}' ({num_rows}) must equal the sum of the selected lengths"
            checks.add(out_ends[-1], num_rows, num_rows, what)
        else:
            what = f"argument '{arg}' ({num_rows}) must not exceed the sum of the selected lengths"
            checks.add(out_ends[-1], num_rows, None, what)
        checks.assert_on_device()
        if num_rows > 0:
            src = src.clamp_(0, n_src - 1)
    return src


def check_selected_size(
    op: str, arg: str, value: int | None, n_indices: int, n_src: int, src: str = "values.size(0)"
) -> None:
    """A size argument above ``n_indices * n_src`` (each of the ``n_indices`` selected segments
    holds at most the ``n_src`` source rows: ``src``) matches no valid call, and rows asked of an
    empty source cannot be gathered at all: refused on the host, before anything is allocated
    or queued."""
    if value is not None and value > n_indices * n_src:
        raise ValueError(
            f"{op}: argument '{arg}' ({value}) must not exceed len(indices) * {src} "
            f"({n_indices * n_src})"
        )


def rows_gather_index(
    d: torch.Tensor, out_ends: torch.Tensor, num_rows: int, clamp: bool = True
) -> torch.Tensor:
    """``src[r] = r + d[s(r)]`` for output rows ``r < num_rows``, ``s(r)`` the segment holding r.

    ``out_ends`` are the inclusive ends of the ``S`` output segments (non-decreasing), ``d`` one
    start distance per segment (``input start - output start``).  ``s(r) = #{s < S - 1 :
    out_ends[s] <= r}`` (:func:`count_le` of all ends but the last): the segment of every row
    before ``out_ends[-1]``, so ``num_rows`` may stop short of it (a truncated output), and never
    past ``S - 1``, so rows past the last end (invalid input, refused by the caller's checks)
    still gather inside ``d``.  ``src`` has ``d``'s dtype (int32 where the caller's sizes allow:
    :func:`scan_dtype`).  ``clamp``: the ends may pass ``num_rows`` (a truncated output, or bad
    data while validating); without, they must not (all rows, trusted or checked data).
    Launches: ``count_le`` (3, or 2 without the clamp), the gather of ``d``, ``add_`` of a cached
    ``arange``: 5 (4).
    """
    seg = count_le(out_ends[:-1], num_rows, clamp=clamp)
    return d.index_select(0, seg).add_(arange_cached(num_rows, d.device, d.dtype))


def jagged_select_src(
    lengths: torch.Tensor,
    indices: torch.Tensor,
    out_lengths: torch.Tensor,
    num_rows: int,
    *,
    n_in: int,
) -> torch.Tensor:
    """The backward's gather index of ``jagged_index_select`` (the forward checked the data):
    the forward's ``src`` for all ``num_rows`` selected rows (``n_in`` the forward's
    ``values.size(0)``; the selected lengths sum to exactly ``num_rows``, which bounds the
    output scan).  Launches: two cumsums, a gather and a difference, the row index (5), then
    the backward's ``zeros`` and ``index_add_``: 11 in all."""
    in_incl = torch.cumsum(lengths, 0, dtype=scan_dtype(n_in))
    out_incl = torch.cumsum(out_lengths, 0, dtype=scan_dtype(num_rows))
    d = in_incl.index_select(0, indices) - out_incl
    return rows_gather_index(d, out_incl, num_rows, clamp=False)


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
