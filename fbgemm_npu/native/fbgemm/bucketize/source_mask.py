"""``fbgemm::get_source_mask`` on npu: for each batch element ``b``, ``num_sources[b]`` Trues then
``num_targets[b]`` Falses, concatenated (``output_size`` elements).

Semantics (fbgemm-gpu-cpu 1.8.0's CPU kernel, measured): ``num_sources`` and ``num_targets`` are
1-D int32 / int64 of one length and one dtype (upstream: a RuntimeError otherwise);
``output_size`` is the caller's ``sum(num_sources + num_targets)`` (upstream's Python wrapper
reads it).  Upstream leaves
the tail uninitialised for a larger ``output_size`` and writes past its buffer for a smaller one,
and reads negative counts as they come: ours checks ``output_size == sum`` and the counts
non-negative (queued data checks, ``native/_pending.py``).

The output size is given: no sync.  Interleave the counts (``[s_0, t_0, s_1, t_1, ...]``), take
the segment of each output position among those ``2B`` segments (int32 ``cumsum``, then
``native/_index.segment_ids``: an int32 ``index_add`` of ones at the segment ends and a ``cumsum``,
no ``searchsorted`` / ``repeat_interleave``), and a position is a source where its segment is
even.  The last segment's end is left out, so the ids stay below ``2B`` whatever the data.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_same_dtype,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import segment_ids

__all__ = ["KERNELS", "get_source_mask_npu"]

SOURCE_MASK = "fbgemm::get_source_mask"
LIMIT = 2**31  # int32 scans over the output positions


def get_source_mask_npu(
    num_sources: torch.Tensor, num_targets: torch.Tensor, output_size: int
) -> torch.Tensor:
    """Bool ``[output_size]``: position ``i`` of batch element ``b``'s run is a source iff
    ``i < num_sources[b]``.  Launches: ``stack``, ``cumsum``, ``segment_ids`` (clamp,
    ``index_add``, ``cumsum``), ``remainder``, ``eq``; checks: ``aminmax``, an int64 ``sum`` and
    the queued check.  No sync.  Budgets: ``budgets.py``."""
    op = SOURCE_MASK
    for arg, t in (("num_sources", num_sources), ("num_targets", num_targets)):
        check_tensor(op, arg, t)
        check_dtype(op, arg, t, INDEX_DTYPES)
        check_ndim(op, arg, t, (1,))
    check_same_device(op, num_sources=num_sources, num_targets=num_targets)
    check_same_dtype(op, num_sources=num_sources, num_targets=num_targets)  # as upstream
    if num_sources.numel() != num_targets.numel():
        raise ValueError(
            f"{op}: arguments 'num_sources' ({num_sources.numel()}) and 'num_targets' "
            f"({num_targets.numel()}) must have the same batch size"
        )
    n = int(output_size)
    if not 0 <= n < LIMIT:
        raise ValueError(f"{op}: argument 'output_size' must be in [0, 2**31), got {n}")
    dev = num_sources.device
    counts = torch.stack([num_sources, num_targets], 1).view(-1)  # [s_0, t_0, s_1, t_1, ...]
    if validation_enabled() and counts.numel() > 0:
        checks = DataChecks(op)
        lo, _ = torch.aminmax(counts)
        checks.add(lo, 0, None, "arguments 'num_sources' and 'num_targets' must be non-negative")
        total = counts.sum(dtype=torch.int64)
        what = "argument 'output_size' must equal sum(num_sources + num_targets)"
        checks.add(total, n, n, what)
        checks.assert_on_device()
    if counts.numel() == 0 and n != 0:  # no batch element: the sum is 0, known on the host
        raise ValueError(
            f"{op}: argument 'output_size' must equal sum(num_sources + num_targets) = 0, got {n}"
        )
    if n == 0:
        return torch.empty(0, dtype=torch.bool, device=dev)
    # bounds[1:] = the ends of segments 0 .. 2B - 2: the last end is left out (ids < 2B)
    bounds = torch.empty(counts.numel(), dtype=torch.int32, device=dev)
    torch.cumsum(counts[:-1], 0, dtype=torch.int32, out=bounds[1:])
    seg = segment_ids(bounds, n)
    return torch.eq(torch.remainder(seg, 2), 0)


KERNELS = {SOURCE_MASK: {"PrivateUse1": get_source_mask_npu}}
