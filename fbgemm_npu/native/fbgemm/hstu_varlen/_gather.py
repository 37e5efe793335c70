"""The varlen rows <-> the padded layout of the tile program, for FBGEMM's HSTU attention.

Keys: ``S_k = max_seqlen_k`` padded rows per batch, ``j < L_k``.  Queries, two layouts:

* *at keys* (with rab): ``S_k`` rows, the queries at their key positions ``L_k - L_q <= r <
  L_k`` (upstream pads delta queries so: rab's rows are key positions), row ``r`` <-
  ``cu_seqlens_q[b] + r - (L_k - L_q)``;
* *own* (without rab): ``S_q = max_seqlen_q`` rows, row ``i < L_q`` <- ``cu_seqlens_q[b] + i``,
  its key position ``i + L_k - L_q`` a shift of the spans (``_spans.build_spans``): a delta
  call of few queries against a long history tiles ``S_q``, not ``S_k``, query rows.

Sources:

* queries (and the output gradient): as above;
* keys / values: row ``j`` <- ``cu_seqlens_k[b] + j``; with the paged KV cache, ``j < h``
  (``h = L_k - num_targets``) <- row ``j % page`` of page ``page_ids[page_offsets[b] + j //
  page]`` (``kv_cache[page, 0]`` keys, ``[page, 1]`` values), ``j >= h`` <- ``k`` / ``v`` row
  ``cu_seqlens_q[b] + L_q - num_targets + (j - h)`` (the target keys share q's layout);
* ``func [H_f, n_func, >= total_q]``: query row ``r``'s column, as ``(lo, hi)`` key intervals
  ``(0, f0), (f1, f2), ...``.

Every direction is an ``index_select`` by int32 index arithmetic (no ``searchsorted``, no AI-CPU
route: docs/hardware.md); every index is clamped into its buffer, so bad offsets or page ids
(whose data checks are queued) stay memory-safe, and rows outside a sequence are 0 (``where``).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import DataChecks
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.mxrec.hstu._paged import gather_pages

__all__ = ["func_intervals", "pad_keys", "pad_paged", "pad_queries", "query_rows", "unpad"]

I32 = torch.int32


def _rows(s: int, dev: torch.device) -> torch.Tensor:
    return arange_cached(s, dev, I32).view(1, -1)


def query_rows(cu_q: torch.Tensor, lq: torch.Tensor, lk: torch.Tensor, s: int, at_keys: bool):  # type: ignore[no-untyped-def]
    """``(src, valid)`` ``[B, S]``: the q row of each padded row (unclamped) and whether it is
    a query, in the layout ``at_keys`` or own (module docstring).  Launches: about 5 (2)."""
    r = _rows(s, cu_q.device)
    if not at_keys:
        return cu_q[:-1].view(-1, 1) + r, r < lq.view(-1, 1)
    first = (lk - lq).view(-1, 1)
    valid = (r >= first) & (r < lk.view(-1, 1))
    return cu_q[:-1].view(-1, 1) + r - first, valid


def _gather(
    xs: list[torch.Tensor], src: torch.Tensor, valid: torch.Tensor, back: bool = True
) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """``[B, S, *x.shape[1:]]`` of each ``x`` (one dtype, one row count): rows ``src`` (clamped)
    where ``valid``, else 0; and the int64 destination of every padded row for the way back
    (its source row, or the spare row ``rows`` past a sequence: :func:`unpad`; None without
    ``back``).  One
    ``index_select`` of the concatenated rows (``cat`` only when there are several), ``where``;
    0 rows: zeros."""
    rows, (b, s) = xs[0].size(0), src.shape
    src = src.clamp(0, max(rows - 1, 0))  # clamped: bad offsets stay memory-safe
    dest = torch.where(valid, src, rows).view(-1).long() if back else None
    if rows == 0:
        return [x.new_zeros(b, s, *x.shape[1:]) for x in xs], dest
    flat = [x.reshape(rows, -1) for x in xs]
    cat = torch.cat(flat, 1) if len(flat) > 1 else flat[0]
    got = cat.index_select(0, src.view(-1)).view(b, s, -1)
    got = torch.where(valid.unsqueeze(-1), got, 0)
    out, at = [], 0
    for x, f in zip(xs, flat, strict=True):
        out.append(got[..., at : at + f.size(1)].view(b, s, *x.shape[1:]))
        at += f.size(1)
    return out, dest


def pad_queries(
    xs: list[torch.Tensor],
    cu_q: torch.Tensor,
    lq: torch.Tensor,
    lk: torch.Tensor,
    s: int,
    at_keys: bool,
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """q-layout ``[total_q, H, D]`` tensors -> ``[B, S, H, D]`` (at the key positions, or in
    their own rows), and the way back (:func:`unpad`)."""
    src, valid = query_rows(cu_q, lq, lk, s, at_keys)
    return _gather(xs, src, valid)


def pad_keys(
    xs: list[torch.Tensor], cu_k: torch.Tensor, lk: torch.Tensor, s: int, back: bool
) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """k-layout ``[total_k, H_k, D]`` tensors -> ``[B, S, H_k, D]`` (rows ``j < L_k``), and
    with ``back`` the way back (:func:`unpad`)."""
    r = _rows(s, cu_k.device)
    return _gather(xs, cu_k[:-1].view(-1, 1) + r, r < lk.view(-1, 1), back)


def unpad(xp: torch.Tensor, dest: torch.Tensor, rows: int) -> torch.Tensor:
    """Padded ``[B, S, ...]`` -> ``[rows, ...]``: padded row ``i`` lands on row ``dest[i]`` (the
    spare row ``rows`` soaks up the padding); rows no padded row lands on (past seqused, past
    the last offset) are 0.  Launches: the zeros, 1 ``index_copy_`` (plus 1 copy for a strided
    ``xp``)."""
    flat = xp.reshape(xp.size(0) * xp.size(1), *xp.shape[2:])
    out = xp.new_zeros(rows + 1, *xp.shape[2:])
    return out.index_copy_(0, dest, flat)[:rows]


def pad_paged(
    k: torch.Tensor,
    v: torch.Tensor,
    paged: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    cu_q: torch.Tensor,
    lq: torch.Tensor,
    lk: torch.Tensor,
    num_targets: torch.Tensor | None,
    s: int,
    op: str,
    checks: DataChecks | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded keys and values with the paged KV cache (module docstring): the cached rows by
    :func:`~fbgemm_npu.native.mxrec.hstu._paged.gather_pages` (whole pages, one gather; it adds
    the page data checks to ``checks``), the targets by one gather of k / v, a ``where`` each.
    Launches: about 16 + 14."""
    cache, offs, ids, last = paged
    ck, cv, _ = gather_pages(cache, offs, ids, last, s, op=op, checks=checks)
    r = _rows(s, lk.device)
    nt = num_targets.view(-1, 1) if num_targets is not None else torch.zeros_like(lk).view(-1, 1)
    history = lk.view(-1, 1) - nt
    tgt = cu_q[:-1].view(-1, 1) + lq.view(-1, 1) - nt + (r - history)
    (tk, tv), _ = _gather([k, v], tgt, (r >= history) & (r < lk.view(-1, 1)), False)
    keep = (r < history).view(lk.numel(), s, 1, 1)
    return torch.where(keep, ck, tk), torch.where(keep, cv, tv)


def func_intervals(
    func: torch.Tensor,
    cu_q: torch.Tensor,
    lq: torch.Tensor,
    lk: torch.Tensor,
    s: int,
    heads: int,
    at_keys: bool,
) -> torch.Tensor:
    """``[B, H_f, S, n_func + 1]`` int32 ``(lo, hi)`` pairs ``(0, f0), (f1, f2), ...`` of each
    padded query row (its q row's column of ``func``, clamped; rows that are no query are
    emptied by :func:`build_spans`); ``H_f`` strictly between 1 and the ``heads`` of q is
    repeated to ``heads`` (1 copy).  Launches: the query rows (about 5), a gather, the leading
    zeros and ``cat``."""
    hf, nf, cols = func.shape
    b = lk.numel()
    src, _ = query_rows(cu_q, lq, lk, s, at_keys)
    got = func.index_select(2, src.clamp(0, cols - 1).view(-1)).view(hf, nf, b, s)
    got = got.permute(2, 0, 3, 1)  # [B, H_f, S, n_func]
    if 1 < hf < heads:  # the tile program reads 1 or H heads of spans: each func head repeated
        got = got.unsqueeze(2).expand(b, hf, heads // hf, s, nf).reshape(b, heads, s, nf)
    zero = torch.zeros(*got.shape[:3], 1, dtype=I32, device=func.device)
    return torch.cat([zero, got], -1)
