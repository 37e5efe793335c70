"""Rows, features, counts and the output order of the bucketize family, on a 910B's AI Core.

A 910B runs ``repeat_interleave`` with a tensor of repeats, ``searchsorted``, integer ``sort``,
int64 ``cumsum`` and int64 ``index_add_`` on its AI CPU (docs/hardware.md).  The pieces below
build the same index vectors without them:

* the row of each element: ``cumsum(lengths)`` in int32 into a buffer read as offsets, then
  :func:`fbgemm_npu.native._index.segment_ids` (int32 ``index_add`` of ones at the row ends and
  int32 ``cumsum``): ``row[i] = #{r : incl[r] <= i}``.  The last row's end is left out: it is
  ``L`` for valid lengths and counts for no element, and without it a row id stays below ``N``
  whatever the lengths hold, so every gather by it stays inside its table while a failed data
  check is still queued (``native/_pending.py``);
* the feature of each element: ``row // B``, or with VBE batch sizes the count of features whose
  row range ends at or before the element's row (a broadcast compare and a sum while
  ``L * T <= COMPARE_LIMIT``, decided on the host from the sizes; segment ids over the rows past
  it);
* the counts per (bucket, row): an int32 ``index_add`` of ones at ``bucket * N + row`` into cached
  zeros, widened once to the lengths' int64;
* the output order, the input order stably sorted by bucket: a stable ``sort`` of float32 keys
  (exact: a bucket is below ``my_size <= 2**24``), or for a larger ``my_size`` one stable float
  sort per 24-bit digit of the bucket, least significant first (a radix sort);
* each element's position in its row: ``i - offsets[row[i]]`` by a gather of the row starts.

Index arithmetic is int32 while the indices number below ``2**31`` (:func:`offsets_dtype`,
decided on the host from ``indices.numel()``); past it the offsets and counts are int64, an AI-CPU
route (``cumsum``, ``index_add_``) kept for sizes no 910B input reaches today.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import filled_i32, segment_ids

__all__ = [
    "COMPARE_LIMIT",
    "COUNTS_CACHE_LIMIT",
    "FLOAT_KEY_BITS",
    "INT32_LIMIT",
    "bucket_counts",
    "element_features",
    "element_rows",
    "inverse_permutation",
    "offsets_dtype",
    "row_positions",
    "stable_bucket_order",
    "zero_counts",
]

INT32_LIMIT = 2**31  # sizes from here on need int64 offsets and counts
FLOAT_KEY_BITS = 24  # float32 holds every integer below 2**24 exactly
COMPARE_LIMIT = 2**24  # elements of a broadcast compare (bytes of its bool result)
COUNTS_CACHE_LIMIT = 2**24  # zeroed counts taken from the shared cache up to this size


def offsets_dtype(n: int) -> torch.dtype:
    """int32 for offsets and counts of ``n < 2**31`` elements (AI Core), int64 past it."""
    return torch.int32 if n < INT32_LIMIT else torch.int64


def _inclusive(counts: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[?, *cumsum(counts)]`` in ``dtype``: one ``cumsum`` written into ``buf[1:]``; ``buf[0]``
    is never written (``segment_ids`` reads ``bounds[1:]`` only)."""
    buf = torch.empty(counts.numel() + 1, dtype=dtype, device=counts.device)
    torch.cumsum(counts, 0, dtype=dtype, out=buf[1:])
    return buf


def element_rows(lengths: torch.Tensor, n_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(incl, row)``: the inclusive offsets ``cumsum(lengths)`` (:func:`offsets_dtype`) and the
    int32 row of each of the ``n_idx`` elements, in ``[0, N - 1]`` whatever ``lengths`` holds
    (the last row's end is not marked).  Launches: ``cumsum``, then ``segment_ids``' clamp,
    ``index_add`` and ``cumsum``; all int32 below ``2**31`` indices."""
    n_rows = lengths.numel()
    buf = _inclusive(lengths, offsets_dtype(n_idx))
    return buf[1:], segment_ids(buf[:n_rows], n_idx)


def element_features(
    row: torch.Tensor, n_rows: int, n_feat: int, batch: torch.Tensor | None
) -> torch.Tensor:
    """The feature of each element (int32, in ``[0, T - 1]``): ``row // B`` with ``B = N / T``
    rows per feature (one ``floor_divide``), or with VBE batch sizes ``#{t < T - 1 : ends[t] <=
    row}`` for the features' row ends ``ends = cumsum(batch)``: ``cumsum``, a broadcast ``ge``
    and a ``sum`` while ``L * T <= COMPARE_LIMIT``, else ``cumsum`` and ``segment_ids`` over the
    rows (clamp, ``index_add``, ``cumsum``) and a gather by row."""
    if batch is None:
        return torch.floor_divide(row, max(n_rows // max(n_feat, 1), 1))
    buf = _inclusive(batch, torch.int32)  # buf[1:] = the features' row ends
    ends = buf[1:n_feat]  # the last end (N for valid batch sizes) left out: feature < T
    if row.numel() * n_feat <= COMPARE_LIMIT:
        return torch.ge(row[:, None], ends[None, :]).sum(1, dtype=torch.int32)
    return segment_ids(buf[:n_feat], n_rows).index_select(0, row)


def zero_counts(size: int, n_idx: int, device: torch.device) -> torch.Tensor:
    """The zeros :func:`bucket_counts` adds into: int32 (int64 from ``2**31`` indices on), a view
    of the shared cache (no launch once warm) up to ``COUNTS_CACHE_LIMIT`` elements, a fresh
    ``zeros`` past it (a huge ``my_size`` must not pin its buffer in the cache).  Callers must
    not write to it."""
    if offsets_dtype(n_idx) == torch.int64:
        return torch.zeros(size, dtype=torch.int64, device=device)
    if size <= COUNTS_CACHE_LIMIT:
        return filled_i32(size, 0, device)
    return torch.zeros(size, dtype=torch.int32, device=device)


def bucket_counts(
    zeros: torch.Tensor,
    bucket: torch.Tensor,
    row: torch.Tensor,
    n_rows: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """``new_lengths``: ``counts[b * N + r]`` = elements of row ``r`` in bucket ``b``, in
    ``dtype`` (the lengths'), added into ``zeros`` (:func:`zero_counts`, ``my_size * N``
    elements, not written).  ``bucket`` must lie in ``[0, my_size)`` and ``row`` in ``[0, N)``.
    Launches: the key ``row + bucket * N`` (plus a widening of ``row`` where ``my_size * N``
    passes int32 and both are int32), an out-of-place ``index_add`` of cached ones (int32 on the
    AI Core; int64, the AI CPU, only from ``2**31`` indices on), and one cast to int64
    lengths."""
    n = bucket.numel()
    if torch.promote_types(row.dtype, bucket.dtype) == torch.int32 and (
        zeros.numel() >= INT32_LIMIT
    ):
        row = row.long()  # the key would overflow int32
    key = torch.add(row, bucket, alpha=n_rows)
    if zeros.dtype == torch.int64:
        ones = torch.ones(1, dtype=torch.int64, device=zeros.device).expand(n)
    else:
        ones = filled_i32(n, 1, zeros.device)
    counts = torch.index_add(zeros, 0, key, ones)
    return counts if counts.dtype == dtype else counts.to(dtype)


def stable_bucket_order(bucket: torch.Tensor, my_size: int) -> torch.Tensor:
    """The permutation that sorts ``bucket`` (values in ``[0, my_size)``) stably: int64.

    Float keys, which a 910B sorts on its AI Core (integer keys go to its AI CPU): one cast and
    one stable ``sort`` for ``my_size <= 2**FLOAT_KEY_BITS``; above it one pass per
    ``FLOAT_KEY_BITS``-bit digit, least significant first, each a digit (``floor_divide``,
    ``remainder``), a cast, a stable sort and the gathers composing the passes."""
    span = 1 << FLOAT_KEY_BITS
    if my_size <= span:
        return torch.sort(bucket.to(torch.float32), stable=True).indices
    order: torch.Tensor | None = None
    keys = bucket
    shift = 1
    while shift < my_size:
        digit = torch.floor_divide(keys, shift) if shift > 1 else keys
        if shift * span < my_size:
            digit = torch.remainder(digit, span)
        step = torch.sort(digit.to(torch.float32), stable=True).indices
        order = step if order is None else order.index_select(0, step)
        shift *= span
        if shift < my_size:
            keys = keys.index_select(0, step)
    assert order is not None
    return order


def row_positions(
    lengths: torch.Tensor,
    incl: torch.Tensor,
    row: torch.Tensor,
    order: torch.Tensor,
    arange: torch.Tensor,
) -> torch.Tensor:
    """``new_pos``: each element's position in its row, ``i - (incl - lengths)[row[i]]``, in
    output order and ``arange``'s dtype.  Launches: the row starts (a subtraction into
    ``incl``'s dtype), their gather, the subtraction from the cached ``arange``, the gather by
    ``order``."""
    starts = torch.sub(incl, lengths, out=torch.empty_like(incl))
    return torch.sub(arange, starts.index_select(0, row)).index_select(0, order)


def inverse_permutation(order: torch.Tensor, arange: torch.Tensor) -> torch.Tensor:
    """``unbucketize_permute``: ``inv[order[j]] = j``, in ``arange``'s dtype: one
    ``index_copy_`` (AI Core for int64, where ``scatter_`` is not)."""
    return torch.empty_like(arange).index_copy_(0, order, arange)
