"""Arithmetic for the bucketize family: unsigned index math and variable-size bucket search.

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
has its ``K, M`` computed in Python, and a power of two needs neither: ``u // 2**s`` is the
arithmetic shift masked to ``BITS - s`` bits, ``u % 2**s`` a mask.  A per-feature divisor
(``total_num_blocks``) gets ``K, M`` from :func:`pow2_divmod`, launches on the ``T``-sized table.

Variable bucket boundaries (``block_bucketize_pos``): upstream binary-searches each feature's own
sorted boundary list.  :func:`prepare_boundaries` and :func:`search_boundaries` do all features in
two global ``searchsorted`` calls without padding (memory ``O(L + sum of boundary counts)``):
boundaries and values are first ranked among *all* boundaries (in unsigned order: the sign bit is
flipped so a signed comparison orders like an unsigned one), then each rank is looked up in a
``(feature, rank)``-sorted key list.  For a boundary ``b_j`` let ``g_j`` = number of boundaries
(all features) ``< b_j``; for a value ``v`` let ``r`` = number of boundaries ``<= v``; then
``b_j <= v  <=>  g_j < r``, so upstream's ``upper_bound - 1`` inside feature ``t`` is
``#{j in t: g_j < r} - 1``, one ``searchsorted`` over the keys ``t * (K + 1) + g_j``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "Boundaries",
    "bits_of",
    "bucket_order",
    "gather_columns",
    "host_divmod_constants",
    "pow2_divmod",
    "pow2_shift",
    "prepare_boundaries",
    "row_positions",
    "search_boundaries",
    "sign_flip",
    "udivmod",
    "uniform_buckets",
    "uniform_buckets_total",
    "variable_buckets",
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
    from :func:`pow2_divmod`.  A power-of-two int ``d`` is a logical shift and a mask (and a
    mask for the remainder).  Otherwise: ``x < 0`` when ``neg`` is not given, the add of ``M``,
    the ``floor_divide`` (and the ``remainder``) and the add of ``K``, the adds of a ``k`` or
    ``m`` that is 0 left out.
    """
    shift = pow2_shift(d) if isinstance(d, int) else None
    if shift is not None:
        q = torch.bitwise_and(x >> shift, (1 << (bits_of(x.dtype) - shift)) - 1)
        return q, (torch.bitwise_and(x, d - 1) if want_remainder else None)
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


@dataclass
class Boundaries:
    """Every feature's boundaries, prepared for :func:`search_boundaries`."""

    flat: torch.Tensor  # all boundaries concatenated, index dtype
    ranked: torch.Tensor  # sign-flipped boundaries, sorted (all features together)
    keys: torch.Tensor  # feature * (total + 1) + rank of each boundary, sorted
    start: torch.Tensor  # (T,) int64 on device: offset of feature t in ``flat``
    last: torch.Tensor  # (T,) index dtype: the last boundary of each feature
    total: int  # number of boundaries


def prepare_boundaries(pos: list[torch.Tensor], dtype: torch.dtype) -> Boundaries:
    """Concatenate, rank and key every feature's boundaries.

    The per-feature sizes are tensor shapes (host metadata): the feature id of each boundary and
    each feature's start are built on the host and sent in one copy.  Launches: cat, flip,
    sort, searchsorted, the host-to-device copy, add, the gather of the last boundaries.
    """
    device = pos[0].device
    sizes = torch.tensor([p.numel() for p in pos], dtype=torch.int64)
    total = int(sizes.sum())
    ends = torch.cumsum(sizes, 0)
    host = torch.cat(
        [torch.repeat_interleave(torch.arange(len(pos)), sizes), ends - sizes, ends - 1]
    )
    aux = host.to(device)  # one host-to-device copy: feature ids, starts, last positions
    fid, start, last_at = aux[:total], aux[total : total + len(pos)], aux[total + len(pos) :]
    flat = torch.cat([p.reshape(-1) for p in pos])
    flipped = sign_flip(flat)
    ranked = torch.sort(flipped).values
    below = torch.searchsorted(ranked, flipped)  # g_j: boundaries (all features) < b_j
    keys = torch.add(below, fid, alpha=total + 1)
    return Boundaries(flat, ranked, keys, start, flat.index_select(0, last_at), total)


def search_boundaries(
    bounds: Boundaries, value: torch.Tensor, feature: torch.Tensor, start: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream's ``upper_bound(pos[t], value) - pos[t].begin() - 1`` for every element.

    ``value``: the searched index (its unsigned order is used); ``feature``: its feature ``t``;
    ``start``: ``bounds.start[t]`` per element (int64).  Returns ``(lb, at)``, int64: ``lb`` is
    ``-1`` when ``value`` is below the first boundary, and ``at = start + lb`` clamped to
    ``>= 0`` is the flat position of ``pos[t][lb]``.  Launches: the flip, two ``searchsorted``,
    an add, two subtractions and the clamp.
    """
    rank = torch.searchsorted(bounds.ranked, sign_flip(value), right=True)
    query = torch.add(rank, feature, alpha=bounds.total + 1)
    count = torch.searchsorted(bounds.keys, query)  # start + lb + 1
    at = torch.sub(count, 1)
    lb = torch.sub(at, start)
    return lb, at.clamp_(min=0)


def gather_columns(columns: list[torch.Tensor], feature: torch.Tensor) -> list[torch.Tensor]:
    """Per-element copies of per-feature columns: one gather for one column, a ``stack`` and one
    gather for several; the result columns are views of one ``(L, k)`` gather."""
    if len(columns) == 1:
        return [columns[0].index_select(0, feature)]
    table = torch.stack(columns, 1).index_select(0, feature)
    return [table[:, j] for j in range(len(columns))]


def uniform_buckets(
    x: torch.Tensor, neg: torch.Tensor | None, block: torch.Tensor, my_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bucket, new index)`` for uniform blocks without ``total_num_blocks`` (``G = P``).

    ``block``: each element's block size, a fresh tensor (overwritten).  A power-of-two
    ``my_size``: ``u // P`` is a shift, and ``u >= b*P  <=>  u // P >= b``, so the modulo branch
    comes first and the in-range division uses ``b`` (1 where the element is out of range).
    Otherwise the divisor is ``b`` in range (``u < b*P``, which needs ``x >= 0``) and ``P``
    outside, one unsigned divmod serving both (``x < 0`` computed when ``neg`` is not given;
    ``my_size`` 1 needs no correction for negative ids).
    """
    if pow2_shift(my_size) is not None:
        q_out, r_out = udivmod(x, None, my_size)
        assert r_out is not None
        out = torch.ge(q_out, block)
        divisor = block.masked_fill_(out, 1)
        q_in, r_in = torch.floor_divide(x, divisor), torch.remainder(x, divisor)
        return torch.where(out, r_out, q_in), torch.where(out, q_out, r_in)
    if neg is None:
        neg = torch.lt(x, 0)
    out = torch.logical_or(torch.ge(x, torch.mul(block, my_size)), neg)
    divisor = block.masked_fill_(out, my_size)
    k, m = host_divmod_constants(my_size, bits_of(x.dtype))
    q, r = udivmod(x, neg, divisor, k, m)
    assert r is not None
    return torch.where(out, r, q), torch.where(out, q, r)


def uniform_buckets_total(
    x: torch.Tensor, neg: torch.Tensor, cols: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bucket, new index)`` for uniform blocks with ``total_num_blocks``.

    ``cols`` per element: ``b*G`` (global range), ``b*Lb`` (local block), ``G``, ``Lb``, and the
    :func:`pow2_divmod` constants ``K, M`` of ``G``.
    """
    global_size, local_size, total, local_blocks, k, m = cols
    out = torch.logical_or(torch.ge(x, global_size), neg)
    divisor = torch.where(out, total, local_size)
    q, r = udivmod(x, neg, divisor, k, m)
    assert r is not None
    return torch.where(out, torch.floor_divide(r, local_blocks), q), torch.where(out, q, r)


def variable_buckets(
    x: torch.Tensor,
    neg: torch.Tensor | None,
    bounds: Boundaries,
    feature: torch.Tensor,
    cols: list[torch.Tensor],
    my_size: int,
    keep_all: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(bucket, new index)`` for ``block_bucketize_pos`` boundaries (see the module docstring).

    ``cols`` per element: block size, start of the feature's boundaries, its last boundary, and
    optionally ``G`` (``total_num_blocks``, clamped to >= 1) with its ``K, M``.  The bucket is
    int64.  ``keep_all``: the new index is not needed (``None`` is returned for it, and its
    gather, subtraction and selects are skipped).  A ``my_size`` that is not a power of two and
    ``total_num_blocks`` (a per-element divisor) cost more unsigned division.
    """
    block, start, last = cols[:3]
    total: int | torch.Tensor = my_size
    k = m = None
    if len(cols) > 3:
        total, k, m = cols[3:]
    q_g, r_g = udivmod(x, neg, total, k, m)
    assert r_g is not None
    scaled = torch.mul(r_g, last)  # upstream: (u % G) * pos[t][-1] / G, unsigned, wrapping
    q_s, _ = udivmod(scaled, None, total, k, m, want_remainder=False)
    zero = torch.eq(block, 0)
    lb, at = search_boundaries(bounds, torch.where(zero, q_s, x), feature, start)
    inside = torch.eq(torch.clamp(lb, 0, my_size - 1), lb)
    if isinstance(total, int):
        q_p, r_p = q_g, r_g
    else:
        q_p, r_p = udivmod(x, neg, my_size)
    bucket = torch.where(inside, lb, r_p)
    if keep_all:
        return bucket, None
    offset = torch.sub(x, bounds.flat.index_select(0, at))
    return bucket, torch.where(zero, q_g, torch.where(inside, offset, q_p))


def bucket_order(
    counts: torch.Tensor, bucket: torch.Tensor, row: torch.Tensor, rows: int, my_size: int
) -> torch.Tensor:
    """The output order, with the counts per (bucket, row) added into ``counts`` (the zeroed
    ``new_lengths``, ``my_size * rows`` elements).

    The output lists bucket 0's elements, then bucket 1's...; inside a bucket, rows in order and
    inside a row the input order, so the output order is the input order stably sorted by
    bucket alone (``row`` is non-decreasing already).  The sort key is narrowed to uint8 when
    ``my_size <= 256``: a radix-friendly key, several times faster than int64.  Counts: an
    ``index_add`` of ones at ``bucket * rows + row`` (plus the cast of the narrowed key).
    """
    device = bucket.device
    n = bucket.numel()
    narrow = torch.promote_types(row.dtype, bucket.dtype) == torch.int32
    if narrow and (my_size + 1) * rows > torch.iinfo(torch.int32).max:
        row = row.long()  # the key would overflow int32
    key = torch.add(row, bucket, alpha=rows)
    ones = torch.ones(1, dtype=counts.dtype, device=device).expand(n)
    counts.index_add_(0, key, ones)
    sort_key = bucket.to(torch.uint8) if my_size <= 256 else bucket
    return torch.sort(sort_key, stable=True).indices


def row_positions(row: torch.Tensor, order: torch.Tensor, arange: torch.Tensor) -> torch.Tensor:
    """``i - rowstart(i)`` (``arange``'s dtype) in output order; an element's row start is the
    first index of its row id in the non-decreasing ``row``: a ``searchsorted``, a subtraction
    and a gather."""
    start = torch.searchsorted(row, row, out_int32=arange.dtype == torch.int32)
    return torch.sub(arange, start).index_select(0, order)
