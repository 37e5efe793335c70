"""Jagged rows to the padded layout and back, with one index computed once per call.

The jagged rows of batch ``b`` are ``seq_offset[b]:seq_offset[b + 1]``; the padded layout has
``S`` rows per batch.  :func:`padded_rows` gathers the jagged tensors into it (``index_select``
of ``src = seq_offset[b] + pos``, zero past a length) and returns, with the lengths, the
*destination* of every padded row: its jagged row, or ``T`` (a spare row) past a length.  The
way back is then :func:`jagged_rows`, one ``index_copy_`` of all padded rows into ``T + 1`` rows
(the spare row soaks up the padding) -- 1 launch per tensor, where a gather needs the segment
ids of every token first (about 11).  Indices are clamped into their buffers, so offsets whose
data checks are queued rather than waited for stay memory-safe.  No ``searchsorted``, int32
index arithmetic, widened to int64 once for ``index_copy_`` (docs/hardware.md).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import arange_cached

__all__ = ["Rows", "jagged_rows", "padded_rows"]


class Rows:
    """The padded layout of one offsets tensor: int32 ``lengths [B]`` and the int64
    destination ``dest [B * S]`` of every padded row (``T`` past a length)."""

    def __init__(self, lengths: torch.Tensor, dest: torch.Tensor, tokens: int) -> None:
        self.lengths, self.dest, self.tokens = lengths, dest, tokens


def padded_rows(
    xs: list[torch.Tensor], off: torch.Tensor, s_max: int
) -> tuple[list[torch.Tensor], Rows]:
    """Jagged ``[T, ...]`` tensors (one dtype) -> padded ``[B, S, ...]`` (0 past a length) and
    the call's :class:`Rows`.  One gather of the concatenated rows.  Launches: about 10
    (casts, index arithmetic, ``cat`` for several tensors, ``index_select``, ``where``)."""
    tokens, batch = xs[0].size(0), off.numel() - 1
    dev = off.device
    o = off.to(torch.int32)
    lengths = o[1:] - o[:-1]
    pos = arange_cached(s_max, dev, torch.int32).view(1, -1)
    valid = pos < lengths.view(-1, 1)
    src = (o[:-1].view(-1, 1) + pos).clamp_(0, max(tokens - 1, 0))  # clamped: bad offsets stay safe
    dest = torch.where(valid, src, tokens).view(-1).long()
    widths = [x[0].numel() if tokens else x.shape[1:].numel() for x in xs]
    flat = (
        torch.cat([x.reshape(tokens, w) for x, w in zip(xs, widths, strict=True)], 1)
        if len(xs) > 1
        else xs[0].reshape(tokens, widths[0])
    )
    if tokens == 0:  # nothing to gather (an index into 0 rows is out of bounds)
        rows = flat.new_zeros(batch, s_max, flat.size(1))
    else:
        rows = flat.index_select(0, src.view(-1)).view(batch, s_max, -1)
        rows = torch.where(valid.unsqueeze(-1), rows, 0)
    out, at = [], 0
    for x, w in zip(xs, widths, strict=True):
        out.append(rows[..., at : at + w].view(batch, s_max, *x.shape[1:]))
        at += w
    return out, Rows(lengths, dest, tokens)


def jagged_rows(x: torch.Tensor, rows: Rows) -> torch.Tensor:
    """Padded ``[B, S, ...]`` -> jagged ``[T, ...]``: padded row ``(b, pos)`` lands on jagged row
    ``seq_offset[b] + pos``.  Launches: 1 ``index_copy_`` (plus 1 copy when ``x`` is not
    contiguous).  The result is the first ``T`` rows of a fresh ``T + 1``-row buffer."""
    flat = x.reshape(x.size(0) * x.size(1), *x.shape[2:])
    out = x.new_empty(rows.tokens + 1, *x.shape[2:])
    return out.index_copy_(0, rows.dest, flat)[: rows.tokens]
