"""The permute family's gather indices, built on a 910B's AI Core (docs/hardware.md).

Every op of the family is one gather: output row ``t`` (a feature of ``B`` segments, or one
segment) is a copy of some input row, so output element ``j`` of row ``t`` reads input element
``j + d_t`` with ``d_t = S_t - So_t``, the distance between the two rows' starts.  The per-element
index is a "segment arange" that ATen has no op for; it is built from the rows' bounds alone:

    marks = [0, 1, 1, ..., 1] + sum_t (x_t at So_t) - sum_t (y_t at Eo_t)      (n + 1 long)
    index = cumsum(marks[:n])

where ``So_t`` / ``Eo_t`` are output row ``t``'s start / end.  For ``j`` in row ``t*`` the cumsum
is ``j + x_{t*} + sum_{u < t*} (x_u - y_u)`` (rows after ``t*`` start past ``j``, and an empty row
adds ``x_u - y_u`` at one position, so rows sharing a bound need no care).  Two choices of
``(x, y)`` give the source index: ``x_t = y_t = d_t`` (:func:`segment_arange`), or ``x_t = S_t``
and ``y_t = E_t``, the source row's start and end (:func:`source_index`: the sum telescopes to
``-So_{t*}`` because ``E_u - S_u`` is row ``u``'s length; no ``d`` to compute).  Launches: two
``index_add`` into a copy of a cached constant (``native/_index.py: steps_cached``) and one
``cumsum``, all in the index dtype: int32 whenever every bound fits (AI Core; int64 ``cumsum``
and ``index_add`` run on the AI CPU), which the host decides from sizes (:func:`index_dtype`),
never from data.

This replaces ``repeat_interleave`` with a tensor of repeats (AI CPU: an int64 ``cumsum``
inside) plus an ``arange`` and an ``add``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import arange_cached, segment_ids, steps_cached

__all__ = [
    "INT32_LIMIT",
    "index_dtype",
    "row_bounds",
    "segment_arange",
    "segment_arange_wide",
    "source_index",
]

# Offsets, positions and source indices below this fit an int32 (the host's test; tests lower
# it to exercise the int64 route on small tensors).
INT32_LIMIT = 2**31


def index_dtype(*bounds: int) -> torch.dtype:
    """int32 when every value the index arithmetic holds is below ``INT32_LIMIT`` (the callers
    pass the largest: the number of values gathered from, the output size), else int64 (a 910B
    runs its scans on the AI CPU: a size >= 2**31 elements is the only way there)."""
    return torch.int32 if max(bounds, default=0) < INT32_LIMIT else torch.int64


def _arange_by_rows(
    starts: torch.Tensor,
    ends: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    n: int,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``cumsum(steps + x at starts - y at ends)[:n]`` (module docstring), in ``x``'s dtype,
    written into ``out`` (``n`` elements) when given."""
    marks = torch.index_add(steps_cached(n + 1, x.device, x.dtype), 0, starts, x)
    marks.index_add_(0, ends, y, alpha=-1)
    if out is None:
        return torch.cumsum(marks[:n], 0, dtype=x.dtype)
    return torch.cumsum(marks[:n], 0, dtype=x.dtype, out=out)


def row_bounds(
    lengths: torch.Tensor, permuted_lengths: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """Both complete scans of the lengths in one buffer ``U`` of ``dtype``: ``U[: N_in + 1]`` =
    ``0, cumsum(lengths)`` and ``U[N_in + 1 :]`` = ``0, cumsum(permuted_lengths)`` (``N_in`` /
    ``N_out`` their numels, both > 0; read flat in logical order).  Row bounds are strided views
    of it (:func:`source_index`).  Launches: one ``zero_`` (both leading zeros, one strided view),
    two ``cumsum`` (int32: AI Core; a length above 2**31 would be cut by the cast, which the
    callers' checks refuse)."""
    n_in, n_out = lengths.numel(), permuted_lengths.numel()
    bounds = torch.empty(n_in + n_out + 2, dtype=dtype, device=lengths.device)
    bounds.as_strided((2,), (n_in + 1,)).zero_()
    torch.cumsum(lengths.reshape(-1), 0, dtype=dtype, out=bounds[1 : n_in + 1])
    torch.cumsum(permuted_lengths.reshape(-1), 0, dtype=dtype, out=bounds[n_in + 2 :])
    return bounds


def source_index(
    bounds: torch.Tensor, index: torch.Tensor, rows: tuple[int, int, int], n: int, safe: bool
) -> torch.Tensor:
    """The source index of each of the ``n`` output elements, in ``bounds``' dtype.

    ``bounds`` from :func:`row_bounds`; ``rows = (T_in, T_out, B)``: row ``p`` of the input spans
    ``bounds[p B] : bounds[(p + 1) B]``, output row ``t`` (a copy of input row ``index[t]``)
    spans ``bounds[N_in + 1 + t B] : bounds[N_in + 1 + (t + 1) B]``.  ``safe`` (data not yet
    verified, checks deferred): the output bounds are clamped to ``[0, n]`` first (in place), so
    the scatters stay in their buffer whatever the data.  Launches: a gather of the source rows'
    (start, end) pairs, then :func:`_arange_by_rows` (2 ``index_add``, ``cumsum``); ``safe``
    adds the clamp.
    """
    t_in, t_out, b = rows
    n_in = t_in * b
    # (start, end) of each input row: an overlapping view, row p = (bounds[p B], bounds[p B + B])
    spans = bounds.as_strided((t_in, 2), (b, b), bounds.storage_offset())
    ends = bounds.as_strided((t_out + 1,), (b,), bounds.storage_offset() + n_in + 1)
    if safe:
        ends.clamp_(0, n)
    src = spans.index_select(0, index)
    return _arange_by_rows(ends[:-1], ends[1:], src[:, 0], src[:, 1], n)


def segment_arange(
    starts: torch.Tensor, bounds: torch.Tensor, n: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``out[bounds[t] + i] = starts[t] + i`` for ``0 <= i < bounds[t + 1] - bounds[t]`` (``n``
    elements; ``bounds`` non-decreasing from 0 to ``n``, in ``[0, n]``), in ``starts``' dtype,
    wrapping as that integer type does (every step is arithmetic mod 2**32 or 2**64); into
    ``out`` (``n`` elements of that dtype) when given.  Launches: the distance ``d = starts -
    bounds[:-1]``, 2 ``index_add``, ``cumsum``: AI Core for int32, AI CPU for int64 (use
    :func:`segment_arange_wide`)."""
    d = torch.sub(starts, bounds[:-1])
    return _arange_by_rows(bounds[:-1], bounds[1:], d, d, n, out)


def segment_arange_wide(
    starts: torch.Tensor, bounds: torch.Tensor, n: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`segment_arange` for int64 ``starts`` (values may pass 2**31), on the AI Core: the
    row of each element by :func:`~fbgemm_npu.native._index.segment_ids` (int32 ``index_add`` +
    ``cumsum``; ``bounds`` are clamped into ``[0, n]`` there), then ``d[row] + arange``.  ``d``
    has one spare element, never written, which an element past ``bounds[-1]`` (bad data, its
    check deferred) reads instead of reading past the buffer.  Launches: the difference, the
    segment ids (clamp, index_add, cumsum), a gather, an ``add_`` (the arange is cached); into
    ``out`` (``n`` elements of ``starts``' dtype) when given."""
    t = starts.numel()
    d = torch.empty(t + 1, dtype=starts.dtype, device=starts.device)
    torch.sub(starts, bounds[:-1], out=d[:t])
    rows = segment_ids(bounds, n)
    out = d.index_select(0, rows) if out is None else torch.index_select(d, 0, rows, out=out)
    return out.add_(arange_cached(n, out.device, out.dtype))
