"""The HSTU attention backward as two fused Triton kernels (``_attention.py``'s docstring)::

    dS[i, j] = (dO[b, i, h] . v[b, j, g]) * s * mask * silu'(qkb) * alpha   where visible, else 0
    dv[b, j, g] = sum_{h in g, i} P dO      dk[b, j, g] = sum_{h in g, i} dS q
    dq[b, i, h] = sum_j dS k                dbias[b, h', i, j] = sum_{h -> h'} dS

with ``silu'(x) = sigmoid(x) (1 + x (1 - sigmoid(x)))`` and ``P`` / ``qkb`` recomputed from q and k
(``_triton_fwd.tile``): no score tensor is stored between the passes.

* ``hstu_dkdv_kernel``, grid ``(cdiv(S_k, BLOCK_N), B * N_k)``: one program per block of keys of
  one (batch, kv head); it loops over the ``R`` q heads of the group and over the query blocks,
  skipping a block none of whose rows sees one of its keys, and writes its dk / dv rows once
  (every element of dk / dv: keys no row sees get 0).  Deterministic, no atomics.
* ``hstu_dq_kernel``, grid ``(cdiv(rows, BLOCK_M), B * N_e)``: one program per block of query
  rows of one (batch, bias head) -- ``N_e`` the bias heads when the bias gradient is asked for,
  else the q heads -- looping over the ``GH = N_q / N_e`` q heads of it and over the key blocks
  of their visible interval; it writes dq, and the dbias tile of every key block: dS where
  computed, 0 elsewhere (up to the bias's own padded sizes: ``rows = max(S_q, DB_R)``).  A bias
  head shared by ``GH > 1`` q heads sums their dS in a float32 scratch of dbias's shape that only
  this program touches (head 0 writes, the next ones add, the last one writes dbias in its dtype):
  still 1 launch, no atomics, deterministic.

Launches: 2.  dtypes as the forward (float32 accumulators, dS cast to q's dtype for the dk / dq
matmuls, as the tensor program does).
"""

from __future__ import annotations

import triton
import triton.language as tl

from fbgemm_npu.native.mxrec.hstu._triton_fwd import key_range, tile

__all__ = ["hstu_dkdv_kernel", "hstu_dq_kernel"]


@triton.jit
def hstu_dkdv_kernel(
    Q, K, V, DO, DK, DV, SP, BIAS, MASK,
    sq_b, sq_s, sq_h, sq_d, sk_b, sk_s, sk_h, sk_d, sv_b, sv_s, sv_h, sv_d,
    sg_b, sg_s, sg_h, sg_d, sdk_b, sdk_s, sdk_h, sdv_b, sdv_s, sdv_h,
    sp_b, sp_h, sp_s, sb_b, sb_h, sb_s, sb_k, sm_b, sm_h, sm_s, sm_k,
    N_K, R, GB, S_Q, S_K, D_QK, D_V, alpha, scale, N_BLK, N_WORK,
    NSPAN: tl.constexpr, HAS_SPANS: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_MASK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_DQK: tl.constexpr, BLOCK_DV: tl.constexpr, PREC: tl.constexpr, UP: tl.constexpr,
):  # fmt: skip
    """dk / dv of one block of keys of one (batch, kv head): the module docstring."""
    for work in range(tl.program_id(0), N_WORK, tl.num_programs(0)):
        bg = work // N_BLK
        b64 = (bg // N_K).to(tl.int64)
        g = bg % N_K
        g64 = g.to(tl.int64)
        n0 = (work % N_BLK) * BLOCK_N
        cols = n0 + tl.arange(0, BLOCK_N)
        col_ok = cols < S_K
        offs_m = tl.arange(0, BLOCK_M)
        dq = tl.arange(0, BLOCK_DQK)
        dv = tl.arange(0, BLOCK_DV)
        kmask = col_ok[:, None] & (dq[None, :] < D_QK)
        vmask = col_ok[:, None] & (dv[None, :] < D_V)
        k = tl.load(K + b64 * sk_b + g64 * sk_h + cols[:, None] * sk_s + dq[None, :] * sk_d,
                    mask=kmask, other=0.0)  # fmt: skip
        v = tl.load(V + b64 * sv_b + g64 * sv_h + cols[:, None] * sv_s + dv[None, :] * sv_d,
                    mask=vmask, other=0.0)  # fmt: skip
        if UP:  # _triton_fwd.hstu_fwd_kernel's note
            k, v = k.to(tl.float32), v.to(tl.float32)
        dk = tl.zeros([BLOCK_N, BLOCK_DQK], dtype=tl.float32)
        dvv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)
        for t in range(R):
            h = g * R + t
            h64 = h.to(tl.int64)
            q_ptrs = Q + b64 * sq_b + h64 * sq_h + offs_m[:, None] * sq_s + dq[None, :] * sq_d
            g_ptrs = DO + b64 * sg_b + h64 * sg_h + offs_m[:, None] * sg_s + dv[None, :] * sg_d
            sp_rows = SP + b64 * sp_b + h * sp_h + offs_m * sp_s
            b_ptrs = BIAS + b64 * sb_b + (h // GB).to(tl.int64) * sb_h
            m_ptrs = MASK + b64 * sm_b + h64 * sm_h
            if HAS_BIAS:
                b_ptrs += offs_m[:, None] * sb_s + cols[None, :] * sb_k
            if HAS_MASK:
                m_ptrs += offs_m[:, None] * sm_s + cols[None, :] * sm_k
            for m0 in range(0, S_Q, BLOCK_M):
                rows = m0 + offs_m
                row_ok = rows < S_Q
                lo, hi = key_range(sp_rows + m0 * sp_s, row_ok, S_K, NSPAN, HAS_SPANS)
                if (lo < hi) & (lo < n0 + BLOCK_N) & (hi > n0):  # a row of the block sees a key
                    q = tl.load(q_ptrs + m0 * sq_s, mask=row_ok[:, None] & (dq[None, :] < D_QK),
                                other=0.0)  # fmt: skip
                    do = tl.load(g_ptrs + m0 * sg_s, mask=row_ok[:, None] & (dv[None, :] < D_V),
                                 other=0.0)  # fmt: skip
                    if UP:
                        q, do = q.to(tl.float32), do.to(tl.float32)
                    s, sig, vis, w = tile(q, k, b_ptrs + m0 * sb_s, m_ptrs + m0 * sm_s,
                                          sp_rows + m0 * sp_s, row_ok, cols, col_ok, alpha, scale,
                                          NSPAN, HAS_SPANS, HAS_BIAS, HAS_MASK, PREC)  # fmt: skip
                    p = tl.where(vis, s * sig * w, 0.0).to(DK.dtype.element_ty)  # in q's dtype
                    dp = tl.dot(do, tl.trans(v), input_precision=PREC)
                    ds = tl.where(vis, dp * w * sig * (1.0 + s * (1.0 - sig)) * alpha, 0.0)
                    ds = ds.to(DK.dtype.element_ty)
                    if UP:
                        p, ds = p.to(tl.float32), ds.to(tl.float32)
                    dvv += tl.dot(tl.trans(p), do, input_precision=PREC)
                    dk += tl.dot(tl.trans(ds), q, input_precision=PREC)
        dk_ptrs = DK + b64 * sdk_b + g64 * sdk_h + cols[:, None] * sdk_s + dq[None, :]
        dv_ptrs = DV + b64 * sdv_b + g64 * sdv_h + cols[:, None] * sdv_s + dv[None, :]
        tl.store(dk_ptrs, dk.to(DK.dtype.element_ty), mask=kmask)
        tl.store(dv_ptrs, dvv.to(DV.dtype.element_ty), mask=vmask)


@triton.jit
def hstu_dq_kernel(
    Q, K, V, DO, DQ, DB, SCR, SP, BIAS, MASK,
    sq_b, sq_s, sq_h, sq_d, sk_b, sk_s, sk_h, sk_d, sv_b, sv_s, sv_h, sv_d,
    sg_b, sg_s, sg_h, sg_d, sdq_b, sdq_s, sdq_h,
    sp_b, sp_h, sp_s, sb_b, sb_h, sb_s, sb_k, sm_b, sm_h, sm_s, sm_k, sdb_b, sdb_h, sdb_s,
    N_E, GH, R, GB, S_Q, S_K, D_QK, D_V, DB_R, DB_C, alpha, scale, N_BLK, N_WORK,
    NSPAN: tl.constexpr, HAS_SPANS: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_MASK: tl.constexpr, HAS_DB: tl.constexpr, SUM_HEADS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DQK: tl.constexpr,
    BLOCK_DV: tl.constexpr, PREC: tl.constexpr, UP: tl.constexpr,
):  # fmt: skip
    """dq (and the dbias tiles) of one block of query rows of one (batch, bias head)."""
    for work in range(tl.program_id(0), N_WORK, tl.num_programs(0)):
        be = work // N_BLK
        b64 = (be // N_E).to(tl.int64)
        e = be % N_E
        rows = (work % N_BLK) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < S_Q
        offs_n = tl.arange(0, BLOCK_N)
        dq = tl.arange(0, BLOCK_DQK)
        dv = tl.arange(0, BLOCK_DV)
        qmask = row_ok[:, None] & (dq[None, :] < D_QK)
        # the key blocks any of the GH heads' rows see: every head walks the same ones, so the dbias
        # tiles they share are summed over the same key blocks
        lo = tl.zeros([], dtype=tl.int32) + S_K  # int32 tensors: the loop carries them
        hi = tl.zeros([], dtype=tl.int32)
        for t in range(GH):
            sp_rows = SP + b64 * sp_b + (e * GH + t) * sp_h + rows * sp_s
            a, z = key_range(sp_rows, row_ok, S_K, NSPAN, HAS_SPANS)
            lo = tl.where(a < z, tl.minimum(lo, a), lo)
            hi = tl.where(a < z, tl.maximum(hi, z), hi)
        start = tl.where(lo < hi, (lo // BLOCK_N) * BLOCK_N, 0)
        stop = tl.where(lo < hi, hi, 0)
        db_ptrs = (
            DB + b64 * sdb_b + e.to(tl.int64) * sdb_h + rows[:, None] * sdb_s + offs_n[None, :]
        )
        sc_ptrs = (
            SCR + b64 * sdb_b + e.to(tl.int64) * sdb_h + rows[:, None] * sdb_s + offs_n[None, :]
        )
        db_rows = rows[:, None] < DB_R
        for t in range(GH):
            h = e * GH + t
            h64 = h.to(tl.int64)
            g64 = (h // R).to(tl.int64)
            q_ptrs = Q + b64 * sq_b + h64 * sq_h + rows[:, None] * sq_s + dq[None, :] * sq_d
            q = tl.load(q_ptrs, mask=qmask, other=0.0)
            g_ptrs = DO + b64 * sg_b + h64 * sg_h + rows[:, None] * sg_s + dv[None, :] * sg_d
            do = tl.load(g_ptrs, mask=row_ok[:, None] & (dv[None, :] < D_V), other=0.0)
            if UP:
                q, do = q.to(tl.float32), do.to(tl.float32)
            k_ptrs = K + b64 * sk_b + g64 * sk_h + offs_n[:, None] * sk_s + dq[None, :] * sk_d
            v_ptrs = V + b64 * sv_b + g64 * sv_h + offs_n[:, None] * sv_s + dv[None, :] * sv_d
            sp_rows = SP + b64 * sp_b + h * sp_h + rows * sp_s
            b_ptrs = BIAS + b64 * sb_b + (h // GB).to(tl.int64) * sb_h
            m_ptrs = MASK + b64 * sm_b + h64 * sm_h
            if HAS_BIAS:
                b_ptrs += rows[:, None] * sb_s + offs_n[None, :] * sb_k
            if HAS_MASK:
                m_ptrs += rows[:, None] * sm_s + offs_n[None, :] * sm_k
            head = (offs_n * 0 + t)[None, :]  # t as a tensor: masks of the tile's shape
            acc = tl.zeros([BLOCK_M, BLOCK_DQK], dtype=tl.float32)
            for n0 in range(start, stop, BLOCK_N):
                cols = n0 + offs_n
                col_ok = cols < S_K
                k = tl.load(k_ptrs + n0 * sk_s, mask=col_ok[:, None] & (dq[None, :] < D_QK),
                            other=0.0)  # fmt: skip
                v = tl.load(v_ptrs + n0 * sv_s, mask=col_ok[:, None] & (dv[None, :] < D_V),
                            other=0.0)  # fmt: skip
                if UP:
                    k, v = k.to(tl.float32), v.to(tl.float32)
                s, sig, vis, w = tile(q, k, b_ptrs + n0 * sb_k, m_ptrs + n0 * sm_k, sp_rows, row_ok,
                                      cols, col_ok, alpha, scale, NSPAN, HAS_SPANS, HAS_BIAS,
                                      HAS_MASK, PREC)  # fmt: skip
                dp = tl.dot(do, tl.trans(v), input_precision=PREC)
                ds = tl.where(vis, dp * w * sig * (1.0 + s * (1.0 - sig)) * alpha, 0.0)
                d_op = ds.to(DQ.dtype.element_ty)  # dS in q's dtype for the matmul
                if UP:
                    d_op = d_op.to(tl.float32)
                acc += tl.dot(d_op, k, input_precision=PREC)
                if HAS_DB:
                    m = db_rows & (cols[None, :] < DB_C)
                    if SUM_HEADS:  # this program alone owns these tiles: no race between heads
                        ds += tl.load(sc_ptrs + n0, mask=m & (head > 0), other=0.0)
                        tl.store(sc_ptrs + n0, ds, mask=m & (head < GH - 1))
                        tl.store(
                            db_ptrs + n0, ds.to(DB.dtype.element_ty), mask=m & (head == GH - 1)
                        )
                    else:
                        tl.store(db_ptrs + n0, ds.to(DB.dtype.element_ty), mask=m)
            dq_ptrs = DQ + b64 * sdq_b + h64 * sdq_h + rows[:, None] * sdq_s + dq[None, :]
            tl.store(dq_ptrs, acc.to(DQ.dtype.element_ty), mask=qmask)
        if HAS_DB:  # the keys no row of the block sees, up to dbias's padded width: 0
            zero = tl.zeros([BLOCK_M, BLOCK_N], dtype=DB.dtype.element_ty)
            for n0 in range(0, start, BLOCK_N):
                tl.store(db_ptrs + n0, zero, mask=db_rows & ((n0 + offs_n)[None, :] < DB_C))
            for n0 in range(((stop + BLOCK_N - 1) // BLOCK_N) * BLOCK_N, DB_C, BLOCK_N):
                tl.store(db_ptrs + n0, zero, mask=db_rows & ((n0 + offs_n)[None, :] < DB_C))
