"""Fused Triton kernels of the block bucketize ops (uniform blocks): 3 launches where the tensor
program takes 19-47.

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

Not handled here (``supported=False``, the tensor program serves them): ``block_bucketize_pos``
(variable blocks: a boundary search per element), ``my_size > MAX_BUCKETS`` (the one-hot tile),
no rows, ``P N`` or ``L`` from ``2**31`` on.  Launches: 3 on every other path.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fbgemm_npu.native._checks import check_on_device, validation_enabled
from fbgemm_npu.native._triton import launch
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
def _feature(r, rows_per_feature, batch, b_s, n_rows, n_feat, HAS_VBE: tl.constexpr,
             BLOCK_T: tl.constexpr):  # fmt: skip
    """Row ``r``'s feature: ``r // B``, or (VBE) ``#{t < T - 1 : cumsum(batch)[t] <= r}``."""
    if HAS_VBE:
        carry = 0
        t = 0
        lane = tl.arange(0, BLOCK_T)
        for f0 in range(0, n_feat - 1, BLOCK_T):
            f = f0 + lane
            m = f < n_feat - 1
            step = tl.load(batch + f * b_s, mask=m, other=0)
            step = tl.minimum(tl.maximum(step, 0), n_rows).to(tl.int32)
            t += tl.sum((m & (tl.cumsum(step, axis=0) + carry <= r)).to(tl.int32), axis=0)
            carry += tl.sum(step, axis=0)
    else:
        t = r // rows_per_feature
    return t


@triton.jit
def _bucket(x, b, graw, p, top):
    """``(bucket int32 in [0, P), new index)`` of the module docstring's formulas, in signed
    arithmetic of ``x``'s dtype (``top`` its max): a 910B's Triton has no unsigned types.

    In range (``0 <= x < b G``) ``x`` is its own unsigned value.  Out of range, ``u divmod G``
    for ``x < 0`` (``u = v + 2**(BITS-1)``, ``v = x + 2**(BITS-1) >= 0``): with ``2**(BITS-1) =
    Kh G + Mh``, ``u // G = v // G + Kh + c`` and ``u % G = v % G + Mh - c G``, the carry ``c =
    (v % G >= G - Mh)``; every step stays in range but the quotient's add for ``G = 1``, which
    wraps to the bit pattern upstream stores."""
    neg = x < 0
    bs = tl.maximum(b, 0)
    g = tl.maximum(graw, 1)
    lb = tl.maximum(g // p, 1)
    local = tl.maximum(bs * lb, 1)
    inside = (x >= 0) & (x < bs * g)
    xs = tl.where(inside, x, 0)
    v = tl.where(neg, x + top + 1, x)
    q1 = v // g
    r1 = v % g
    kh = top // g
    mh = top % g + 1
    full = mh == g
    kh = tl.where(full, kh + 1, kh)
    mh = tl.where(full, 0, mh)
    carry = neg & (r1 >= g - mh)
    qg = q1 + tl.where(neg, kh, 0) + carry.to(x.dtype)
    rg = tl.where(neg, tl.where(carry, r1 - (g - mh), r1 + mh), r1)
    bucket = tl.where(inside, xs // local, rg // lb)
    new = tl.where(inside, xs % local, qg)
    return tl.minimum(tl.maximum(bucket, 0), p - 1).to(tl.int32), new


@triton.jit
def _row_start(lengths, len_s, r0, n_idx, BLOCK_R: tl.constexpr):
    """int32 sum of the lengths (clamped into ``[0, L]``) of rows ``[0, r0)``."""
    start = 0
    lane = tl.arange(0, BLOCK_R)
    for f in range(0, r0, BLOCK_R):
        j = f + lane
        ln = tl.load(lengths + j * len_s, mask=j < r0, other=0)
        start += tl.sum(tl.minimum(tl.maximum(ln, 0), n_idx).to(tl.int32), axis=0)
    return start


@triton.jit
def _count_kernel(
    lengths, len_s, x_ptr, x_s, blocks, blk_s, total, tot_s, batch, b_s, counts, starts, pflags,
    n_rows, n_idx, n_feat, rows_per_feature, rows_per, p, top,
    HAS_TOTAL: tl.constexpr, HAS_VBE: tl.constexpr,
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
        last = (r == n_rows - 1) & (end != n_idx)
        bad += ((ln < 0) | (ln > n_idx) | (end < 0) | (end > n_idx) | last).to(tl.int32)
        t = _feature(r, rows_per_feature, batch, b_s, n_rows, n_feat, HAS_VBE, BLOCK_R)
        b = tl.load(blocks + t * blk_s)
        graw = tl.load(total + t * tot_s) if HAS_TOTAL else b * 0 + p
        running = tl.zeros((BLOCK_P,), tl.int32)
        for i in range(0, n, BLOCK_L):
            k = i + lane
            e = start + k
            m = (k < n) & (e >= 0) & (e < n_idx)
            x = tl.load(x_ptr + e.to(tl.int64) * x_s, mask=m, other=0)
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
    counts, offs, pflags, n_prog, blocks, blk_s, total, tot_s, batch, b_s, flag,
    n_cnt, n_rows, n_feat, p, top,
    HAS_TOTAL: tl.constexpr, HAS_VBE: tl.constexpr, BLOCK: tl.constexpr,
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
    for f in range(0, n_feat, BLOCK):
        j = f + lane
        m = j < n_feat
        b = tl.load(blocks + j * blk_s, mask=m, other=0)
        if HAS_TOTAL:  # G a positive multiple of P, 0 <= b and b G <= max
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
    lengths, len_s, x_ptr, x_s, blocks, blk_s, total, tot_s, batch, b_s, keep, keep_s,
    starts, offs, new_idx, w, w_s0, w_s1, new_w, pos_out, unb, mapping,
    n_rows, n_idx, n_feat, rows_per_feature, rows_per, p, top, cols,
    HAS_TOTAL: tl.constexpr, HAS_VBE: tl.constexpr, HAS_KEEP: tl.constexpr,
    KEEP_ALL: tl.constexpr, HAS_W: tl.constexpr, HAS_POS: tl.constexpr, HAS_UNB: tl.constexpr,
    HAS_MAP: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_P: tl.constexpr,
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
        running = tl.zeros((BLOCK_P,), tl.int32)
        for i in range(0, n, BLOCK_L):
            k = i + lane
            e = start + k
            m = (k < n) & (e >= 0) & (e < n_idx)
            x = tl.load(x_ptr + e.to(tl.int64) * x_s, mask=m, other=0)
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
    keep: Opt,
    keep_all: bool,
    flags: tuple[bool, bool, bool],
    shapes: tuple[torch.Size, torch.Size | None],
    alloc: object,
) -> tuple[Opt, ...]:
    """The block op on the three kernels: flat ``lengths`` (``N >= 1``), ``x`` (``L``),
    ``blocks`` / ``batch`` / ``total`` / ``keep`` (``T``); ``flags`` = (sequence,
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
    per_feature = (blocks, blocks.stride(0), tot, tot.stride(0), bat, bat.stride(0))
    consts = {"HAS_TOTAL": total is not None, "HAS_VBE": batch is not None}
    args = (lengths, lengths.stride(0), x, x.stride(0), *per_feature, counts, starts, pflags)
    args += (n, n_idx, n_feat, rows_per_feature, rows_per, p, top)
    meta = {"BLOCK_L": block_l, "BLOCK_P": block_p, "BLOCK_R": BLOCK}
    launch("bucketize_count", _count_kernel, (grid,), *args, **consts, **meta)
    args = (counts, offs, pflags, grid, *per_feature, flag, n * p, n, n_feat, p, top)
    launch("bucketize_scan", _scan_kernel, (1,), *args, **consts, BLOCK=BLOCK)
    if validation_enabled():
        what = [
            f"argument 'lengths' must be non-negative and sum to indices.numel() = {n_idx}",
            f"argument 'block_sizes' must be in [0, {top // p}] (b * my_size <= {top})",
        ]
        if total is not None:
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
