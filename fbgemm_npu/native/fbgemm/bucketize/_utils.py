"""Unsigned index arithmetic of the bucketize family, and the uniform-block bucket formulas.

Upstream reads every index as the *unsigned* integer of its bit pattern (``uint32`` for int32
indices, ``uint64`` for int64), so a negative raw index is a huge value that always lands in the
"modulo" branch.  Torch (and torch_npu) have no unsigned 64-bit division, so the helpers here
emulate it in the index dtype itself, with wrapping two's-complement arithmetic:

    u = x + 2**BITS * h                       (h = x < 0)
    2**BITS = K * d + M                       (K, M per divisor d > 0)
    u // d = (x + h * M) // d + h * K         (floor division; wraps modulo 2**BITS)
    u %  d = (x + h * M) %  d

``x + h * M`` cannot overflow (``-2**(BITS-1) <= x < 0`` and ``M < d``), and the quotient is
exact modulo ``2**BITS``, which is what upstream stores.  A divisor known on the host (``my_size``)
has its ``K, M`` computed in Python, and a power of two ``2**s`` needs neither: the floor division
of the signed pattern is the arithmetic shift, masked to ``BITS - s`` bits it is ``u // 2**s``,
and the floor remainder is ``u % 2**s`` (``2**s`` divides ``2**BITS``) -- ``floor_divide`` and
``remainder``, which a 910B runs on its AI Core (shifts go to its AI CPU).  A per-feature divisor
(``total_num_blocks`` with variable blocks) gets ``K, M`` from :func:`pow2_divmod`, launches on the
``T``-sized table.  For ``P = my_size >= 2`` every ``u // P`` is below ``2**(BITS-1)``: a
non-negative signed value, compared with signed ops.

Memory safety with bad data (a data check queued, not yet read: ``native/_pending.py``): the
buckets these formulas give lie in ``[0, P)`` for any index once the block sizes are clamped to
``[0, max // P]`` (the data check's own clamp), so the counts' ``index_add`` stays in bounds.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import arange_cached

__all__ = [
    "bits_of",
    "gather_columns",
    "host_divmod_constants",
    "pow2_divmod",
    "pow2_shift",
    "sign_flip",
    "udivmod",
    "uniform_buckets",
    "uniform_buckets_total",
]


def bits_of(dtype: torch.dtype) -> int:
    """32 for int32, 64 for int64: the width of upstream's unsigned view of an index."""
    return torch.iinfo(dtype).bits


def _wrap(value: int, bits: int) -> int:
    """``value`` modulo ``2**bits`` as a signed ``bits``-bit integer (what int tensors store)."""
    value %= 1 << bits
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def host_divmod_constants(d: int, bits: int) -> tuple[int, int]:
    """``(K, M)`` with ``2**bits = K * d + M`` for a host-known divisor, ``K`` wrapped to signed."""
    k, m = divmod(1 << bits, d)
    return _wrap(k, bits), m


def sign_flip(t: torch.Tensor) -> torch.Tensor:
    """``t ^ 0x80..0``: signed order of the result = unsigned order of ``t``."""
    return torch.bitwise_xor(t, torch.iinfo(t.dtype).min)


def pow2_shift(d: int) -> int | None:
    """``log2(d)`` when ``d`` is a power of two >= 2 (division is a shift), else ``None``."""
    return d.bit_length() - 1 if d >= 2 and d & (d - 1) == 0 else None


def udivmod(
    x: torch.Tensor,
    neg: torch.Tensor | None,
    d: int | torch.Tensor,
    k: int | torch.Tensor | None = None,
    m: int | torch.Tensor | None = None,
    *,
    want_remainder: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Unsigned ``(u // d, u % d)`` of the bit patterns ``x``, ``d > 0``.

    ``neg``: ``x < 0`` if the caller has it (computed here when needed and ``None``).  ``k, m``:
    the constants of the divisor a *negative* ``x`` is divided by (elements with ``x >= 0``
    ignore them, so ``d`` may mix divisors as long as every negative element's is the one
    ``k, m`` describe): Python ints (computed here from an int ``d`` when omitted) or tensors
    from :func:`pow2_divmod`.  A power-of-two int ``d``: ``floor_divide`` masked to
    ``BITS - s`` bits (a logical shift), and the ``remainder``.  Otherwise: ``x < 0`` when
    ``neg`` is not given, the add of ``M``, the ``floor_divide`` (and the ``remainder``) and the
    add of ``K``, the adds of a ``k`` or ``m`` that is 0 left out.
    """
    shift = pow2_shift(d) if isinstance(d, int) else None
    if shift is not None:
        mask = (1 << (bits_of(x.dtype) - shift)) - 1
        q = torch.bitwise_and(torch.floor_divide(x, d), mask)
        return q, (torch.remainder(x, d) if want_remainder else None)
    if k is None or m is None:
        assert isinstance(d, int)
        k, m = host_divmod_constants(d, bits_of(x.dtype))
    if neg is None and not (isinstance(k, int) and isinstance(m, int) and k == m == 0):
        neg = torch.lt(x, 0)
    if isinstance(m, int):
        shifted = torch.add(x, neg, alpha=m) if m else x
    else:
        shifted = torch.addcmul(x, neg, m)
    q = torch.floor_divide(shifted, d)
    r = torch.remainder(shifted, d) if want_remainder else None
    if isinstance(k, int):
        return (torch.add(q, neg, alpha=k) if k else q), r
    return torch.addcmul(q, neg, k), r


def pow2_divmod(d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-element ``(K, M)`` with ``2**BITS = K * d + M`` (``K`` wrapped), for every ``d`` in
    ``[1, 2**(BITS-1) - 1]``.

    With ``2**(BITS-1) - 1 = q1 * d + r1`` and ``c = r1 + 1`` (``1 <= c <= d``):
    ``2**BITS = 2 * q1 * d + 2 * c``, so ``K = 2 * q1 + (2 * c) // d`` and ``M = (2 * c) % d``.
    ``2 * c`` itself may not fit (``d = 2**(BITS-2)``: ``2 * c = 2**(BITS-1)``), so both come
    from ``e = 2 * c - d`` (in ``[2 - d, d]``): ``M = e % d``, ``K = 2 * q1 + e // d + 1``.  It
    launches on the ``T``-sized per-feature table only.
    """
    top = torch.iinfo(d.dtype).max
    r1 = torch.remainder(top, d)
    e = torch.add(torch.sub(2, d), r1, alpha=2)  # 2 - d + 2 * r1: only the partial sum wraps
    m = torch.remainder(e, d)
    q1 = torch.floor_divide(torch.sub(top, r1), d)
    k = torch.add(torch.floor_divide(e, d), q1, alpha=2).add_(1)
    return k, m


def gather_columns(columns: list[torch.Tensor], feature: torch.Tensor) -> list[torch.Tensor]:
    """Per-element copies of per-feature columns: one gather for one column, a ``stack`` and one
    gather for several; the result columns are views of one ``(L, k)`` gather."""
    if len(columns) == 1:
        return [columns[0].index_select(0, feature)]
    table = torch.stack(columns, 1).index_select(0, feature)
    return [table[:, j] for j in range(len(columns))]


SCALAR_LIMIT = 1 << 16  # my_size read from the cached arange below this


def _device_scalar(value: int, device: torch.device) -> torch.Tensor | int:
    """``value`` as a 0-d int32 view of the shared cached ``arange`` (no launch once warm) for
    ``0 <= value < SCALAR_LIMIT``; ``torch.where`` with a Python number fills a tensor with it
    first (one launch).  A 0-d operand does not widen the result's dtype."""
    if 0 <= value < SCALAR_LIMIT:
        return arange_cached(value + 1, device, torch.int32)[value]
    return value


def uniform_buckets(
    x: torch.Tensor, block: torch.Tensor, my_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bucket, new index)`` for uniform blocks without ``total_num_blocks`` (``G = P``).

    ``block``: each element's block size ``b``, in ``[0, max // P]``.  ``u >= b * P  <=>
    u // P >= b`` (``q_out = u // P``, the out-of-range quotient), which holds for every negative
    ``x`` (``u // P >= 2**(BITS-1) // P >= b``).  One division of ``x + h * M`` serves both
    branches: by ``P`` out of range (the remainder is ``u % P``; ``M = 0`` for a power of two)
    and by ``b`` in range (there ``x >= 0``, so ``h = 0``, and ``b >= 1``).
    Launches, ``P`` a power of two: ``q_out`` (``floor_divide``, mask), ``ge``, the divisor
    ``where``, ``floor_divide``, ``remainder``, two ``where``: 8; otherwise ``x < 0``, the add of
    ``M`` and of ``K`` on top (``P = 1``: ``u // 1`` wraps, so ``x < 0`` joins the compare).
    """
    if pow2_shift(my_size) is not None:
        q_out, _ = udivmod(x, None, my_size, want_remainder=False)
        shifted = x
        out = torch.ge(q_out, block)
    else:
        k, m = host_divmod_constants(my_size, bits_of(x.dtype))
        neg = torch.lt(x, 0)
        shifted = torch.add(x, neg, alpha=m) if m else x
        q_out = torch.floor_divide(shifted, my_size)
        q_out = torch.add(q_out, neg, alpha=k) if k else q_out
        out = torch.ge(q_out, block)
        if my_size == 1:
            out = torch.logical_or(out, neg)
    divisor = torch.where(out, _device_scalar(my_size, x.device), block)
    q, r = torch.floor_divide(shifted, divisor), torch.remainder(shifted, divisor)
    return torch.where(out, r, q), torch.where(out, q_out, r)


def uniform_buckets_total(
    x: torch.Tensor, cols: list[torch.Tensor], my_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bucket, new index)`` for uniform blocks with ``total_num_blocks`` ``G = P * Lb``.

    ``cols`` per element: ``b * Lb`` (clamped to ``[0, max // P]``) and ``Lb`` (at least 1).
    With ``P >= 2`` the division by ``G`` splits through the host-known ``P``: ``q_P, r_P = u
    divmod P`` (non-negative), ``u >= b * G  <=>  q_P >= b * Lb``, ``u // G = q_P // Lb`` and
    ``u % G = r_P + P * (q_P % Lb)``, so one signed division by a per-element divisor (``Lb`` out
    of range, ``b * Lb`` in range) serves both branches: bucket ``(u % G) // Lb`` or
    ``x // (b * Lb)``, new index ``u // G`` or ``x % (b * Lb)``.  Launches: the divmod by ``P``
    (3, or 5 when ``P`` is not a power of two), ``ge``, two ``where`` choosing the operands,
    ``floor_divide``, ``remainder``, the add and ``floor_divide`` of the out-of-range bucket, two
    ``where``.  ``P = 1`` (``G = Lb``, bucket 0): :func:`_single_bucket_total`.
    """
    local_size, local_blocks = cols
    if my_size == 1:
        return _single_bucket_total(x, local_size, local_blocks)
    q_p, r_p = udivmod(x, None, my_size)
    assert r_p is not None
    out = torch.ge(q_p, local_size)
    q = torch.floor_divide(
        dividend := torch.where(out, q_p, x), divisor := torch.where(out, local_blocks, local_size)
    )
    r = torch.remainder(dividend, divisor)
    bucket_out = torch.floor_divide(torch.add(r_p, r, alpha=my_size), local_blocks)
    return torch.where(out, bucket_out, q), torch.where(out, q, r)


def _single_bucket_total(
    x: torch.Tensor, range_size: torch.Tensor, total: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``my_size = 1`` with ``total_num_blocks`` ``G``: every bucket is 0; the new index is
    ``u % (b * G)`` in range, ``u // G`` outside, by the per-element ``K, M`` of ``G``
    (:func:`pow2_divmod`: ``u // 1`` would wrap, so the split of the caller does not apply)."""
    neg = torch.lt(x, 0)
    out = torch.logical_or(torch.ge(x, range_size), neg)
    k, m = pow2_divmod(total)
    q, r = udivmod(x, neg, torch.where(out, total, range_size), k, m)  # in range: b * G > x
    assert r is not None
    return torch.zeros_like(x), torch.where(out, q, r)
