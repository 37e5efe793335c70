"""``fbgemm::reorder_batched_ad_indices`` and ``fbgemm::reorder_batched_sequence_embeddings``
on npu: the runs of indices (embedding rows) of each ``(request, table, ad)`` slot, reordered
from request-major to table-major.

With ``C`` the input slots' offsets (``cat_ad_offsets``: ``[B][T][n_b]`` slots, broadcast
``[B][T]``) and ``R`` the output's (``reordered_cat_ad_offsets``, ``T * NA + 1``), output slot
``q = (t, a)`` is input slot ``s(q)`` (``_utils.py``), so element ``j`` of ``R[q] : R[q + 1]``
reads

    out[j] = values[C[s(q)] + j - R[q]]

(broadcast: each ad of a request reads the request's one slot again).  ``T = (len(R) - 1) / NA``.
One gather by ``_utils.element_sources``; no sync (the output size is ``values``' or, broadcast,
``num_indices_after_broadcast``).  Dtypes as upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0):
offsets int32 or int64 (``C`` and ``R`` alike), ``batch_offsets`` int32 (indices) or the offsets'
dtype (embeddings), indices float32, float16, bfloat16, int32, int64, embeddings 2-D float32,
float16, bfloat16 and, as upstream's CUDA kernel (not its CPU one), uint8.  Upstream reads
memory flat and trusts every offset (out-of-range offsets read or write outside its buffers);
ours checks them (queued: ``R`` from 0 to the output size, each slot as long as its source,
``C`` non-decreasing in the values, ``batch_offsets`` from 0 to ``NA``) and clamps its
gathers.  Launches: ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import DataChecks, allocation_of
from fbgemm_npu.native.fbgemm.reorder._utils import (
    ALL_TYPES,
    EMBEDDING_TYPES,
    INDEX_TYPES,
    batch_count,
    check_batch_offsets,
    check_offsets,
    element_sources,
    refuse_dtype,
    same_device,
    slot_sources,
    source_spans,
)

__all__ = ["KERNELS", "reorder_batched_ad_indices_npu", "reorder_batched_sequence_embeddings_npu"]

INDICES = "fbgemm::reorder_batched_ad_indices"
SEQUENCE = "fbgemm::reorder_batched_sequence_embeddings"
AD_NAMES = ("cat_ad_offsets", "reordered_cat_ad_offsets")
SEQ_NAMES = ("cat_sequence_embeddings_offsets", "reordered_cat_sequence_embeddings_offsets")


def slot_layout(
    op: str,
    names: tuple[str, str],
    offsets: tuple[torch.Tensor, torch.Tensor],
    batches: int,
    num_ads: int,
    broadcast: bool,
    per_table: int | None = None,
) -> int:
    """``T`` from ``R``'s length (``T * per_table + 1``, ``per_table`` = ``max_batch_size`` or
    ``NA``), with ``C`` holding one slot per ``(b, t, ad)`` (broadcast: ``(b, t)``); both of the
    offsets' dtype (upstream's typed reads: ``RuntimeError``)."""
    c, r = offsets
    refuse_dtype(op, names[0], c, INDEX_TYPES, NotImplementedError)
    refuse_dtype(op, names[1], r, (c.dtype,))
    per = num_ads if per_table is None else per_table
    if r.numel() < 1 or (r.numel() - 1) % per:
        raise ValueError(
            f"{op}: argument '{names[1]}' must hold T * {per} + 1 offsets, got {r.numel()}"
        )
    tables = (r.numel() - 1) // per
    slots = batches * tables if broadcast else num_ads * tables
    if c.numel() != slots + 1:
        layout = "B * T" if broadcast else "T * num_ads_in_batch"
        raise ValueError(
            f"{op}: argument '{names[0]}' must hold {layout} + 1 = {slots + 1} offsets (T = "
            f"{tables} from '{names[1]}'), got {c.numel()}"
        )
    return tables


def reorder_rows(
    op: str,
    names: tuple[str, str],
    offsets: tuple[torch.Tensor, torch.Tensor],
    values: torch.Tensor,
    bo: torch.Tensor,
    layout: tuple[int, int, bool, int],
    n: tuple[int, str],
    base: torch.Tensor | None = None,
    checks: DataChecks | None = None,
) -> torch.Tensor:
    """The ``n`` output rows (elements for 1-D ``values``) ``values[C[s(q)] + j - R[q]]``;
    ``n = (rows, the argument that sets it)``.

    ``layout = (NA, T, broadcast, OB)`` (``OB > NA``: padding slots, which read nothing);
    ``base`` (cat: ``[B]``, subtracted from the source of each request's slots).  Launches:
    the slot index (``_utils.slot_sources``: 8, broadcast 4), the source spans (``clamp_``
    but broadcast, ``index_select``; ``OB > NA``: ``zeros`` and a ``copy_``), ``base[b]``
    (``index_select``), the element index (``element_sources``: 6, ``base``: 7), ``clamp_``,
    ``index_select`` into the output.  Checks (queued with the caller's ``checks``, if any):
    ``batch_offsets``, ``C`` (its range only without ``base``), ``R``.
    """
    num_ads, tables, broadcast, ob = layout
    n, size_arg = n
    c = offsets[0].detach().reshape(-1).contiguous()
    r = offsets[1].detach().reshape(-1).contiguous()
    rows = values.size(0)
    with allocation_of(op, f"the output of {n} rows (argument '{size_arg}')"):
        out = values.new_empty((n, *values.shape[1:]))
        if n == 0:
            return out
        if r.numel() == 1 or rows == 0:  # no slot, or nothing to read: R[-1] == n cannot hold
            raise ValueError(
                f"{op}: argument '{names[1]}' must end at the output size {n}, but it has "
                f"{r.numel() - 1} slots to read from {rows} values"
            )
        bo = bo.detach().reshape(-1).contiguous()
        checks = DataChecks(op) if checks is None else checks
        check_batch_offsets(checks, bo, num_ads)
        check_offsets(checks, names[0], c, None if base is not None else rows)
        s, b = slot_sources(bo, num_ads, tables, broadcast)
        spans = source_spans(c, s, c.numel() - 1, clamp=not broadcast)
        if ob > num_ads:
            padded = spans.new_zeros((tables, ob, 2))  # padding slots: empty sources
            padded[:, :num_ads].copy_(spans)
            spans = padded
        shift = None if base is None else base.index_select(0, b)
        src = element_sources(names, checks, (c, r), spans, n, shift).clamp_(0, rows - 1)
        torch.index_select(values, 0, src, out=out)
    checks.assert_on_device()
    return out


def _indices_layout(
    cat_ad_offsets: torch.Tensor,
    cat_ad_indices: torch.Tensor,
    reordered_cat_ad_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_indices: bool,
    num_indices_after_broadcast: int,
) -> tuple[int, int, tuple[int, ...]]:
    op = INDICES
    refuse_dtype(op, "cat_ad_indices", cat_ad_indices, ALL_TYPES, NotImplementedError)
    refuse_dtype(op, "batch_offsets", batch_offsets, (torch.int32,))
    batches = batch_count(op, batch_offsets, num_ads_in_batch)
    offsets = (cat_ad_offsets, reordered_cat_ad_offsets)
    tables = slot_layout(op, AD_NAMES, offsets, batches, num_ads_in_batch, broadcast_indices)
    if not broadcast_indices:
        return tables, cat_ad_indices.numel(), tuple(cat_ad_indices.shape)
    if num_indices_after_broadcast < 0:
        raise RuntimeError(
            f"{op}: argument 'num_indices_after_broadcast' must be >= 0 with broadcast_indices, "
            f"got {num_indices_after_broadcast}"
        )
    return tables, num_indices_after_broadcast, (num_indices_after_broadcast,)


def reorder_batched_ad_indices_npu(
    cat_ad_offsets: torch.Tensor,
    cat_ad_indices: torch.Tensor,
    reordered_cat_ad_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_indices: bool = False,
    num_indices_after_broadcast: int = -1,
) -> torch.Tensor:
    """``out[j] = cat_ad_indices[C[s(q)] + j - R[q]]`` for ``j`` in output slot ``q`` (module
    docstring): ``cat_ad_indices.numel()`` elements in its shape, or
    ``num_indices_after_broadcast`` (1-D) when broadcast.  Launches: :func:`reorder_rows`;
    budgets: ``budgets.py``."""
    args = (cat_ad_offsets, cat_ad_indices, reordered_cat_ad_offsets, batch_offsets)
    tables, n, shape = _indices_layout(
        *args, num_ads_in_batch, broadcast_indices, num_indices_after_broadcast
    )
    same_device(
        INDICES,
        cat_ad_indices.device,
        cat_ad_offsets=cat_ad_offsets,
        reordered_cat_ad_offsets=reordered_cat_ad_offsets,
        batch_offsets=batch_offsets,
    )
    values = cat_ad_indices.detach().reshape(-1)
    offsets = (cat_ad_offsets, reordered_cat_ad_offsets)
    layout = (num_ads_in_batch, tables, broadcast_indices, num_ads_in_batch)
    size = "num_indices_after_broadcast" if broadcast_indices else "cat_ad_indices"
    out = reorder_rows(INDICES, AD_NAMES, offsets, values, batch_offsets, layout, (n, size))
    return out.view(shape)


def _indices_fake(
    cat_ad_offsets: torch.Tensor,
    cat_ad_indices: torch.Tensor,
    reordered_cat_ad_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_indices: bool = False,
    num_indices_after_broadcast: int = -1,
) -> torch.Tensor:
    """Meta (upstream registers none): the output's shape from metadata, same checks."""
    args = (cat_ad_offsets, cat_ad_indices, reordered_cat_ad_offsets, batch_offsets)
    _, _, shape = _indices_layout(
        *args, num_ads_in_batch, broadcast_indices, num_indices_after_broadcast
    )
    return cat_ad_indices.new_empty(shape)


def _sequence_layout(
    offsets: tuple[torch.Tensor, torch.Tensor],
    embeddings: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_items_in_batch: int,
) -> int:
    op = SEQUENCE
    if embeddings.dim() != 2:
        raise RuntimeError(
            f"{op}: argument 'cat_sequence_embeddings' must be 2-D, got a {embeddings.dim()}-D "
            f"tensor of shape {tuple(embeddings.shape)}"
        )
    refuse_dtype(op, "cat_sequence_embeddings", embeddings, EMBEDDING_TYPES, NotImplementedError)
    refuse_dtype(op, SEQ_NAMES[0], offsets[0], INDEX_TYPES, NotImplementedError)
    refuse_dtype(op, "batch_offsets", batch_offsets, (offsets[0].dtype,))
    batches = batch_count(op, batch_offsets, num_items_in_batch)
    return slot_layout(op, SEQ_NAMES, offsets, batches, num_items_in_batch, False)


def reorder_batched_sequence_embeddings_npu(
    cat_sequence_embeddings_offsets: torch.Tensor,
    cat_sequence_embeddings: torch.Tensor,
    reordered_cat_sequence_embeddings_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_items_in_batch: int,
) -> torch.Tensor:
    """Rows ``out[j] = cat_sequence_embeddings[C[s(q)] + j - R[q]]`` (module docstring), the
    embeddings' shape; offsets count rows.  Launches: :func:`reorder_rows`."""
    emb = cat_sequence_embeddings
    offsets = (cat_sequence_embeddings_offsets, reordered_cat_sequence_embeddings_offsets)
    tables = _sequence_layout(offsets, emb, batch_offsets, num_items_in_batch)
    same_device(
        SEQUENCE,
        emb.device,
        cat_sequence_embeddings_offsets=offsets[0],
        reordered_cat_sequence_embeddings_offsets=offsets[1],
        batch_offsets=batch_offsets,
    )
    layout = (num_items_in_batch, tables, False, num_items_in_batch)
    return reorder_rows(
        SEQUENCE,
        SEQ_NAMES,
        offsets,
        emb.detach(),
        batch_offsets,
        layout,
        (emb.size(0), "cat_sequence_embeddings"),
    )


def _sequence_fake(
    cat_sequence_embeddings_offsets: torch.Tensor,
    cat_sequence_embeddings: torch.Tensor,
    reordered_cat_sequence_embeddings_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_items_in_batch: int,
) -> torch.Tensor:
    """Meta (upstream registers none): like the embeddings, same checks."""
    offsets = (cat_sequence_embeddings_offsets, reordered_cat_sequence_embeddings_offsets)
    _sequence_layout(offsets, cat_sequence_embeddings, batch_offsets, num_items_in_batch)
    return torch.empty_like(cat_sequence_embeddings)


KERNELS = {
    INDICES: {"PrivateUse1": reorder_batched_ad_indices_npu, "Meta": _indices_fake},
    SEQUENCE: {"PrivateUse1": reorder_batched_sequence_embeddings_npu, "Meta": _sequence_fake},
}
