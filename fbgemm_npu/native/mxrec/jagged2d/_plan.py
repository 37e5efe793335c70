"""The row permutation behind ``mxrec::concat_2d_jagged`` / ``mxrec::split_2d_jagged``: for
every output row of the concat, its source row in ``cat([A, B])`` (rows ``0 .. TA - 1`` are
A's, ``TA .. TA + TB - 1`` B's), built on the device from the offsets, no host read.

Per batch ``j`` (``lA_j = oA[j+1] - oA[j]``, ``lB_j`` likewise, ``p_j = min(n, lB_j)`` the prefix
of B moved in front, GR's ``n_prefix_from_right``) the output holds the segments
``B[oB_j : oB_j + p_j]``, ``A[oA_j : oA_{j+1}]``, ``B[oB_j + p_j : oB_{j+1}]``, from output row
``oA_j + oB_j`` on.  After the last batch come A's rows past ``oA[-1]`` and then B's past
``oB[-1]`` (Rec SDK allows values longer than their offsets): so the concat is a permutation
of ``cat([A, B])`` and the split its exact inverse.  Inside a segment the source row is the
output row plus a per-segment constant ``delta``; with the virtual offsets ``oA_{B+1} = TA``
and ``p_B = 0`` the trailing rows are batch ``B``'s segments, so one ``(B + 1, K)`` table of
segment starts and one of deltas cover every row::

    start = [oA_j + oB_j, oA_j + oB_j + p_j, oA_{j+1} + oB_j + p_j]
    delta = [TA - oA_j,   -(oB_j + p_j),     TA - oA_{j+1}]                (K = 3)

(K = 2 without a prefix: the first column is empty).  ``is_replace`` (GR's
``pytorch_replace_last_n_with_jagged``): the output has A's rows, the last ``q_j = min(lA_j,
lB_j)`` rows of each batch replaced by B's last ``q_j`` rows::

    start = [oA_j, oA_{j+1} - q_j],  delta = [0, TA + oB_{j+1} - oA_{j+1}]   (q_B = 0)

The segment of each row is :func:`segment_ids` (int32 ``index_add`` + ``cumsum``: no
``searchsorted``), the source ``arange + delta[segment]``, clamped into ``[0, TA + TB)`` so that
offsets a queued check refuses still read inside the buffers.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import arange_cached, segment_ids

__all__ = ["source_rows"]


def _extended(o: torch.Tensor, last: int) -> torch.Tensor:
    """``o`` with one more entry ``last`` (the virtual offset past the trailing rows): 2 launches
    (a copy into a fresh buffer, a fill)."""
    ext = torch.empty(o.numel() + 1, dtype=o.dtype, device=o.device)
    ext[:-1].copy_(o)
    ext[-1:].fill_(last)
    return ext


def _rsub(value: int, t: torch.Tensor, out: torch.Tensor) -> None:
    """``out = value - t`` in one launch: ``rsub`` has no ``out=``; a CPU 0-d ``value`` is a
    scalar operand for a device ``sub`` (no copy, no launch of its own)."""
    if not isinstance(value, int):  # a symbolic size (traced): no host scalar to wrap
        torch.neg(t, out=out).add_(value)
        return
    torch.sub(torch.tensor(value, dtype=t.dtype), t, out=out)


def _tables(
    oA: torch.Tensor, oB: torch.Tensor, ta: int, n: int, replace: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(start, delta)``, each ``(B + 1) * K`` int entries (see the module docstring)."""
    b1 = oA.numel()  # B + 1
    dtype = torch.promote_types(oA.dtype, oB.dtype)
    oA, oB = oA.to(dtype), oB.to(dtype)  # mixed int32 / int64: one widening (out= ops)
    k = 3 if n > 0 and not replace else 2
    start = torch.empty((b1, k), dtype=dtype, device=oA.device)
    delta = torch.empty((b1, k), dtype=dtype, device=oA.device)
    a_next = _extended(oA, ta)[1:]  # oA_{j+1}, TA for the trailing row
    if replace:
        q = torch.zeros(b1, dtype=dtype, device=oA.device)
        torch.minimum(oA[1:] - oA[:-1], oB[1:] - oB[:-1], out=q[:-1])
        start[:, 0].copy_(oA)
        torch.sub(a_next, q, out=start[:, 1])
        delta[:, 0].zero_()
        torch.add(oB[1:] - oA[1:], ta, out=delta[:-1, 1])  # the trailing row: never selected
        delta[-1:, 1].zero_()
        return start.view(-1), delta.view(-1)
    if k == 2:
        torch.add(oA, oB, out=start[:, 0])
        torch.add(a_next, oB, out=start[:, 1])
        torch.neg(oB, out=delta[:, 0])
        _rsub(ta, a_next, delta[:, 1])
        return start.view(-1), delta.view(-1)
    p = torch.zeros(b1, dtype=dtype, device=oA.device)
    torch.sub(oB[1:], oB[:-1], out=p[:-1])
    p[:-1].clamp_(max=n)
    q = oB + p  # oB_j + p_j
    torch.add(oA, oB, out=start[:, 0])
    torch.add(oA, q, out=start[:, 1])
    torch.add(a_next, q, out=start[:, 2])
    _rsub(ta, oA, delta[:, 0])
    torch.neg(q, out=delta[:, 1])
    _rsub(ta, a_next, delta[:, 2])
    return start.view(-1), delta.view(-1)


def source_rows(
    oA: torch.Tensor, oB: torch.Tensor, ta: int, tb: int, n: int, replace: bool
) -> torch.Tensor:
    """int64 ``[TA + TB]`` (``[TA]`` with ``replace``): each concat output row's row of
    ``cat([A, B])``, clamped into range.  Launches: the tables (6; 12 with a prefix or replacing;
    + 1 to widen offsets of two dtypes), :func:`segment_ids` (3), the delta gather, the add,
    the clamp."""
    rows = ta if replace else ta + tb
    # int32 sums of valid offsets could wrap past 2**31 rows: the table in int64
    if isinstance(ta + tb, int) and ta + tb >= 2**31:
        oA, oB = oA.to(torch.int64), oB.to(torch.int64)
    start, delta = _tables(oA, oB, ta, n, replace)
    seg = segment_ids(start, rows)
    src = arange_cached(rows, oA.device) + delta.index_select(0, seg)
    return src.clamp_(0, torch.sym_max(ta + tb - 1, 0))
