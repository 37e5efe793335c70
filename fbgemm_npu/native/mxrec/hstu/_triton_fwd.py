"""The HSTU attention forward as one fused Triton kernel, and the tile helpers the backward shares.

Math (``_attention.py``'s docstring): for query rows ``i`` of batch ``b`` and q head ``h`` (kv head
``g = h // R``, bias head ``h // GB``)::

    qkb[i, j] = alpha * (q[b, i, h] . k[b, j, g] + bias[b, h', i, j])          (float32)
    P[i, j]   = silu(qkb) * s * mask[b, h, i, j]    where key j is visible, else 0
    out[b, i, h] = sum_j P[i, j] v[b, j, g]         (P cast to q's dtype for the matmul)

Visibility: key ``j`` is seen by row ``i`` iff ``lo_n <= j < hi_n`` for one of the ``NSPAN``
intervals of the spans table (``_spans.py``: ``[B | 1, H | 1, S_q, 2 NSPAN]`` int32, rows outside
their sequence have only empty intervals); without a table every key ``j < S_k`` of every row
``i < S_q``.  A ``where`` (not a product) hides what is invisible: an ``inf`` score or a NaN of a
user's mask outside the visible keys never reaches the output.

Grid ``(cdiv(S_q, BLOCK_M), B * N_q)``: one program per block of query rows of one (batch, head),
looping over the key blocks of the rows' visible key interval only (the union of the rows'
intervals: a causal block skips the keys after its last row, a window the keys before it); no
score tensor exists in memory.  Scores and the output accumulate in float32 (``tl.dot``), q / k /
v / the output in float32, float16 or bfloat16.  Launches: 1.  Index math in int32, batch and
head offsets widened to int64 (a padded ``[B, S, N, D]`` can pass 2**31 elements).
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["hstu_fwd_kernel", "key_range", "tile"]


@triton.jit
def key_range(sp_rows, row_ok, S_K, NSPAN: tl.constexpr, HAS_SPANS: tl.constexpr):
    """``(lo, hi)``: the keys ``[lo, hi)`` some row of the block sees (``lo >= hi``: none);
    ``sp_rows``: the rows' pointers into the spans table."""
    if HAS_SPANS:
        lo = tl.zeros([], dtype=tl.int32) + S_K
        hi = tl.zeros([], dtype=tl.int32)
        for n in tl.static_range(NSPAN):
            a = tl.load(sp_rows + 2 * n, mask=row_ok, other=0)
            z = tl.load(sp_rows + (2 * n + 1), mask=row_ok, other=0)
            full = z > a
            lo = tl.minimum(lo, tl.min(tl.where(full, a, S_K), 0))
            hi = tl.maximum(hi, tl.max(tl.where(full, z, 0), 0))
    else:
        lo = tl.zeros([], dtype=tl.int32)
        hi = tl.max(row_ok.to(tl.int32), 0) * S_K
    return lo, hi


@triton.jit
def tile(q, k, b_ptrs, m_ptrs, sp_rows, row_ok, cols, col_ok, alpha, scale,
         NSPAN: tl.constexpr, HAS_SPANS: tl.constexpr, HAS_BIAS: tl.constexpr,
         HAS_MASK: tl.constexpr, PREC: tl.constexpr):  # fmt: skip
    """One ``[BLOCK_M, BLOCK_N]`` tile: ``qkb = alpha * (q . k^T + bias)`` and its sigmoid
    (float32), the visibility (bool) and the weight ``s * mask`` (float32).  ``b_ptrs`` /
    ``m_ptrs``: the tile's pointers into the bias / mask."""
    inside = row_ok[:, None] & col_ok[None, :]
    s = tl.dot(q, tl.trans(k), input_precision=PREC)
    if HAS_BIAS:
        s += tl.load(b_ptrs, mask=inside, other=0.0).to(tl.float32)
    s = s * alpha
    if HAS_SPANS:
        vis = inside & (cols[None, :] < 0)  # all False, the tile's shape
        for n in tl.static_range(NSPAN):
            a = tl.load(sp_rows + 2 * n, mask=row_ok, other=0)
            z = tl.load(sp_rows + (2 * n + 1), mask=row_ok, other=0)
            vis = vis | ((cols[None, :] >= a[:, None]) & (cols[None, :] < z[:, None]))
        vis = vis & inside
    else:
        vis = inside
    w = tl.full(s.shape, scale, tl.float32)
    if HAS_MASK:
        w *= tl.load(m_ptrs, mask=inside, other=0.0).to(tl.float32)
    # 1 / (1 + e^-s): tl.sigmoid's math, inline (s = -inf... gives 0, +inf 1)
    return s, 1.0 / (1.0 + tl.exp(-s)), vis, w


@triton.jit
def hstu_fwd_kernel(
    Q, K, V, OUT, SP, BIAS, MASK,
    sq_b, sq_s, sq_h, sq_d, sk_b, sk_s, sk_h, sk_d, sv_b, sv_s, sv_h, sv_d, so_b, so_s, so_h,
    sp_b, sp_h, sp_s, sb_b, sb_h, sb_s, sb_k, sm_b, sm_h, sm_s, sm_k,
    N_Q, R, GB, S_Q, S_K, D_QK, D_V, alpha, scale, N_BLK, N_WORK,
    NSPAN: tl.constexpr, HAS_SPANS: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_MASK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_DQK: tl.constexpr, BLOCK_DV: tl.constexpr, PREC: tl.constexpr, UP: tl.constexpr,
):  # fmt: skip
    """One block of query rows of one (batch, q head): the module docstring.  Pointers are
    built once per program and moved by a scalar offset per key block.  ``UP``: the matmul
    operands in float32 (the host sets it for bfloat16 under Triton's interpreter, whose
    ``tl.dot`` multiplies bfloat16 bit patterns as integers; the values, rounded to bfloat16
    first, are exact in float32, so the products are the bfloat16 matmul's)."""
    for work in range(tl.program_id(0), N_WORK, tl.num_programs(0)):
        bh = work // N_BLK
        b64 = (bh // N_Q).to(tl.int64)
        h = bh % N_Q
        g64 = (h // R).to(tl.int64)
        rows = (work % N_BLK) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < S_Q
        dq = tl.arange(0, BLOCK_DQK)
        dv = tl.arange(0, BLOCK_DV)
        offs_n = tl.arange(0, BLOCK_N)
        q_ptrs = Q + b64 * sq_b + h.to(tl.int64) * sq_h + rows[:, None] * sq_s + dq[None, :] * sq_d
        q = tl.load(q_ptrs, mask=row_ok[:, None] & (dq[None, :] < D_QK), other=0.0)
        if UP:
            q = q.to(tl.float32)
        k_ptrs = K + b64 * sk_b + g64 * sk_h + offs_n[:, None] * sk_s + dq[None, :] * sk_d
        v_ptrs = V + b64 * sv_b + g64 * sv_h + offs_n[:, None] * sv_s + dv[None, :] * sv_d
        sp_rows = SP + b64 * sp_b + h * sp_h + rows * sp_s
        b_ptrs = BIAS + b64 * sb_b + (h // GB).to(tl.int64) * sb_h
        m_ptrs = MASK + b64 * sm_b + h.to(tl.int64) * sm_h
        if HAS_BIAS:
            b_ptrs += rows[:, None] * sb_s + offs_n[None, :] * sb_k
        if HAS_MASK:
            m_ptrs += rows[:, None] * sm_s + offs_n[None, :] * sm_k
        lo, hi = key_range(sp_rows, row_ok, S_K, NSPAN, HAS_SPANS)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
        for n0 in range((lo // BLOCK_N) * BLOCK_N, hi, BLOCK_N):
            cols = n0 + offs_n
            col_ok = cols < S_K
            k = tl.load(k_ptrs + n0 * sk_s, mask=col_ok[:, None] & (dq[None, :] < D_QK), other=0.0)
            v = tl.load(v_ptrs + n0 * sv_s, mask=col_ok[:, None] & (dv[None, :] < D_V), other=0.0)
            if UP:
                k, v = k.to(tl.float32), v.to(tl.float32)
            s, sig, vis, w = tile(q, k, b_ptrs + n0 * sb_k, m_ptrs + n0 * sm_k, sp_rows, row_ok,
                                  cols, col_ok, alpha, scale, NSPAN, HAS_SPANS, HAS_BIAS, HAS_MASK,
                                  PREC)  # fmt: skip
            p = tl.where(vis, s * sig * w, 0.0).to(OUT.dtype.element_ty)  # P in q's dtype
            if UP:
                p = p.to(tl.float32)
            acc += tl.dot(p, v, input_precision=PREC)
        o_ptrs = OUT + b64 * so_b + h.to(tl.int64) * so_h + rows[:, None] * so_s + dv[None, :]
        tl.store(o_ptrs, acc.to(OUT.dtype.element_ty), mask=row_ok[:, None] & (dv[None, :] < D_V))
