"""Fused Triton kernels of the block bucketize ops: 3 launches (variable blocks 5) where the
tensor program takes 19-67.  The element math: :mod:`._triton_block_math`.

Math (:mod:`.bucketize`): element ``i`` of row ``r`` (feature ``t``), ``u`` its index read as
unsigned (``uint32`` / ``uint64``, as upstream; emulated in signed arithmetic: :func:`_bucket`),
``b = block_sizes[t]``, ``G = total_num_blocks[t]`` or ``P = my_size``, ``Lb = G // P``::

    u < b G:  bucket u // (b Lb),       new index u % (b Lb)
    else:     bucket (u % G) // Lb,     new index u // G

(``keep_orig_idx`` / ``keep_orig_idx_per_feature[t]``: new index ``u``).  Outputs bucket-major
and stable: element ``i`` goes to ``pos = o[p N + r] + rank``, ``o`` the exclusive scan of the
counts ``new_lengths[p N + r]`` and ``rank`` the number of earlier elements of row ``r`` in
bucket ``p`` (upstream's CPU order).

Kernels (``N`` rows, ``L`` indices, grid ``(min(N, MAX_PROGRAMS),)`` for the row kernels, each
program a contiguous run of rows, so its row starts are one blocked sum then a running one):

* ``_count_kernel``: per row, its elements in blocks of ``BLOCK_L``, each bucket one-hot against
  the ``BLOCK_P >= P`` buckets (a ``BLOCK_L x BLOCK_P`` tile), summed: writes all ``P`` counts of
  the row (no zero fill), the row's start (int32 scratch) and, per program, how many of its rows
  break the lengths' check.
* ``_scan_kernel``, grid ``(1,)``: the exclusive int32 scan of the ``P N`` counts in blocks with a
  carry, and the data check as one byte: the rows' flags, ``block_sizes`` (and
  ``total_num_blocks``) per feature, the VBE batch sizes.
* ``_scatter_kernel``: per row again; the rank of each element inside a block is the one-hot
  tile's ``tl.cumsum`` down the block plus the running per-bucket count of the earlier blocks;
  writes ``new_indices``, ``new_weights`` (rows of ``weights_dim`` columns, as same-width ints:
  exact for every float dtype), ``new_pos``, ``unbucketize_permute`` and ``bucket_mapping``.

The lengths' check without a scan per element: every row checks its length in ``[0, L]`` and its
end (int32 running sum of the lengths clamped into ``[0, L]``) in ``[0, L]``, the last row's end
``L``; the first row whose true end passes ``L`` is caught (below ``2**31`` it is > L, above it
wraps negative).  Memory-safe whatever the data: lengths clamped, every index read masked to
``[0, L)``, buckets clamped into ``[0, P)``, positions masked to ``[0, L)``.  The check is queued
(``check_on_device`` of a view of the byte): 0 launches more.

Variable blocks (``block_bucketize_pos``): the features' boundaries joined by one ``cat`` (none
for one feature) and a host-built ``[starts, sizes]`` table uploaded (pinned, non-blocking),
then the same three kernels with a binary search per element; the scan kernel checks every
feature's boundaries sorted (unsigned) and ``total_num_blocks > 0`` where ``block_sizes`` is 0.

Not handled here (``supported=False``, the tensor program serves them): ``my_size >
MAX_BUCKETS`` (the one-hot tile), no rows, ``P N``, ``L`` or the boundaries from ``2**31`` on.
Launches: 3, variable blocks 5 (4 with one feature).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fbgemm_npu.native._checks import check_on_device, validation_enabled
from fbgemm_npu.native._triton import launch
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.bucketize._triton_block_math import (
    _bucket,
    _bucket_var,
    _feature,
    _row_start,
)
from fbgemm_npu.native.fbgemm.bucketize.block import TRITON_MAX_BUCKETS as MAX_BUCKETS

__all__ = ["MAX_BUCKETS", "MAX_PROGRAMS", "block_bucketize_triton"]

# The row kernels' grid cap: each program first sums the lengths before its run (O(grid * N)
# loads in all), so a few thousand programs, enough to fill a GPU or a 910B's cores; tests
# lower it to exercise the runs.
MAX_PROGRAMS = 2048
TILE = 4096  # elements of the one-hot tile (int32: 16 KB of a core's 192 KB)
BLOCK = 128
_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}
Opt = torch.Tensor | None


@triton.jit
def _count_kernel(
    lengths, len_s, x_ptr, x_s, blocks, blk_s, total, tot_s, batch, b_s, flat, table,
    counts, starts, pflags, n_rows, n_idx, n_feat, rows_per_feature, rows_per, p, top,
    HAS_TOTAL: tl.constexpr, HAS_VBE: tl.constexpr, VAR: tl.constexpr, STEPS: tl.constexpr,
    BLOCK_L: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    r0 = pid * rows_per
    r1 = tl.minimum(r0 + rows_per, n_rows)
    start = _row_start(lengths, len_s, r0, n_idx, BLOCK_R)
    lane = tl.arange(0, BLOCK_L)
    ids = tl.arange(0, BLOCK_P)
    bad = 0
    for r in range(r0, r1):
        ln = tl.load(lengths + r * len_s)
        n = tl.minimum(tl.maximum(ln, 0), n_idx).to(tl.int32)
        end = start + n
        tail = (r == n_rows - 1) & (end != n_idx)
        bad += ((ln < 0) | (ln > n_idx) | (end < 0) | (end > n_idx) | tail).to(tl.int32)
        t = _feature(r, rows_per_feature, batch, b_s, n_rows, n_feat, HAS_VBE, BLOCK_R)
        b = tl.load(blocks + t * blk_s)
        graw = tl.load(total + t * tot_s) if HAS_TOTAL else b * 0 + p
        if VAR:  # the feature's boundaries: flat[s0 : s0 + nb]
            s0 = tl.load(table + t)
            nb = tl.load(table + n_feat + t)
            last = tl.load(flat + s0 + nb - 1)
        running = tl.zeros((BLOCK_P,), tl.int32)
        for i in range(0, n, BLOCK_L):
            k = i + lane
            e = start + k
            m = (k < n) & (e >= 0) & (e < n_idx)
            x = tl.load(x_ptr + e.to(tl.int64) * x_s, mask=m, other=0)
            if VAR:
                bucket, _ = _bucket_var(x, m, b, graw, p, top, flat, s0, nb, last, HAS_TOTAL, STEPS)
            else:
                bucket, _ = _bucket(x, b, graw, p, top)
            hot = (bucket[:, None] == ids[None, :]) & m[:, None]
            running += tl.sum(hot.to(tl.int32), axis=0)
        out = counts + ids * n_rows + r
        tl.store(out, running.to(counts.dtype.element_ty), mask=ids < p)
        tl.store(starts + r, start)
        start = end
    tl.store(pflags + pid, bad)


@triton.jit
def _scan_kernel(
    counts, offs, pflags, n_prog, blocks, blk_s, total, tot_s, batch, b_s, flat, table, flag,
    n_cnt, n_rows, n_feat, p, top,
    HAS_TOTAL: tl.constexpr, HAS_VBE: tl.constexpr, VAR: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    lane = tl.arange(0, BLOCK)
    carry = 0
    for f in range(0, n_cnt, BLOCK):
        j = f + lane
        m = j < n_cnt
        c = tl.load(counts + j, mask=m, other=0).to(tl.int32)
        tl.store(offs + j, tl.cumsum(c, axis=0) + carry - c, mask=m)
        carry += tl.sum(c, axis=0)
    bad = 0
    for f in range(0, n_prog, BLOCK):
        j = f + lane
        bad += tl.sum(tl.load(pflags + j, mask=j < n_prog, other=0), axis=0)
    if VAR:  # each feature's boundaries sorted (unsigned: the sign bit flipped by adding MIN)
        low = -top - 1
        for t in range(0, n_feat):
            s0 = tl.load(table + t)
            pairs = tl.load(table + n_feat + t) - 1
            for i in range(0, pairs, BLOCK):
                k = i + lane
                m = k < pairs
                a = tl.load(flat + s0 + k, mask=m, other=0) + low
                c = tl.load(flat + s0 + k + 1, mask=m, other=0) + low
                bad += tl.sum((m & (a > c)).to(tl.int32), axis=0)
    for f in range(0, n_feat, BLOCK):
        j = f + lane
        m = j < n_feat
        b = tl.load(blocks + j * blk_s, mask=m, other=0)
        if VAR:  # G > 0 where b == 0 (its division by G)
            wrong = (b < 0) & (b > 0)  # nothing, without total_num_blocks
            if HAS_TOTAL:
                wrong = (tl.load(total + j * tot_s, mask=m, other=1) <= 0) & (b == 0)
        elif HAS_TOTAL:  # G a positive multiple of P, 0 <= b and b G <= max
            g = tl.load(total + j * tot_s, mask=m, other=p)
            wrong = (g != tl.maximum(g // p, 1) * p) | (b < 0) | (b > top // tl.maximum(g, 1))
        else:  # 0 <= b <= max // P
            wrong = (b < 0) | (b > top // p)
        bad += tl.sum((m & wrong).to(tl.int32), axis=0)
    if HAS_VBE:  # batch sizes in [0, N] summing to N (the lengths' rule, on features)
        carry = 0
        for f in range(0, n_feat, BLOCK):
            j = f + lane
            m = j < n_feat
            bs = tl.load(batch + j * b_s, mask=m, other=0)
            step = tl.minimum(tl.maximum(bs, 0), n_rows).to(tl.int32)
            incl = tl.cumsum(step, axis=0) + carry
            wrong = (bs < 0) | (bs > n_rows) | (incl < 0) | (incl > n_rows)
            bad += tl.sum((m & wrong).to(tl.int32), axis=0)
            carry += tl.sum(step, axis=0)
        bad += (carry != n_rows).to(tl.int32)
    tl.store(flag, (bad == 0).to(tl.uint8))


@triton.jit
def _scatter_kernel(
    lengths, len_s, x_ptr, x_s, blocks, blk_s, total, tot_s, batch, b_s, flat, table, keep,
    keep_s, starts, offs, new_idx, w, w_s0, w_s1, new_w, pos_out, unb, mapping,
    n_rows, n_idx, n_feat, rows_per_feature, rows_per, p, top, cols,
    HAS_TOTAL: tl.constexpr, HAS_VBE: tl.constexpr, HAS_KEEP: tl.constexpr,
    KEEP_ALL: tl.constexpr, HAS_W: tl.constexpr, HAS_POS: tl.constexpr, HAS_UNB: tl.constexpr,
    HAS_MAP: tl.constexpr, VAR: tl.constexpr, STEPS: tl.constexpr, BLOCK_L: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    r0 = pid * rows_per
    r1 = tl.minimum(r0 + rows_per, n_rows)
    lane = tl.arange(0, BLOCK_L)
    ids = tl.arange(0, BLOCK_P)
    cc = tl.arange(0, BLOCK_C)
    for r in range(r0, r1):
        n = tl.minimum(tl.maximum(tl.load(lengths + r * len_s), 0), n_idx).to(tl.int32)
        start = tl.load(starts + r)
        t = _feature(r, rows_per_feature, batch, b_s, n_rows, n_feat, HAS_VBE, BLOCK_R)
        b = tl.load(blocks + t * blk_s)
        graw = tl.load(total + t * tot_s) if HAS_TOTAL else b * 0 + p
        if VAR:
            s0 = tl.load(table + t)
            nb = tl.load(table + n_feat + t)
            last = tl.load(flat + s0 + nb - 1)
        running = tl.zeros((BLOCK_P,), tl.int32)
        for i in range(0, n, BLOCK_L):
            k = i + lane
            e = start + k
            m = (k < n) & (e >= 0) & (e < n_idx)
            x = tl.load(x_ptr + e.to(tl.int64) * x_s, mask=m, other=0)
            if VAR:
                bucket, new = _bucket_var(
                    x, m, b, graw, p, top, flat, s0, nb, last, HAS_TOTAL, STEPS
                )
            else:
                bucket, new = _bucket(x, b, graw, p, top)
            if KEEP_ALL:
                new = x
            if HAS_KEEP:
                new = tl.where(tl.load(keep + t * keep_s) != 0, x, new)
            hot = (bucket[:, None] == ids[None, :]) & m[:, None]
            cum = tl.cumsum(hot.to(tl.int32), axis=0) + running[None, :]
            at = tl.load(offs + bucket * n_rows + r, mask=m, other=0)
            at += tl.sum(tl.where(hot, cum, 0), axis=1) - 1
            ok = m & (at >= 0) & (at < n_idx)
            tl.store(new_idx + at, new, mask=ok)
            if HAS_POS:
                tl.store(pos_out + at, k.to(pos_out.dtype.element_ty), mask=ok)
            if HAS_UNB:
                tl.store(unb + e, at.to(unb.dtype.element_ty), mask=ok)
            if HAS_MAP:
                tl.store(mapping + e, bucket.to(mapping.dtype.element_ty), mask=m)
            if HAS_W:
                src = e.to(tl.int64) * w_s0
                dst = at.to(tl.int64) * cols
                for c0 in range(0, cols, BLOCK_C):
                    col = c0 + cc
                    mw = ok[:, None] & (col < cols)[None, :]
                    v = tl.load(w + src[:, None] + (col * w_s1)[None, :], mask=mw)
                    tl.store(new_w + dst[:, None] + col[None, :], v, mask=mw)
            running += tl.sum(hot.to(tl.int32), axis=0)


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` as the signed integers of its element width (the weights' rows move as bits)."""
    want = _BITS[t.element_size()]
    return t if t.dtype == want else t.view(want)


def _boundaries(
    pos: list[torch.Tensor], spare: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(flat, table, steps)``: every feature's boundaries back to back (one ``cat``; none for
    one feature), ``table = [starts (T), sizes (T)]`` int32 laid out on the host from the shapes
    and uploaded (pinned, non-blocking: one copy, no stall), the binary search's rounds.  No
    variable blocks: ``spare`` for both (never read), 1 round."""
    if not pos:
        return spare, spare, 1
    sizes = [t.numel() for t in pos]
    flat = (
        pos[0].reshape(-1).contiguous()
        if len(pos) == 1
        else torch.cat([t.reshape(-1) for t in pos])
    )
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    table = upload(starts + sizes, torch.int32, flat.device)
    return flat, table, max(sizes).bit_length()


def block_bucketize_triton(
    op: str,
    lengths: torch.Tensor,
    x: torch.Tensor,
    blocks: torch.Tensor,
    my_size: int,
    weights: Opt,
    weights_dim: int | None,
    batch: Opt,
    total: Opt,
    pos: list[torch.Tensor],
    keep: Opt,
    keep_all: bool,
    flags: tuple[bool, bool, bool],
    shapes: tuple[torch.Size, torch.Size | None],
    alloc: object,
) -> tuple[Opt, ...]:
    """The block op on the three kernels: flat ``lengths`` (``N >= 1``), ``x`` (``L``),
    ``blocks`` / ``batch`` / ``total`` / ``keep`` (``T``), ``pos`` the variable blocks' boundaries
    (empty: uniform blocks); ``flags`` = (sequence,
    bucketize_pos, return_bucket_mapping); ``shapes`` = (indices', weights' shape); ``alloc``
    the context naming ``my_size`` when the counts cannot be allocated.  Returns the six
    outputs of :func:`.block.block_bucketize`."""
    sequence, bucketize_pos, want_map = flags
    n, n_idx, n_feat, p = lengths.numel(), x.numel(), blocks.numel(), int(my_size)
    dev, dtype = x.device, x.dtype
    with alloc:  # type: ignore[attr-defined]
        counts = torch.empty(n * p, dtype=lengths.dtype, device=dev)
    grid = min(n, MAX_PROGRAMS)
    rows_per = -(-n // grid)
    grid = -(-n // rows_per)
    starts = torch.empty(n, dtype=torch.int32, device=dev)
    pflags = torch.empty(grid, dtype=torch.int32, device=dev)
    offs = torch.empty(n * p, dtype=torch.int32, device=dev)
    flag = torch.empty(1, dtype=torch.uint8, device=dev)
    top = torch.iinfo(dtype).max
    block_p = max(_pow2(p), 2)
    block_l = max(16, min(128, TILE // block_p))
    rows_per_feature = max(n // max(n_feat, 1), 1)
    tot = blocks if total is None else total
    bat = lengths if batch is None else batch
    flat, table, steps = _boundaries(pos, starts)
    per_feature = (blocks, blocks.stride(0), tot, tot.stride(0), bat, bat.stride(0), flat, table)
    consts = {"HAS_TOTAL": total is not None, "HAS_VBE": batch is not None, "VAR": bool(pos)}
    args = (lengths, lengths.stride(0), x, x.stride(0), *per_feature, counts, starts, pflags)
    args += (n, n_idx, n_feat, rows_per_feature, rows_per, p, top)
    meta = {"STEPS": steps, "BLOCK_L": block_l, "BLOCK_P": block_p, "BLOCK_R": BLOCK}
    launch("bucketize_count", _count_kernel, (grid,), *args, **consts, **meta)
    args = (counts, offs, pflags, grid, *per_feature, flag, n * p, n, n_feat, p, top)
    launch("bucketize_scan", _scan_kernel, (1,), *args, **consts, BLOCK=BLOCK)
    if validation_enabled():
        what = [
            f"argument 'lengths' must be non-negative and sum to indices.numel() = {n_idx}",
            f"argument 'block_sizes' must be in [0, {top // p}] (b * my_size <= {top})",
        ]
        if pos:
            what[1:] = ["argument 'block_bucketize_pos' must hold each feature's boundaries sorted"]
            if total is not None:
                what.append("argument 'total_num_blocks' must be positive where block_sizes is 0")
        elif total is not None:
            what[1:] = [
                f"argument 'total_num_blocks' must hold positive multiples of my_size = {p}",
                f"argument 'block_sizes' must be non-negative with b * total_num_blocks <= {top}",
            ]
        if batch is not None:
            what.append(
                "argument 'batch_size_per_feature' must be non-negative and sum to "
                f"lengths.numel() = {n}"
            )
        check_on_device(op, flag.view(torch.bool)[0], "; ".join(what))  # a view: no launch

    new_idx = torch.empty(n_idx, dtype=dtype, device=dev)
    cols = 1 if weights_dim is None else int(weights_dim)
    new_w = w = None
    if weights is not None:
        w = _bits(weights.reshape(n_idx, cols))
        new_w = torch.empty((n_idx, cols), dtype=w.dtype, device=dev)
    new_pos = torch.empty(n_idx, dtype=dtype, device=dev) if bucketize_pos else None
    unb = torch.empty(n_idx, dtype=dtype, device=dev) if sequence else None
    mapping = torch.empty(n_idx, dtype=dtype, device=dev) if want_map else None
    keep_t = blocks if keep is None else keep.view(torch.uint8)
    wt = new_idx if w is None else w
    args = (lengths, lengths.stride(0), x, x.stride(0), *per_feature, keep_t, keep_t.stride(0))
    args += (starts, offs, new_idx, wt, wt.stride(0), wt.stride(1) if wt.dim() > 1 else 0)
    args += tuple(new_idx if t is None else t for t in (new_w, new_pos, unb, mapping))
    args += (n, n_idx, n_feat, rows_per_feature, rows_per, p, top, cols)
    has = {"HAS_KEEP": keep is not None, "KEEP_ALL": keep_all, "HAS_W": weights is not None}
    has |= {"HAS_POS": bucketize_pos, "HAS_UNB": sequence, "HAS_MAP": want_map}
    meta["BLOCK_C"] = min(_pow2(cols), 64)
    launch("bucketize_scatter", _scatter_kernel, (grid,), *args, **consts, **has, **meta)

    out_w = None
    if weights is not None and new_w is not None:
        out_w = new_w.view(weights.dtype)
        out_w = out_w.view(shapes[1]) if weights_dim is None else out_w  # type: ignore[arg-type]
    shape = shapes[0]
    return (
        counts,
        new_idx.view(shape),
        out_w,
        None if new_pos is None else new_pos.view(shape),
        unb,
        mapping,
    )
