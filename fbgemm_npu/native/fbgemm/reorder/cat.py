"""``fbgemm::cat_reorder_batched_ad_indices`` on npu: ``reorder_batched_ad_indices`` of
requests whose indices come as one tensor each.

``cat_ad_indices`` is a list of ``B`` tensors, request ``b``'s ``[T][n_b]`` runs (broadcast:
``[T]``) read flat; ``cat_ad_offsets`` counts across all of them, and request ``b``'s runs start
at its own first offset ``C[T bo[b]]`` (broadcast ``C[T b]``).  With ``X`` their concatenation
and ``P_b`` the numel before request ``b`` (host values):

    out[j] = X[P_b + C[s(q)] - C[first_b] + j - R[q]]

for ``j`` in output slot ``q`` of request ``b`` (``indices.py``).  ``R`` has ``T * OB + 1``
offsets, ``OB = max_batch_size`` where it is > 0 (its slots past ``NA`` are padding) else
``NA``.  The output is ``total_num_indices`` elements of the list's dtype on the list's device;
``pinned_memory`` asks upstream's CPU kernel for page-locked host memory and has no meaning for
a device tensor: ignored.  Dtypes as upstream (fbgemm-gpu-cpu 1.8.0): offsets int32 / int64,
``batch_offsets`` int32, indices float32, float16, bfloat16, int32, int64, all of one dtype.
Upstream crashes on a list shorter than ``B`` (and on an empty one) and reads past a request's
tensor where its offsets run over: ours refuses by name, checks (queued) each request's runs
within its tensor and clamps the gather.  The list is walked on the host (one ``reshape`` per
tensor, a view when it is contiguous) and joined by one ``cat``.  Launches: ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import DataChecks, check_tensor, validation_enabled
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.reorder._utils import (
    ALL_TYPES,
    batch_count,
    refuse_dtype,
    same_device,
)
from fbgemm_npu.native.fbgemm.reorder.indices import AD_NAMES, reorder_rows, slot_layout

__all__ = ["KERNELS", "cat_reorder_batched_ad_indices_npu"]

CAT = "fbgemm::cat_reorder_batched_ad_indices"


def _layout(
    cat_ad_offsets: torch.Tensor,
    cat_ad_indices: list[torch.Tensor],
    reordered_cat_ad_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_indices: bool,
    total_num_indices: int,
    max_batch_size: int,
) -> tuple[int, int, int]:
    """``(B, T, OB)`` from metadata: upstream's checks (``RuntimeError``) and ours where it
    crashes or reads out of bounds (``ValueError``)."""
    op = CAT
    if total_num_indices < 0:
        raise RuntimeError(
            f"{op}: argument 'total_num_indices' must be >= 0, got {total_num_indices}"
        )
    if len(cat_ad_indices) == 0:
        raise ValueError(f"{op}: argument 'cat_ad_indices' must hold one tensor per request")
    first = refuse_dtype(op, "cat_ad_indices[0]", cat_ad_indices[0], ALL_TYPES, NotImplementedError)
    for k, t in enumerate(cat_ad_indices):
        refuse_dtype(op, f"cat_ad_indices[{k}]", t, (first.dtype,))
    refuse_dtype(op, "batch_offsets", batch_offsets, (torch.int32,))
    batches = batch_count(op, batch_offsets, num_ads_in_batch)
    if len(cat_ad_indices) != batches:
        raise ValueError(
            f"{op}: argument 'cat_ad_indices' must hold one tensor per request, B = "
            f"len(batch_offsets) - 1 = {batches}, got {len(cat_ad_indices)}"
        )
    ob = max_batch_size if max_batch_size > 0 else num_ads_in_batch
    if ob < num_ads_in_batch:
        raise ValueError(
            f"{op}: argument 'max_batch_size' ({max_batch_size}) must be 0 or >= "
            f"num_ads_in_batch ({num_ads_in_batch})"
        )
    offsets = (cat_ad_offsets, reordered_cat_ad_offsets)
    tables = slot_layout(op, AD_NAMES, offsets, batches, num_ads_in_batch, broadcast_indices, ob)
    return batches, tables, ob


def _first_offsets(c: torch.Tensor, bo: torch.Tensor, tables: int, broadcast: bool) -> torch.Tensor:
    """``C[first_b]`` for ``b = 0 .. B`` (``B + 1``: the last is the end of the last request):
    broadcast a strided view of ``C`` (no launch), else a gather at ``T bo`` (``mul``,
    ``clamp_``, ``index_select``)."""
    nb = bo.numel() - 1
    if broadcast:
        return c.as_strided((nb + 1,), (tables,), c.storage_offset())
    return c.index_select(0, torch.mul(bo, tables).clamp_(0, c.numel() - 1))


def cat_reorder_batched_ad_indices_npu(
    cat_ad_offsets: torch.Tensor,
    cat_ad_indices: list[torch.Tensor],
    reordered_cat_ad_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_indices: bool,
    total_num_indices: int,
    pinned_memory: bool = False,
    max_batch_size: int = 0,
) -> torch.Tensor:
    """``out[j] = X[P_b + C[s(q)] - C[first_b] + j - R[q]]`` (module docstring), 1-D,
    ``total_num_indices`` elements.

    Math: ``indices.reorder_rows`` with ``base_b = C[first_b] - P_b`` subtracted per request.
    Launches: ``cat`` of the list, the pinned upload of ``P``, ``C[first_b]`` (3, broadcast 0),
    ``sub`` (``base``), then ``reorder_rows``.  Checks (queued) besides ``reorder_rows``' own:
    each request's runs inside its tensor, ``C[first_{b+1}] - C[first_b] <= numel_b``
    (``le``, ``all`` on ``base``).  Budgets: ``budgets.py``.
    """
    op = CAT
    del pinned_memory  # host memory only (module docstring)
    batches, tables, ob = _layout(
        cat_ad_offsets,
        cat_ad_indices,
        reordered_cat_ad_offsets,
        batch_offsets,
        num_ads_in_batch,
        broadcast_indices,
        total_num_indices,
        max_batch_size,
    )
    device = cat_ad_offsets.device
    same_device(
        op,
        device,
        reordered_cat_ad_offsets=reordered_cat_ad_offsets,
        batch_offsets=batch_offsets,
        **{f"cat_ad_indices[{k}]": t for k, t in enumerate(cat_ad_indices)},
    )
    parts = [check_tensor(op, "cat_ad_indices", t).detach().reshape(-1) for t in cat_ad_indices]
    starts = [0]
    for part in parts:
        starts.append(starts[-1] + part.numel())
    n = total_num_indices
    if n == 0:
        return parts[0].new_empty(0)
    values = torch.cat(parts) if len(parts) > 1 else parts[0]
    c = cat_ad_offsets.detach().reshape(-1).contiguous()
    bo = batch_offsets.detach().reshape(-1).contiguous()
    checks = DataChecks(op)
    if c.numel() == 1:  # no slots: reorder_rows refuses a non-empty output by name
        base = None
    else:
        first = _first_offsets(c, bo, tables, broadcast_indices)
        excess = torch.sub(first, upload(starts, c.dtype, device))  # C[first_b] - P_b
        if validation_enabled():
            checks.require(
                torch.le(excess[1:], excess[:-1]).all(),
                "argument 'cat_ad_offsets' must keep each request's runs inside its tensor of "
                "'cat_ad_indices'",
            )
        base = excess[:-1]
    offsets = (c, reordered_cat_ad_offsets)
    layout = (num_ads_in_batch, tables, broadcast_indices, ob)
    size = (n, "total_num_indices")
    return reorder_rows(op, AD_NAMES, offsets, values, bo, layout, size, base, checks)


def _cat_fake(
    cat_ad_offsets: torch.Tensor,
    cat_ad_indices: list[torch.Tensor],
    reordered_cat_ad_offsets: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_indices: bool,
    total_num_indices: int,
    pinned_memory: bool = False,
    max_batch_size: int = 0,
) -> torch.Tensor:
    """Meta (upstream registers none): ``total_num_indices`` elements, same checks."""
    _layout(
        cat_ad_offsets,
        cat_ad_indices,
        reordered_cat_ad_offsets,
        batch_offsets,
        num_ads_in_batch,
        broadcast_indices,
        total_num_indices,
        max_batch_size,
    )
    return cat_ad_indices[0].new_empty((total_num_indices,))


KERNELS = {CAT: {"PrivateUse1": cat_reorder_batched_ad_indices_npu, "Meta": _cat_fake}}
