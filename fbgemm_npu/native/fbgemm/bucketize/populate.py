"""``fbgemm::populate_bucketized_permute`` on npu: where each index goes in the bucketized
layout that ``block_bucketize_sparse_features`` produced.

Semantics (fbgemm-gpu-cpu 1.8.0's CPU kernel): row ``r`` of ``lengths`` (``R`` rows) holds
``lengths[r]`` indices, index ``k`` of row ``r`` is in bucket ``b_k = bucket_mapping[k]``;
``bucketized_lengths`` (``my_size * R``, bucket-major: ``b * R + r``) has the complete cumsum
``boff``.  Upstream walks the indices in order and gives each the next slot of its (bucket, row)
run: ``out[k] = boff[b_k R + r_k] + (earlier indices of row r_k in bucket b_k)``.  ``out`` has
``bucket_mapping``'s dtype and shape; ``lengths`` and ``bucketized_lengths`` share a dtype
(upstream: a RuntimeError otherwise).

As a tensor program, with the key ``q_k = b_k R + r_k``: a stable sort of the keys puts index
``k`` at position ``p_k = gstart[q_k] + rank_k`` (``gstart``: the exclusive cumsum of the keys'
counts), so ``out = p + (boff - gstart)[q]`` and ``boff - gstart`` is the exclusive cumsum of
``bucketized_lengths - counts`` (zero for the lengths ``block_bucketize`` gives; any lengths are
followed as upstream follows them).  Rows by ``_order.element_rows`` (int32 ``cumsum`` +
segment ids), the stable order by float32 keys (``_order.stable_bucket_order``: AI Core; the
radix of float sorts past ``2**24`` keys), ``p`` by ``index_copy_``, the counts by an int32
``index_add`` (AI Core); no sync.  Checks (queued): lengths non-negative summing to
``bucket_mapping.numel()``, buckets in ``[0, my_size)``; the buckets are clamped first, so a key
stays inside the tables whatever the data (upstream reads outside them).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_same_device,
    check_same_dtype,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native.fbgemm.bucketize._order import (
    INT32_LIMIT,
    element_rows,
    offsets_dtype,
    stable_bucket_order,
    zero_counts,
)

__all__ = ["KERNELS", "populate_bucketized_permute_npu"]

POPULATE = "fbgemm::populate_bucketized_permute"


def _check(
    op: str, lengths: torch.Tensor, bucketized_lengths: torch.Tensor, bucket_mapping: torch.Tensor
) -> int:
    """Metadata checks; returns ``my_size`` (0 for an empty ``bucket_mapping``, which upstream
    returns empty whatever the other sizes)."""
    for arg, t in (
        ("lengths", lengths),
        ("bucketized_lengths", bucketized_lengths),
        ("bucket_mapping", bucket_mapping),
    ):
        check_tensor(op, arg, t)
        check_dtype(op, arg, t, INDEX_DTYPES)
    check_same_device(
        op, lengths=lengths, bucketized_lengths=bucketized_lengths, bucket_mapping=bucket_mapping
    )
    check_same_dtype(op, lengths=lengths, bucketized_lengths=bucketized_lengths)
    rows, n = lengths.numel(), bucket_mapping.numel()
    if n == 0:  # nothing to place: upstream returns an empty result whatever the sizes
        return 0
    if rows == 0:
        raise ValueError(
            f"{op}: argument 'bucket_mapping' must have sum(lengths) = 0 elements with no "
            f"rows in 'lengths', got {n}"
        )
    if bucketized_lengths.numel() % rows != 0:
        raise ValueError(
            f"{op}: argument 'bucketized_lengths' must have my_size * lengths.numel() elements, "
            f"a multiple of {rows}, got {bucketized_lengths.numel()}"
        )
    my_size = bucketized_lengths.numel() // rows
    if my_size == 0:
        raise ValueError(
            f"{op}: argument 'bucketized_lengths' is empty, so no bucket of 'bucket_mapping' "
            "is valid"
        )
    if n >= INT32_LIMIT or bucketized_lengths.numel() >= INT32_LIMIT:
        raise ValueError(f"{op}: sizes from 2**31 elements on are not supported")
    return my_size


def populate_bucketized_permute_npu(
    lengths: torch.Tensor, bucketized_lengths: torch.Tensor, bucket_mapping: torch.Tensor
) -> torch.Tensor:
    """``out[k] = p_k + excl_cumsum(bucketized_lengths - counts)[q_k]`` (module docstring),
    ``bucket_mapping``'s dtype and shape.  Launches: the rows (``cumsum``, clamp, ``index_add``,
    ``cumsum``), the bucket's clamp, the key ``add``, the order (cast, ``sort``), ``p``
    (``index_copy_``), the counts (``index_add``), ``sub``, ``cumsum``, ``sub``, the gather by
    key, ``add`` (and a cast for int32 ``bucket_mapping``); checks: the lengths' ``amin`` and
    ``sum``, the buckets' ``aminmax``, the queued check.  Budgets: ``budgets.py``."""
    op = POPULATE
    my_size = _check(op, lengths, bucketized_lengths, bucket_mapping)
    n = bucket_mapping.numel()
    if n == 0:
        return torch.empty_like(bucket_mapping)
    rows = lengths.numel()
    dev = bucket_mapping.device
    flat_lengths = lengths.reshape(-1)
    bucket = bucket_mapping.reshape(-1)
    if validation_enabled():
        checks = DataChecks(op)
        checks.add(flat_lengths.amin(), 0, None, "argument 'lengths' must be non-negative")
        checks.add(
            flat_lengths.sum(dtype=torch.int64),
            n,
            n,
            f"argument 'lengths' must sum to bucket_mapping.numel() = {n}",
        )
        lo, hi = torch.aminmax(bucket)
        what = f"argument 'bucket_mapping' must hold buckets in [0, my_size = {my_size})"
        checks.add(lo, 0, None, what)
        checks.add(hi, None, my_size - 1, what)
        checks.assert_on_device()
    _, row = element_rows(flat_lengths, n)  # int32, in [0, rows)
    keys = my_size * rows
    key = torch.add(row, bucket.clamp(0, my_size - 1), alpha=rows)
    order = stable_bucket_order(key, keys)
    arange = arange_cached(n, dev)
    pos = torch.empty_like(arange).index_copy_(0, order, arange)
    idt = offsets_dtype(n)
    counts = torch.index_add(zero_counts(keys, n, dev), 0, key, filled_i32(n, 1, dev))
    diff = torch.sub(bucketized_lengths.reshape(-1), counts)
    shift = torch.sub(torch.cumsum(diff, 0, dtype=idt), diff)
    out = torch.add(pos, shift.index_select(0, key))
    return out.to(bucket_mapping.dtype).view(bucket_mapping.shape)


KERNELS = {POPULATE: {"PrivateUse1": populate_bucketized_permute_npu}}
