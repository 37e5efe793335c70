"""The element math of the block bucketize Triton kernels (:mod:`._triton_block`): each
element's feature, its bucket and new index for uniform and variable blocks, the row starts.

Everything is signed arithmetic in the indices' dtype: triton-ascend on a 910B has no unsigned
types, so upstream's unsigned view of an index (``uint32`` / ``uint64``) is emulated:
:func:`_udivmod` divides the bit pattern as unsigned, a comparison of unsigned values adds
``MIN`` to both sides (the sign bit flipped), and products and differences wrap as upstream's
unsigned ones do.  Variable blocks (``block_bucketize_pos``) search each element among its
feature's sorted boundaries by a branchless binary search of ``STEPS`` rounds of masked loads.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["_bucket", "_bucket_var", "_feature", "_row_start", "_udivmod"]


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
def _udivmod(y, d, top):
    """``(u // d, u % d)`` of the unsigned value ``u`` of the bit pattern ``y``, ``d >= 1`` (a
    scalar), ``top`` the dtype's max.  For ``y < 0``: ``u = v + 2**(BITS-1)`` with ``v = y +
    2**(BITS-1) >= 0`` and ``2**(BITS-1) = Kh d + Mh``, so ``u // d = v // d + Kh + c`` and
    ``u % d = v % d + Mh - c d`` with the carry ``c = (v % d >= d - Mh)``; every step stays in
    range but the quotient's add for ``d = 1``, which wraps to the bit pattern upstream stores."""
    neg = y < 0
    v = tl.where(neg, y + top + 1, y)
    q1 = v // d
    r1 = v % d
    kh = top // d
    mh = top % d + 1
    full = mh == d
    kh = tl.where(full, kh + 1, kh)
    mh = tl.where(full, 0, mh)
    carry = neg & (r1 >= d - mh)
    q = q1 + tl.where(neg, kh, 0) + carry.to(y.dtype)
    r = tl.where(neg, tl.where(carry, r1 - (d - mh), r1 + mh), r1)
    return q, r


@triton.jit
def _bucket(x, b, graw, p, top):
    """Uniform blocks: ``(bucket int32 in [0, P), new index)``.  In range (``0 <= x < b G``)
    ``x`` is its own unsigned value: bucket ``x // (b Lb)``, new ``x % (b Lb)``; out of range
    bucket ``(u % G) // Lb``, new ``u // G``."""
    bs = tl.maximum(b, 0)
    g = tl.maximum(graw, 1)
    lb = tl.maximum(g // p, 1)
    local = tl.maximum(bs * lb, 1)
    inside = (x >= 0) & (x < bs * g)
    xs = tl.where(inside, x, 0)
    qg, rg = _udivmod(x, g, top)
    bucket = tl.where(inside, xs // local, rg // lb)
    new = tl.where(inside, xs % local, qg)
    return tl.minimum(tl.maximum(bucket, 0), p - 1).to(tl.int32), new


@triton.jit
def _bucket_var(x, m, b, graw, p, top, flat, start, n, last, HAS_TOTAL: tl.constexpr,
                STEPS: tl.constexpr):  # fmt: skip
    """Variable blocks, feature boundaries ``flat[start : start + n]`` (``last`` the final
    one): ``v = u``, or ``(u % G) * last // G`` (unsigned, the product wrapping) where ``b ==
    0``; ``c = #{j : pos[j] <= v}`` (unsigned) by binary search, ``lb = c - 1``; bucket ``lb``
    where ``0 <= lb < P``, else ``u % P``; new index ``u // G`` where ``b == 0``, else ``u -
    pos[lb]`` inside, ``u // P`` outside.  Every load stays in ``[start, start + n)``."""
    g = tl.maximum(graw, 1)
    qg, rg = _udivmod(x, g, top)
    qs, _ = _udivmod(rg * last, g, top)
    zero = b == 0
    low = -top - 1  # adding it flips the sign bit: signed order of the sums = unsigned order
    fv = tl.where(zero, qs, x) + low
    lo = (x * 0).to(tl.int32)
    hi = lo + n
    for _ in tl.static_range(STEPS):
        ok = lo < hi
        mid = (lo + hi) // 2
        val = tl.load(flat + start + mid, mask=m & ok, other=0) + low
        lo = tl.where(ok & (val <= fv), mid + 1, lo)
        hi = tl.where(ok & (val > fv), mid, hi)
    inside = (lo >= 1) & (lo - 1 < p)
    at = tl.minimum(tl.maximum(lo - 1, 0), n - 1)
    bound = tl.load(flat + start + at, mask=m, other=0)
    if HAS_TOTAL:
        qp, rp = _udivmod(x, b * 0 + p, top)
    else:
        qp, rp = qg, rg
    bucket = tl.where(inside, (lo - 1).to(x.dtype), rp)
    new = tl.where(zero, qg, tl.where(inside, x - bound, qp))
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
