"""Per-id reductions on npu: ``fbgemm::jagged_acc_weights_and_counts`` and
``fbgemm::jagged_hash_size_cumsum``.

``jagged_acc_weights_and_counts(weights [W], reverse_indices [>= W], U)`` -> ``[U, 2]`` float32::

    out[u, 0] = sum_{i < W, reverse_indices[i] = u} float32(weights[i])
    out[u, 1] = #{i < W : reverse_indices[i] = u}

(upstream's CPU kernel: float32 / float16 / float64 weights, each cast to float32 and added in
float32; int32 / int64 ids; ids past ``W`` are not read).  One ``index_add_`` of the
``[W, 2]`` rows ``(weight, 1)``: float32 adds in another order than upstream's loop, so sums
agree to float32 rounding (counts exactly, below 2**24 per id).

``jagged_hash_size_cumsum(offsets [T * B + 1], indices [N], B)`` -> ``(hash_size_cumsum,
hash_size_offsets)``, both ``[T + 1]`` in the offsets' dtype (upstream registers only a CUDA
kernel; this is its math)::

    T = (offsets.numel() - 1) // B,   seg_t = indices[offsets[t * B] : offsets[(t + 1) * B]]
    hash_size[t] = max(seg_t) + 1 if seg_t is not empty else 0
    hash_size_cumsum = [0, cumsum(hash_size)],   hash_size_offsets = [0, 1, ..., T]

Ids and offsets share one dtype (int32 / int64, as upstream's kernel reads both as ``index_t``).
The segment max is a ``scatter_reduce`` (``amax``) into ``T + 1`` int32 slots (the last takes
the positions outside every segment); int64 ids go in two int32 passes, the high words' max and
then the low words' max among the ids that reach it (no int64 scatter: an AI-CPU route,
docs/hardware.md); the complete cumsum is ours (``asynchronous_complete_cumsum`` on npu: int32
scans, int64 as two int32 words), wrapping where upstream's does.  No sync.

Data checks (queued unless ``FBGEMM_NPU_VALIDATE=0``; every gather / scatter is clamped, so bad
data stays memory-safe): ids in ``[0, U)`` (upstream's CPU kernel writes out of bounds, a
crash for ``U = 0``); segment bounds ``0 <= offsets[t * B] <= offsets[(t + 1) * B] <= N`` (upstream
reads out of bounds or returns ``min + 1``).  Launches:
``BUDGETS`` in ``budgets.py``.
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
from fbgemm_npu.native._index import arange_cached, segment_ids

__all__ = ["KERNELS", "jagged_acc_weights_and_counts_npu", "jagged_hash_size_cumsum_npu"]

ACC = "fbgemm::jagged_acc_weights_and_counts"
HASH_SIZE_CUMSUM = "fbgemm::jagged_hash_size_cumsum"
_WEIGHT_DTYPES = (torch.float32, torch.float16, torch.float64)
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def jagged_acc_weights_and_counts_npu(
    weights: torch.Tensor, reverse_indices: torch.Tensor, num_unique_indices: int
) -> torch.Tensor:
    """``[U, 2]`` float32 per-id weight sums and counts (module docstring).  Launches: the
    float32 cast (other weights), ``zeros``, a one, ``stack``, ``clamp`` of the ids,
    ``index_add_``; checks: ``aminmax`` of the ids and the queued check."""
    op = ACC
    w = check_ndim(op, "weights", check_tensor(op, "weights", weights), (1,))
    ids = check_ndim(
        op, "reverse_indices", check_tensor(op, "reverse_indices", reverse_indices), (1,)
    )
    check_dtype(op, "weights", w, _WEIGHT_DTYPES)
    check_dtype(op, "reverse_indices", ids, INDEX_DTYPES)
    check_same_device(op, weights=w, reverse_indices=ids)
    u = int(num_unique_indices)
    n = w.numel()
    if u < 0:
        raise ValueError(f"{op}: argument 'num_unique_indices' must be >= 0, got {u}")
    if ids.numel() < n:  # upstream reads reverse_indices[i] for every weight
        raise ValueError(
            f"{op}: argument 'reverse_indices' has {ids.numel()} entries, fewer than the "
            f"{n} weights (one id per weight)"
        )
    if n > 0 and u == 0:  # upstream writes out of bounds (a crash)
        raise ValueError(
            f"{op}: argument 'reverse_indices' must hold ids in [0, num_unique_indices) = [0, 0)"
            f", but there are {n} weights"
        )
    out = torch.zeros((u, 2), dtype=torch.float32, device=w.device)
    if n == 0:
        return out
    ids = ids[:n]
    if validation_enabled():
        checks = DataChecks(op)
        lo, hi = torch.aminmax(ids)
        checks.add(lo, 0, None, f"argument 'reverse_indices' must hold ids in [0, {u})")
        checks.add(hi, None, u - 1, f"argument 'reverse_indices' must hold ids in [0, {u})")
        checks.assert_on_device()
    w32 = w if w.dtype == torch.float32 else w.to(torch.float32)
    rows = torch.stack((w32, w32.new_ones(()).expand(n)), 1)  # [W, 2]: (weight, 1)
    return out.index_add_(0, ids.clamp(0, u - 1), rows)


def _segment_max(ids: torch.Tensor, seg: torch.Tensor, slots: int, empty: int) -> torch.Tensor:
    """``[slots]`` int32 max of ``ids`` (int32) per slot ``seg``, ``empty`` where none lands: a
    ``full`` and one ``scatter_reduce`` (``amax``)."""
    out = torch.full((slots,), empty, dtype=torch.int32, device=ids.device)
    return out.scatter_reduce_(0, seg, ids, "amax")


def jagged_hash_size_cumsum_npu(
    offsets: torch.Tensor, indices: torch.Tensor, batch_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hash_size_cumsum, hash_size_offsets)``, ``[T + 1]`` each (module docstring)."""
    op = HASH_SIZE_CUMSUM
    o = check_ndim(op, "offsets", check_tensor(op, "offsets", offsets), (1,))
    idx = check_ndim(op, "indices", check_tensor(op, "indices", indices), (1,))
    check_dtype(op, "offsets", o, INDEX_DTYPES)
    check_dtype(op, "indices", idx, INDEX_DTYPES)
    if idx.dtype != o.dtype:  # upstream's kernel reads both as one index_t
        raise ValueError(
            f"{op}: argument 'indices' ({str(idx.dtype).removeprefix('torch.')}) and 'offsets' "
            f"({str(o.dtype).removeprefix('torch.')}) must have the same dtype"
        )
    check_same_device(op, offsets=o, indices=idx)
    b = int(batch_size)
    if b <= 0:
        raise ValueError(f"{op}: argument 'batch_size' must be > 0, got {b}")
    if o.numel() == 0:
        raise ValueError(f"{op}: argument 'offsets' must have at least one entry (T * B + 1)")
    t = (o.numel() - 1) // b
    n = idx.numel()
    bounds = o[: t * b + 1 : b]  # [T + 1]: feature t's indices are bounds[t] : bounds[t + 1]
    positions = torch.arange(t + 1, dtype=o.dtype, device=o.device)  # hash_size_offsets
    if validation_enabled():
        checks = DataChecks(op)
        checks.add(bounds[:1], 0, None, "argument 'offsets' must be >= 0")
        checks.add(bounds[-1:], None, n, f"argument 'offsets' must not pass indices' end ({n})")
        if t > 0:
            # a comparison, not a difference (which wraps across 2**31 for int32 offsets)
            what = "argument 'offsets' must not decrease between features"
            checks.require(non_decreasing(bounds), what)
        checks.assert_on_device()
    if t == 0 or n == 0:
        return torch.zeros(t + 1, dtype=o.dtype, device=o.device), positions
    b32 = bounds.to(torch.int32) if o.dtype == torch.int64 else bounds
    # segment of each index (T for those outside every feature: before bounds[0] or past
    # bounds[T]), so that slot T absorbs them
    seg = segment_ids(b32, n)
    seg = torch.where(arange_cached(n, o.device) < bounds[:1], t, seg)
    if idx.dtype == torch.int32:
        hs = _segment_max(idx, seg, t + 1, _I32_MIN)[:t].to(torch.int64)
    else:
        high = torch.div(idx, 2**32, rounding_mode="floor")
        top = _segment_max(high.to(torch.int32), seg, t + 1, _I32_MIN)
        low = (idx - high * 2**32 + _I32_MIN).to(torch.int32)  # unsigned order, as int32
        low = torch.where(high == top.index_select(0, seg), low, _I32_MIN)
        bottom = _segment_max(low, seg, t + 1, _I32_MIN)
        hs = top[:t].to(torch.int64) * 2**32 + (bottom[:t].to(torch.int64) - _I32_MIN)
    filled = bounds[1:] > bounds[:-1]
    hs = torch.where(filled, hs + 1, 0).to(o.dtype)  # int32: wraps as upstream's index_t does
    # our npu complete cumsum: int32 scans for int64 too (two words), exact with any wrap
    return torch.ops.fbgemm.asynchronous_complete_cumsum(hs), positions


def _acc_meta(weights: torch.Tensor, reverse_indices: torch.Tensor, num_unique_indices: int):  # type: ignore[no-untyped-def]
    return weights.new_empty((num_unique_indices, 2), dtype=torch.float32)


def _hash_meta(offsets: torch.Tensor, indices: torch.Tensor, batch_size: int):  # type: ignore[no-untyped-def]
    t = (offsets.size(0) - 1) // batch_size
    return offsets.new_empty(t + 1), offsets.new_empty(t + 1)


KERNELS = {
    ACC: {"PrivateUse1": jagged_acc_weights_and_counts_npu, "Meta": _acc_meta},
    HASH_SIZE_CUMSUM: {"PrivateUse1": jagged_hash_size_cumsum_npu, "Meta": _hash_meta},
}
