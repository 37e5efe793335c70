"""``fbgemm::embedding_bag_rowwise_prune`` on npu: drop the rows of a weight matrix whose
indicator is at most a threshold, and map old rows to new ones.

Semantics, read from upstream's CPU kernel (``sparse_ops_cpu.cpp``: ``embedding_bag_rowwise_prune``,
``should_prune``, ATen's ``_rowwise_prune``) and measured on fbgemm-gpu-cpu 1.8.0, for ``n`` rows,
``v_i = |indicator_i|`` (or ``indicator_i`` with ``abs=False``) and ``m = min_num_rows``:

- row ``i`` is kept when ``v_i > threshold`` (float32 against a double: a NaN is dropped), or
  when fewer than ``m`` rows would remain: upstream's loop keeps row ``i`` whenever ``kept_i <
  m`` and ``kept_i + (n - i) <= m`` (``kept_i`` rows kept before it).  That condition only
  grows with ``i`` and, once true, stays true with the rows kept by the threshold alone, so with
  ``c_i`` the inclusive count of ``v > threshold``: keep ``= (v > t) | (c_i + n - i <= m)``
  (a row kept by the threshold is kept anyway; for the others ``c_i = kept_i`` until then);
- with ``min_save_ratio`` given, pruning is skipped when ``4 n + 4 m D >= ratio * 4 n D``
  (upstream's estimate, which counts ``m`` rows, not the kept ones): the weights come back
  whole with the mapping ``[0]``; ours returns a copy (upstream returns ``weight`` itself, an
  alias the schema does not declare);
- otherwise ``(weight[keep], mapping)``, ``mapping_i`` the new row of row ``i`` or ``-1``, of
  ``compressed_indices_dtype`` (int32 / int64).

The kept count sizes the output: the one sync of the op (none on the skip path, which the host
decides from sizes).  The threshold is compared in float32 as ``t32``, the largest float32 not
above it: for a float32 ``v``, ``v > threshold`` (in double, upstream's) exactly when ``v >
t32``.  Rows are moved by one ``index_copy_`` into ``K + 1`` rows, the dropped ones onto a
spare last row (no ``nonzero``, no boolean indexing).
"""

from __future__ import annotations

import numpy as np
import torch

from fbgemm_npu.native._checks import DataChecks, check_same_device, check_tensor, dynamic_size
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native.fbgemm.misc._errors import require, runtime_ndim

__all__ = ["KERNELS", "embedding_bag_rowwise_prune_npu"]

PRUNE = "fbgemm::embedding_bag_rowwise_prune"


def _threshold32(threshold: float) -> float:
    """The largest float32 at most ``threshold`` (module docstring)."""
    with np.errstate(over="ignore"):
        t = np.float32(threshold)
    if float(t) > threshold:
        t = np.nextafter(t, np.float32(-np.inf))
    return float(t)


def should_prune(rows: int, cols: int, min_num_rows: int, ratio: float) -> bool:
    """Upstream's ``should_prune``: 4-byte rows and indices, ``min_num_rows`` rows kept."""
    return rows * 4 + min_num_rows * cols * 4 < ratio * (4 * rows * cols)


def embedding_bag_rowwise_prune_npu(
    weight: torch.Tensor,
    indicator: torch.Tensor,
    threshold: float,
    compressed_indices_dtype: torch.dtype,
    abs: bool = True,  # noqa: A002 - upstream's name
    min_num_rows: int = 0,
    min_save_ratio: float | None = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weight[keep], mapping)`` as upstream (module docstring).

    Dtypes: ``weight`` 2-D of any dtype, ``indicator`` float32 with one value per row, the
    mapping int32 / int64.  Launches: ``abs``, ``gt``, an int32 ``cumsum`` (+ ``sub``, ``le``,
    ``logical_or`` when ``min_num_rows > 0``), the read of the count (the 1 sync), ``sub``,
    ``where`` (the new row or -1), its int64 cast, ``remainder`` (-1 to the spare row),
    ``index_copy_``; the skip path: a copy and one ``fill``.  Budget: ``budgets.py``.
    """
    op = PRUNE
    w = check_tensor(op, "weight", weight).detach()
    ind = check_tensor(op, "indicator", indicator).detach()
    check_same_device(op, weight=w, indicator=ind)
    runtime_ndim(op, "weight", w, (2,))
    rows, cols = w.shape
    require(
        ind.numel() == rows,
        op,
        f"argument 'indicator' must hold one value per row of 'weight' ({rows}), got {ind.numel()}",
    )
    require(threshold >= 0.0, op, f"argument 'threshold' must be >= 0, got {threshold}")
    require(
        compressed_indices_dtype in (torch.int32, torch.int64),
        op,
        "argument 'compressed_indices_dtype' must be int32 or int64, got "
        f"{compressed_indices_dtype}",
    )
    require(
        ind.dtype == torch.float32,
        op,
        f"argument 'indicator' must have dtype float32 (upstream reads floats), got {ind.dtype}",
    )
    m = int(min_num_rows)
    if min_save_ratio is not None and not should_prune(rows, cols, m, float(min_save_ratio)):
        mapping = torch.zeros(1, dtype=compressed_indices_dtype, device=w.device)
        return w.clone(memory_format=torch.contiguous_format), mapping
    if rows == 0:
        return w.new_empty(0, cols), torch.empty(0, dtype=compressed_indices_dtype, device=w.device)
    v = ind.reshape(-1)
    keep = (v.abs() if abs else v).gt(_threshold32(float(threshold)))
    count = torch.cumsum(keep, 0, dtype=torch.int32)
    m = min(m, rows)  # m >= n keeps every row, as m = n does (and m - n stays an int32)
    if m > 0:  # rows forced in by min_num_rows: c_i - i <= m - n
        steps = arange_cached(rows, w.device, torch.int32)
        keep = keep.logical_or_(torch.sub(count, steps).le_(m - rows))
        count = torch.cumsum(keep, 0, dtype=torch.int32)
    kept = DataChecks(op).read_with([count[-1]])[0]
    new_row = count.sub_(1)
    mapping = torch.where(keep, new_row, filled_i32(1, -1, w.device))
    wide = mapping.to(torch.int64)  # index_copy_ takes int64 indices only
    target = torch.remainder(wide, kept + 1)  # -1 (dropped) -> the spare row K
    out = w.new_empty(kept + 1, cols).index_copy_(0, target, w)
    return out[:kept], wide if compressed_indices_dtype == torch.int64 else mapping


def embedding_bag_rowwise_prune_fake(
    weight: torch.Tensor,
    indicator: torch.Tensor,
    threshold: float,
    compressed_indices_dtype: torch.dtype,
    abs: bool = True,  # noqa: A002 - upstream's name
    min_num_rows: int = 0,
    min_save_ratio: float | None = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Meta kernel (upstream registers none): the kept row count is data-dependent
    (``new_dynamic_size``); the skip path's sizes are the host's."""
    rows, cols = weight.shape
    dtype = compressed_indices_dtype
    if min_save_ratio is not None and not should_prune(
        rows, cols, int(min_num_rows), float(min_save_ratio)
    ):
        return weight.new_empty(rows, cols), indicator.new_empty(1, dtype=dtype)
    if rows == 0:
        return weight.new_empty(0, cols), indicator.new_empty(0, dtype=dtype)
    kept = dynamic_size(PRUNE, "the number of rows kept", rows)
    return weight.new_empty(kept, cols), indicator.new_empty(rows, dtype=dtype)


KERNELS = {
    PRUNE: {
        "PrivateUse1": embedding_bag_rowwise_prune_npu,
        "Meta": embedding_bag_rowwise_prune_fake,
    }
}
