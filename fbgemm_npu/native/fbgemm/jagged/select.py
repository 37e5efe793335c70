"""Per-segment selection on npu: ``fbgemm::masked_select_jagged_1d`` and
``fbgemm::jagged_1d_to_truncated_values``.

``masked_select_jagged_1d(values [N], lengths [B], mask [M] bool, check_length)``: with
``T = sum(lengths)`` and ``off`` the exclusive cumsum of the lengths::

    masked_values  = values[i] for i < T with mask[i], in order        [#selected]
    masked_lengths[b] = #{i in [off[b], off[b] + lengths[b]) : mask[i]}   (lengths' dtype)

``check_length`` requires ``M == N`` (upstream's check).  Upstream sizes its output by
``mask.sum()`` over the whole mask and leaves the entries of true mask values past ``T``
uninitialised: ours refuses such a mask (a data check naming ``mask``), so the size is the
selected count either way.  The k-th selected index is the number of positions whose inclusive
mask count is ``<= k`` (:func:`~fbgemm_npu.native._index.segment_ids` over the mask's complete
int32 cumsum: no ``nonzero`` / ``masked_select``), then one gather.

``jagged_1d_to_truncated_values(values [N], lengths [B], L)``: the first ``min(L, lengths[b])``
values of every segment, packed (``L`` as upstream casts it to the lengths' dtype; a negative one
is refused where any segment exists, as upstream's negative size is).

Dtypes (upstream's): values float32, float16, bfloat16, int32, int64; lengths int32 / int64.
Both output sizes are data: ONE sync each reads the size with this call's data checks
(:meth:`DataChecks.read_with`): ``lengths >= 0``, each and their sum below 2**31 (the int32
scans), rows read inside ``values`` (and ``mask``); upstream reads past them.  Rows are clamped,
so bad data stays memory-safe with the checks off.  Launches: ``BUDGETS`` in ``budgets.py``.
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
    dynamic_size,
    validation_enabled,
)
from fbgemm_npu.native._index import segment_ids
from fbgemm_npu.native.fbgemm.jagged._segments import check_lengths_data, ends_i32, segment_rows
from fbgemm_npu.native.fbgemm.jagged._utils import JAGGED_DTYPES

__all__ = ["KERNELS", "jagged_1d_to_truncated_values_npu", "masked_select_jagged_1d_npu"]

MASKED_SELECT = "fbgemm::masked_select_jagged_1d"
TRUNCATED = "fbgemm::jagged_1d_to_truncated_values"


def _inputs(op: str, values: object, lengths: object) -> tuple[torch.Tensor, torch.Tensor]:
    v = check_ndim(op, "values", check_tensor(op, "values", values), (1,))
    lens = check_ndim(op, "lengths", check_tensor(op, "lengths", lengths), (1,))
    check_dtype(op, "lengths", lens, INDEX_DTYPES)
    check_dtype(op, "values", v, JAGGED_DTYPES)
    return v, lens


def masked_select_jagged_1d_npu(
    values: torch.Tensor,
    lengths: torch.Tensor,
    mask: torch.Tensor,
    check_length: bool | None = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(masked_values, masked_lengths)`` (module docstring).  Launches: the lengths' bounds
    (:func:`ends_i32`), the mask's int32 cast, ``zeros`` and ``cumsum``, ``clamp`` of both bounds,
    their two gathers, ``sub`` (and the lengths' dtype cast), the read (the sync), then
    ``segment_ids``, ``clamp_`` and the gather of the values."""
    op = MASKED_SELECT
    v, lens = _inputs(op, values, lengths)
    m = check_ndim(op, "mask", check_tensor(op, "mask", mask), (1,))
    check_dtype(op, "mask", m, (torch.bool,))
    check_same_device(op, values=v, lengths=lens, mask=m)
    if check_length and m.numel() != v.numel():
        raise ValueError(
            f"{op}: argument 'mask' has {m.numel()} entries but 'values' has {v.numel()} "
            "(check_length=True: they must match)"
        )
    n, size = v.numel(), m.numel()
    if size > 2**31 - 1:
        raise ValueError(f"{op}: argument 'mask' has {size} >= 2**31 entries (int32 counts)")
    if lens.numel() == 0:  # no rows: nothing is selected (a true mask entry has no row)
        if validation_enabled() and size > 0:
            checks = DataChecks(op)
            what = "argument 'mask' is true past the rows (sum(lengths) = 0)"
            checks.require(m.any().logical_not_(), what)
            checks.assert_on_device()
        return v.new_empty(0), torch.empty_like(lens)
    starts, ends = ends_i32(lens)
    counts = m.new_zeros(size + 1, dtype=torch.int32)  # counts[i]: true entries before i
    torch.cumsum(m.to(torch.int32), 0, dtype=torch.int32, out=counts[1:])
    below = counts.index_select(0, ends.clamp(0, size))
    masked_lengths = below - counts.index_select(0, starts.clamp(0, size))
    checks = DataChecks(op)
    if validation_enabled():
        check_lengths_data(checks, lens, "lengths")
        rows = ends[-1:]  # sum(lengths): every row up to it is read (values where mask is true)
        checks.add(rows, None, size, f"argument 'lengths' sums past the mask's end ({size})")
        checks.add(rows, None, n, f"argument 'lengths' sums past values' end ({n})")
        past = counts[-1:] - below[-1:]  # true entries past the rows: upstream's garbage
        checks.add(past, 0, 0, "argument 'mask' is true past the rows (sum(lengths))")
    (total,) = checks.read_with([below[-1]])  # the one sync: the selected count
    out_lengths = masked_lengths if lens.dtype == torch.int32 else masked_lengths.to(lens.dtype)
    if total == 0 or n == 0:  # (n == 0 with a selection: only with the checks off)
        return v.new_zeros(total), out_lengths
    # the k-th selected index: #{i : counts[i + 1] <= k} (counts[1:] the inclusive counts)
    picked = segment_ids(counts, total).clamp_(0, n - 1)
    return v.index_select(0, picked), out_lengths


def _max_length(op: str, max_truncated_length: object, dtype: torch.dtype) -> int:
    """``L`` as upstream casts it to the lengths' index type (``static_cast<index_t>``)."""
    value = int(max_truncated_length)  # type: ignore[call-overload]
    if dtype == torch.int32:
        value = (value + 2**31) % 2**32 - 2**31
    return value


def jagged_1d_to_truncated_values_npu(
    values: torch.Tensor, lengths: torch.Tensor, max_truncated_length: int
) -> torch.Tensor:
    """The first ``min(L, lengths[b])`` values of every segment, packed (module docstring).
    Launches: ``clamp`` (the kept lengths), the bounds of both (:func:`ends_i32`), the base
    ``sub``, the checks' statistics and the read (the one sync), :func:`segment_rows`, one
    ``index_select``."""
    op = TRUNCATED
    v, lens = _inputs(op, values, lengths)
    check_same_device(op, values=v, lengths=lens)
    length = _max_length(op, max_truncated_length, lens.dtype)
    if lens.numel() == 0:
        return v.new_empty(0)
    if length < 0:  # upstream: "negative dimension"
        raise ValueError(
            f"{op}: argument 'max_truncated_length' must be >= 0, got {max_truncated_length}"
            + (f" (as int32: {length})" if length != max_truncated_length else "")
        )
    n = v.numel()
    kept = lens.clamp(0, length)
    in_starts, _ = ends_i32(lens)
    out_starts, out_ends = ends_i32(kept)
    checks = DataChecks(op)
    if validation_enabled():
        check_lengths_data(checks, lens, "lengths")
        beyond = torch.where(kept > 0, in_starts + kept, 0).amax()  # one past the last read
        checks.add(beyond, None, n, f"argument 'lengths': a row read lies past values' end ({n})")
    (total,) = checks.read_with([out_ends[-1]])  # the one sync: the output size
    if total == 0 or n == 0:
        return v.new_zeros(total)
    return v.index_select(0, segment_rows(out_starts, in_starts - out_starts, total, n))


def _truncated_meta(
    values: torch.Tensor, lengths: torch.Tensor, max_truncated_length: int
) -> torch.Tensor:
    """Upstream registers none: the size is data (``sum(min(L, lengths))``)."""
    return values.new_empty(dynamic_size(TRUNCATED, "the sum of the kept lengths", values.numel()))


KERNELS = {
    MASKED_SELECT: {"PrivateUse1": masked_select_jagged_1d_npu},
    TRUNCATED: {"PrivateUse1": jagged_1d_to_truncated_values_npu, "Meta": _truncated_meta},
}
