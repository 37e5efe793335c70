"""Gather indices selecting rows of many tables stored back to back in one flat buffer
(``batch_index_select_dim0``, ``group_index_select_dim0``), without a loop over the tables.

The layout (rows, widths and selected counts of every table) is known on the host; the indices
are data.  Per-table constants reach the selected rows by :func:`segment_table` (one pinned
upload, an int32 ``index_add`` and ``cumsum``: no ``repeat_interleave``, which a 910B runs on its
AI CPU, and no blocking upload, which stalls the host: docs/hardware.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fbgemm_npu.native._checks import DataChecks
from fbgemm_npu.native._host import exclusive_cumsum
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.index_select._utils import count_le, scan_dtype

__all__ = [
    "TableGather",
    "inside_buffer",
    "segment_table",
    "table_gather",
    "table_gather_permuted",
]


@dataclass
class TableGather:
    """How to gather selected rows from tables stored back to back in one flat buffer.

    ``src`` indexes ``buffer.view(-1, unit)``: rows when every table has the same row width
    (``unit`` = that width), runs of ``unit`` elements otherwise (``unit`` the widths' gcd).
    """

    src: torch.Tensor
    unit: int


def inside_buffer(
    op: str,
    arg: str,
    plan: TableGather,
    rows: Sequence[int],
    cols: Sequence[int],
    counts: Sequence[int],
) -> TableGather:
    """``plan`` with its index clamped into the tables' buffer (``sum(rows * cols) / unit``
    units): under deferred checks the gather (and the backward's ``index_add_``) runs before the
    queued index check is read, and must stay inside the buffer (the result is unspecified then;
    the check raises).  One ``clamp``, a check launch (call it only while validating).  A table of
    no rows with rows selected matches no valid call: refused on the host (sizes alone)."""
    for t, (r, n) in enumerate(zip(rows, counts, strict=True)):
        if r == 0 and n > 0:
            raise ValueError(
                f"{op}: argument '{arg}' selects {n} rows of table {t}, which has none"
            )
    units = sum(r * c for r, c in zip(rows, cols, strict=True)) // max(plan.unit, 1)
    if plan.src.numel() == 0 or units == 0:
        return plan
    return TableGather(plan.src.clamp(0, units - 1), plan.unit)


def segment_table(
    columns: Sequence[Sequence[int]], counts: Sequence[int], device: torch.device
) -> torch.Tensor:
    """``out[i, c] = columns[c][t(i)]`` for the ``n = sum(counts)`` items, ``t(i)`` the segment
    holding item ``i`` when segment ``t`` has ``counts[t]`` items (host values: ``C`` lists of
    ``S``; the host work is ``O(C * S)``, plain Python: a trace's schema checks see no host op).

    Every column is a running sum of its jumps at the segment starts: ``out = cumsum(index_add(
    zeros(n + 1, C), starts, diff(columns)))`` (empty segments share a start and their jumps
    add up; segments starting at ``n`` land in the spare row).  int32 when the host sees that
    the values and their jumps fit (:func:`._utils.scan_dtype`; AI Core), else int64 (AI CPU on a
    910B, for layouts of 2**31 and more).  Launches: the pinned upload of the starts and jumps,
    ``index_add``, ``cumsum``: 3, no stall.
    """
    n, n_cols, n_seg = sum(counts), len(columns), len(counts)
    # per segment (row-major), each column's step from the segment before
    jumps = [col[t] - (col[t - 1] if t else 0) for t in range(n_seg) for col in columns]
    largest = max((abs(v) for v in [*jumps, *(v for col in columns for v in col)]), default=0)
    dtype = scan_dtype(n + 1, largest)
    up = upload([*exclusive_cumsum(counts), *jumps], dtype, device)
    pos, src = up[:n_seg], up[n_seg:].view(n_seg, n_cols)
    if dtype == torch.int32:
        zeros = filled_i32((n + 1) * n_cols, 0, device).view(n + 1, n_cols)
    else:
        zeros = torch.zeros((n + 1, n_cols), dtype=dtype, device=device)
    marks = torch.index_add(zeros, 0, pos, src)
    return torch.cumsum(marks[:n], 0, dtype=dtype)


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


def _units(cols: Sequence[int]) -> tuple[int, list[int]]:
    """(``g``, ``cols / g``) for ``g`` the gcd of the widths: rows of mixed widths are gathered
    in runs of ``g`` elements (``g`` = 64 for widths 64 and 128), not element by element."""
    g = math.gcd(*cols) if cols else 1
    g = max(g, 1)
    return g, [c // g for c in cols]


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
    row, reaching the rows by :func:`segment_table`, 3 launches) and an ``add``.  Otherwise per
    run of ``g`` elements (``g`` the gcd of the widths, ``m[t] = C[t] / g``):
    ``src[e] = e + d[k(e)]`` with ``d[k] = A[t] + (indices[k] - k) * m[t]`` (``A[t]`` a host
    constant of the shapes) and ``k(e)`` the selected row holding run ``e``, found from the rows'
    first runs ``E[k] = B[t] + k * m[t]`` by :func:`._utils.count_le` (no clamp: the host built
    them): the table (3), ``sub`` and ``addcmul`` for ``d``, ``addcmul`` for ``E``, ``index_add``
    and ``cumsum``, the gather of ``d``, ``add_`` of a cached ``arange``: 10.  The index check
    (:func:`_add_row_check`, with the rows per table as one more column) comes on top.
    """
    device = indices.device
    n_sel = indices.numel()
    limits = [list(rows)] if checks is not None else []
    if len(set(cols)) == 1 and cols[0] > 0:
        per_row = segment_table([exclusive_cumsum(rows), *limits], counts, device)
        if checks is not None:
            _add_row_check(checks, indices, per_row[:, 1], arg)
        return TableGather(indices + per_row[:, 0], cols[0])
    unit, m = _units(cols)
    starts = exclusive_cumsum([r * c for r, c in zip(rows, m, strict=True)])
    out_starts = exclusive_cumsum([n * c for n, c in zip(counts, m, strict=True)])
    sel_starts = exclusive_cumsum(counts)
    a = [s - o + k * c for s, o, k, c in zip(starts, out_starts, sel_starts, m, strict=True)]
    b = [o - k * c for o, k, c in zip(out_starts, sel_starts, m, strict=True)]
    per_row = segment_table([a, m, b, *limits], counts, device)
    if checks is not None:
        _add_row_check(checks, indices, per_row[:, 3], arg)
    k = arange_cached(n_sel, device)
    d = torch.addcmul(per_row[:, 0], indices - k, per_row[:, 1])
    first_runs = torch.addcmul(per_row[:, 2], k, per_row[:, 1])
    total = sum(n * c for n, c in zip(counts, m, strict=True))
    run_row = count_le(first_runs[1:], total, clamp=False)
    return TableGather(d.index_select(0, run_row).add_(arange_cached(total, device)), unit)


@functools.lru_cache(maxsize=64)
def _run_constants(rows: tuple[int, ...], m: tuple[int, ...]) -> list[int]:
    """``[t(w)..., c1[w]..., c2[w]...]`` of :func:`table_gather_permuted` for the ``sum(m)`` runs
    ``w`` of an output row: run ``w`` belongs to table ``t(w)``, ``c1[w]`` is that table's
    first run in the input plus ``w``'s place in the table's row, ``c2[w] = m[t(w)]``.  Host
    work ``O(sum(m))`` once per layout (cached: plain ints, never stale)."""
    first = exclusive_cumsum([r * c for r, c in zip(rows, m, strict=True)])
    table = [t for t, c in enumerate(m) for _ in range(c)]
    col0 = exclusive_cumsum(m)
    c1 = [first[t] + w - col0[t] for w, t in enumerate(table)]
    return [*table, *c1, *(m[t] for t in table)]


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

    Same row width: ``src[i, t] = indices[t * n + i] + R[t]``: the constants' upload and an
    ``add`` into a contiguous buffer (the transposed view is free).  Otherwise every output row
    has the same runs: run ``w`` belongs to table ``t(w)``, so ``src[i, w] = c1[w] +
    indices[t(w) * n + i] * c2[w]`` with host constants of the shapes (``c1[w]`` the table's
    first run plus ``w``'s place in its row, ``c2[w] = m[t(w)]``; ``sum(cols) / g`` of each):
    the upload of ``t``, ``c1``, ``c2``, a gather of the index columns, an ``addcmul``: 3.  The
    index check (:func:`_add_row_check`) comes on top.
    """
    device = indices.device
    n_t = len(rows)
    idx2d = indices.view(n_t, n).t()  # (n, T): row i, table t
    if len(set(cols)) == 1 and cols[0] > 0:
        meta = upload([exclusive_cumsum(rows), list(rows)], torch.int64, device)
        _add_row_check(checks, idx2d, meta[1].view(1, -1), arg)
        src = torch.empty((n, n_t), dtype=torch.int64, device=device)
        torch.add(idx2d, meta[0].view(1, -1), out=src)
        return TableGather(src.view(-1), cols[0])
    unit, m = _units(cols)
    width = sum(m)
    host = _run_constants(tuple(rows), tuple(m))
    meta = upload([*host, *rows] if checks is not None else host, torch.int64, device)
    _add_row_check(checks, idx2d, meta[3 * width :].view(1, -1), arg)
    gathered = idx2d.index_select(1, meta[:width])  # (n, width)
    src = torch.addcmul(meta[width : 2 * width], gathered, meta[2 * width : 3 * width])
    return TableGather(src.view(-1), unit)
