"""``fbgemm::reorder_batched_ad_lengths`` on npu: request-major lengths to table-major.

``cat_ad_lengths`` holds ``[B][T][n_b]`` lengths (``broadcast_lengths``: ``[B][T]``, one per
request and table, repeated for each of its ``n_b`` ads); the output holds them ``[T][NA]``:

    out[t * OB + a] = cat_ad_lengths[s(t, a)],   s = T bo[b] + t n_b + (a - bo[b])  (or T b + t)

for ``a`` in request ``b`` (``_utils.py``), ``OB = max_batch_size`` where it is > 0 (the ads
``NA <= a < OB`` are zeros) else ``NA = num_ads_in_batch``.  ``T = numel / NA`` (broadcast:
``numel / B``).  Dtypes as upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0): lengths float32,
float16, bfloat16, int32, int64; ``batch_offsets`` int32 or int64.  The output keeps the
lengths' shape where upstream's does (no broadcast, no ``max_batch_size``), else is 1-D.

Where upstream reads outside its buffers or divides by zero (``num_ads_in_batch`` 0, fewer than
2 batch offsets, broadcast lengths not ``B * T``) ours refuses by name; upstream reads memory
flat whatever the strides, ours reads non-contiguous input as the values it shows.  Launches:
``budgets.py``; 0 syncs.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import DataChecks, allocation_of
from fbgemm_npu.native.fbgemm.reorder._utils import (
    ALL_TYPES,
    INDEX_TYPES,
    batch_count,
    check_batch_offsets,
    refuse_dtype,
    same_device,
    slot_sources,
)

__all__ = ["KERNELS", "reorder_batched_ad_lengths_npu"]

LENGTHS = "fbgemm::reorder_batched_ad_lengths"


def _layout(
    lengths: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_lengths: bool,
    max_batch_size: int,
) -> tuple[int, int, tuple[int, ...]]:
    """``(T, OB, output shape)`` from metadata, with upstream's checks (``RuntimeError``) and
    ours where upstream crashes (``ValueError``)."""
    op = LENGTHS
    refuse_dtype(op, "cat_ad_lengths", lengths, ALL_TYPES, NotImplementedError)
    refuse_dtype(op, "batch_offsets", batch_offsets, INDEX_TYPES, NotImplementedError)
    nb = batch_count(op, batch_offsets, num_ads_in_batch)
    n = lengths.numel()
    if max_batch_size > 0:
        if broadcast_lengths:
            raise RuntimeError(f"{op}: 'max_batch_size' > 0 cannot go with broadcast_lengths")
        if max_batch_size < num_ads_in_batch:
            raise RuntimeError(
                f"{op}: argument 'max_batch_size' ({max_batch_size}) must be >= "
                f"num_ads_in_batch ({num_ads_in_batch})"
            )
    per = nb if broadcast_lengths else num_ads_in_batch
    if n % per:
        what = "B = len(batch_offsets) - 1" if broadcast_lengths else "num_ads_in_batch"
        cls = ValueError if broadcast_lengths else RuntimeError  # upstream checks the latter
        raise cls(
            f"{op}: argument 'cat_ad_lengths' must hold T * {what} = k * {per} lengths, got {n}"
        )
    tables = n // per
    ob = max_batch_size if max_batch_size > 0 else num_ads_in_batch
    same_shape = not broadcast_lengths and max_batch_size <= 0
    return tables, ob, tuple(lengths.shape) if same_shape else (tables * ob,)


def reorder_batched_ad_lengths_npu(
    cat_ad_lengths: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_lengths: bool = False,
    max_batch_size: int = 0,
) -> torch.Tensor:
    """``out[t, a] = cat_ad_lengths[s(t, a)]`` (module docstring): one gather by the slot index
    of ``_utils.slot_sources`` (clamped to the lengths), zeros past ``NA`` for
    ``max_batch_size``.

    Launches: the slot index (request-major 8, broadcast 4), ``clamp_`` (not broadcast: its
    slots are in range whatever the data), ``index_select``;
    ``max_batch_size > NA``: ``zeros`` and the ``copy_`` into it.  Checks (queued):
    ``batch_offsets`` non-decreasing from 0 to ``NA``.  Budgets: ``budgets.py``.
    """
    op = LENGTHS
    tables, ob, shape = _layout(
        cat_ad_lengths, batch_offsets, num_ads_in_batch, broadcast_lengths, max_batch_size
    )
    same_device(op, cat_ad_lengths.device, batch_offsets=batch_offsets)
    lens = cat_ad_lengths.detach().reshape(-1)
    if lens.numel() == 0:
        return lens.new_zeros(shape)
    bo = batch_offsets.detach().reshape(-1).contiguous()
    checks = DataChecks(op)
    check_batch_offsets(checks, bo, num_ads_in_batch)
    size = "max_batch_size" if ob > num_ads_in_batch else "num_ads_in_batch"
    with allocation_of(op, f"the output of T * {ob} lengths (argument '{size}')"):
        s, _ = slot_sources(bo, num_ads_in_batch, tables, broadcast_lengths)
        index = s.view(-1) if broadcast_lengths else s.view(-1).clamp_(0, lens.numel() - 1)
        out = lens.index_select(0, index)  # broadcast slots are in range whatever the data
        if ob > num_ads_in_batch:
            full = lens.new_zeros((tables, ob))
            full[:, :num_ads_in_batch].copy_(out.view(tables, num_ads_in_batch))
            out = full
    checks.assert_on_device()
    return out.view(shape)


def _lengths_fake(
    cat_ad_lengths: torch.Tensor,
    batch_offsets: torch.Tensor,
    num_ads_in_batch: int,
    broadcast_lengths: bool = False,
    max_batch_size: int = 0,
) -> torch.Tensor:
    """Meta (upstream registers none): the output's shape from metadata, same checks."""
    _, _, shape = _layout(
        cat_ad_lengths, batch_offsets, num_ads_in_batch, broadcast_lengths, max_batch_size
    )
    return cat_ad_lengths.new_empty(shape)


KERNELS = {LENGTHS: {"PrivateUse1": reorder_batched_ad_lengths_npu, "Meta": _lengths_fake}}
