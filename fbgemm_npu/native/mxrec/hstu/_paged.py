"""A paged KV cache gathered into a padded key layout: one tensor program, no host loop.

The cache is a pool of pages ``kv_cache [P, 2, page_size, N_k, D]`` (plane 0 = K, plane 1 = V,
Rec SDK's ``hstu_paged`` and FlashInfer's layout).  Sequence ``b`` owns the pages
``page_ids[page_offsets[b] : page_offsets[b + 1]]`` in order; every page is full except the last,
which holds ``last_page_len[b]`` rows, so its cache length is::

    n_b   = page_offsets[b + 1] - page_offsets[b]
    len_b = (n_b - 1) * page_size + last_page_len[b]        (0 when n_b == 0)

and key row ``j < len_b`` of sequence ``b`` is
``kv_cache[page_ids[page_offsets[b] + j // page_size], :, j % page_size]``.
:func:`gather_pages` builds the padded ``[B, S_c, N_k, D]`` K and V of these rows (zero at
``j >= len_b``) for any user of a paged cache (``mxrec::hstu_paged``; FBGEMM's paged KV in
``hstu_attn_varlen_func`` may reuse it).

The page index is host-known arithmetic (``j // page_size`` and ``j % page_size`` are the shape
``[n_p, page_size]`` of the gather: no division is launched), the data parts are int32 adds and
clamps, and the rows come from ONE ``index_select`` of whole pages (K and V together) plus a
``where`` per plane that zeroes the rows past each length.  Every index is clamped into its
buffer, so bad page data (whose checks are queued, not waited for: docs/design.md, "Validation
without stalls") stays memory-safe.  No sync when ``s_max_cache`` is given.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached

__all__ = ["cache_lengths", "check_page_args", "gather_pages", "page_rows"]

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def check_page_args(
    op: str,
    kv_cache: object,
    page_offsets: object,
    page_ids: object,
    last_page_len: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Metadata checks (no launch): ``kv_cache`` 5-D ``[P, 2, page_size, N_k, D]`` float32 /
    float16 / bfloat16 with ``page_size >= 1``; ``page_offsets`` 1-D ``[B + 1]``, ``page_ids``
    and ``last_page_len [B]`` 1-D int32 / int64; all on one device.  Errors name ``op`` and the
    argument."""
    cache = check_tensor(op, "kv_cache", kv_cache)
    check_ndim(op, "kv_cache", cache, (5,))
    check_dtype(op, "kv_cache", cache, _FLOATS)
    if cache.size(1) != 2 or cache.size(2) < 1:
        raise ValueError(
            f"{op}: argument 'kv_cache' must be [num_pages, 2, page_size >= 1, N_k, D] "
            f"(0 = K, 1 = V); got {list(cache.shape)}"
        )
    tensors = []
    for name, t in (
        ("page_offsets", page_offsets),
        ("page_ids", page_ids),
        ("last_page_len", last_page_len),
    ):
        t = check_tensor(op, name, t)
        check_ndim(op, name, t, (1,))
        check_dtype(op, name, t, INDEX_DTYPES)
        tensors.append(t)
    po, ids, last = tensors
    if po.numel() != last.numel() + 1:
        raise ValueError(
            f"{op}: argument 'page_offsets' must have len(last_page_len) + 1 = "
            f"{last.numel() + 1} elements; got {po.numel()}"
        )
    check_same_device(op, kv_cache=cache, page_offsets=po, page_ids=ids, last_page_len=last)
    return cache, po, ids, last


def _int32(t: torch.Tensor, saturate: bool) -> torch.Tensor:
    """int32 ``t``; an int64 one saturated into int32 first when the checks run (a plain cast
    wraps ``2**32 + 1`` to ``1``, a value the checks would pass)."""
    if saturate and t.dtype == torch.int64:
        t = t.clamp(-(2**31), 2**31 - 1)
    return t.to(torch.int32)


def cache_lengths(
    page_offsets: torch.Tensor,
    page_ids: torch.Tensor,
    last_page_len: torch.Tensor,
    num_pages: int,
    page_size: int,
    s_max: int | None,
    checks: DataChecks | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(len, first)``: int32 ``[B]`` cache lengths ``(n_b - 1) * page_size + last_page_len[b]``
    clamped to ``[0, s_max]`` (0 for a sequence without pages; no upper clamp for a None
    ``s_max``) and each sequence's first slot ``page_offsets[b]`` in int32 (for
    :func:`page_rows`).

    With ``checks``, queues the page data conditions (no sync), one reduction each:
    ``page_offsets`` starts at 0 and ends at ``page_ids.numel()`` (views), ``n_b`` in
    ``[0, page_ids.numel()]`` (``aminmax``; with the int64 metadata saturated into int32 and
    ``B * numel < 2**32`` this is "non-decreasing": a wrapped difference cannot pass), ``page_ids``
    in ``[0, num_pages)`` (``aminmax``), ``last_page_len`` in ``[1, page_size]`` for a sequence
    with pages (a sequence without pages reads as a full last page: its value is unused;
    ``gt``, ``where``, ``aminmax``), and with ``s_max`` lengths ``<= s_max`` (``max``; exact
    while ``numel * page_size < 2**31``, else the page counts are bounded first).
    Launches: int32 casts (and saturating clamps) of int64 metadata, sub, sub, add, clamp,
    plus the checks' 6."""
    validating = checks is not None
    po = _int32(page_offsets, validating)
    last = _int32(last_page_len, validating)
    n = po[1:] - po[:-1]
    if validating:
        last = torch.where(n > 0, last, page_size)  # no pages: a "full" page, length 0
    length = torch.add(last - page_size, n, alpha=page_size)  # (n - 1) * ps + last
    if checks is not None:
        total, batch = page_ids.numel(), n.numel()
        checks.add(po[0], 0, 0, "argument 'page_offsets' must start at 0")
        checks.add(po[-1], total, total, f"argument 'page_offsets' must end at {total}")
        if batch > 0:
            low, high = torch.aminmax(n)
            what = f"argument 'page_offsets' must be non-decreasing, from 0 to {total}"
            checks.add(low, 0, None, what)
            checks.add(high, None, total, what)
            if batch * total >= 2**32:  # the wrap argument above needs this bound
                checks.require(
                    non_decreasing(page_offsets), "argument 'page_offsets' must be non-decreasing"
                )
            low, high = torch.aminmax(last)
            what = f"argument 'last_page_len' must be in [1, page_size = {page_size}]"
            checks.add(low, 1, None, what)
            checks.add(high, None, page_size, what)
            if s_max is not None:
                most = -(-s_max // page_size)
                if total * page_size >= 2**31:  # n * page_size could wrap: bound n first
                    checks.add(n.max(), None, most, f"every sequence must have <= {most} pages")
                checks.add(length.max(), None, s_max, f"cache lengths must be <= {s_max}")
        if total > 0:
            low, high = torch.aminmax(page_ids)
            what = f"argument 'page_ids' must hold values in [0, {num_pages})"
            checks.add(low, 0, None, what)
            checks.add(high, None, num_pages - 1, what)
    # n == 0 gives last - ps <= 0 (for a valid last): the clamp at 0 makes it 0
    return length.clamp_(0, s_max), po[:-1]


def gather_pages(
    kv_cache: torch.Tensor,
    page_offsets: torch.Tensor,
    page_ids: torch.Tensor,
    last_page_len: torch.Tensor,
    s_max_cache: int | None,
    *,
    op: str = "gather_pages",
    checks: DataChecks | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The paged cache as padded keys and values (see the module docstring for the layout).

    Args:
        kv_cache: ``[P, 2, page_size, N_k, D]`` float32 / float16 / bfloat16 (0 = K, 1 = V).
        page_offsets: ``[B + 1]`` int32 / int64, sequence ``b``'s pages are
            ``page_ids[page_offsets[b] : page_offsets[b + 1]]``.
        page_ids: ``[page_offsets[-1]]`` int32 / int64 page numbers in ``[0, P)``.
        last_page_len: ``[B]`` int32 / int64 rows of each sequence's last page, ``[1, page_size]``.
        s_max_cache: ``S_c``, the padded length (at least the longest cache); None reads the
            longest back (1 sync, carrying the queued checks).
        op: the op named in errors.
        checks: queue the page data conditions (:func:`cache_lengths`) here for the caller to
            assert or read; None: they are queued by this call (when validation is on).

    Returns:
        ``(k [B, S_c, N_k, D], v [B, S_c, N_k, D], lengths [B] int32)``: row ``j`` of sequence
        ``b`` is its ``j``-th cached row for ``j < lengths[b]`` and 0 after; ``lengths`` is
        clamped to ``[0, S_c]`` (a longer cache fails the queued check ``lengths <= S_c``).  k and
        v are row-contiguous (prefix views of ``[B, n_p * page_size, N_k, D]`` buffers).

    Launches (warm, checks off): 16 (int64 metadata; 14 for int32), whatever B, S_c and the page
    count: the lengths (:func:`cache_lengths`, 6), the page index (add, clamp, ``index_select``
    of page_ids, clamp), ONE ``index_select`` of whole pages (K and V), the valid mask (``lt``)
    and a ``where`` per plane (each with its scalar's fill).  0 syncs with ``s_max_cache``.
    """
    cache, po, ids, last = check_page_args(op, kv_cache, page_offsets, page_ids, last_page_len)
    own = checks is None
    if own:
        checks = DataChecks(op) if validation_enabled() or s_max_cache is None else None
    if s_max_cache is not None and s_max_cache < 0:
        raise ValueError(f"{op}: argument 's_max_cache' must be >= 0; got {s_max_cache}")
    length, first = cache_lengths(po, ids, last, cache.size(0), cache.size(2), s_max_cache, checks)
    if s_max_cache is None:
        assert checks is not None
        s_max_cache = checks.read_with([length.max()])[0] if last.numel() > 0 else 0
    elif own and checks is not None:
        checks.assert_on_device()
    return (*page_rows(cache, ids, first, length, s_max_cache), length)


def page_rows(
    kv_cache: torch.Tensor,
    page_ids: torch.Tensor,
    first: torch.Tensor,
    lengths: torch.Tensor,
    s_max_cache: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gather of :func:`gather_pages` once the lengths are known (:func:`cache_lengths`):
    padded ``(k, v)`` ``[B, S_c, N_k, D]`` of a checked ``kv_cache``, from each sequence's first
    page slot ``first [B]`` int32 and its cache length ``lengths [B]`` int32 (in ``[0, S_c]``).
    Launches: 10 (the page index 4, the page gather, the valid mask, a fill and a where per
    plane); every index clamped."""
    cache, ids = kv_cache, page_ids
    num_pages, ps, nk, d = cache.size(0), cache.size(2), cache.size(3), cache.size(4)
    batch, dev = lengths.numel(), cache.device
    n_p = -(-s_max_cache // ps)  # pages per sequence the padded layout holds
    if ids.numel() == 0 or num_pages == 0 or n_p == 0 or batch == 0:
        out = cache.new_zeros(2, batch, s_max_cache, nk, d)  # nothing to gather (or unsafe to)
        return out[0], out[1]
    # slot p of sequence b reads page_ids[page_offsets[b] + p]: clamped into page_ids, and the
    # page number into the pool (pages past n_b are masked below)
    slot = (first.view(-1, 1) + arange_cached(n_p, dev, torch.int32).view(1, -1)).clamp_(
        0, ids.numel() - 1
    )
    page = ids.index_select(0, slot.view(-1)).clamp_(0, num_pages - 1)
    # a page of the pool is one row of [P, 2 * ps * N_k * D]: a view of a contiguous cache (a
    # strided one is copied whole by reshape: pass the pool contiguous)
    pages = cache.reshape(num_pages, 2 * ps * nk * d).index_select(0, page)
    pages = pages.view(batch, n_p, 2, ps, nk, d)
    j = arange_cached(n_p * ps, dev, torch.int32).view(1, n_p, ps, 1, 1)
    valid = j < lengths.view(-1, 1, 1, 1, 1)
    # one where per plane: each plane's slice keeps the row order, so its output is contiguous
    k, v = (
        torch.where(valid, pages[:, :, plane], 0).view(batch, n_p * ps, nk, d)[:, :s_max_cache]
        for plane in (0, 1)
    )
    return k, v
