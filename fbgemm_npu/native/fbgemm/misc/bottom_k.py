"""``fbgemm::bottom_k_per_row`` on npu: ``k`` values of each row of an int64 matrix, the first
``k`` or the first ``k`` distinct (upstream's zipf index generator, ``tbe/utils/requests.py``).

Semantics, read from upstream's CPU kernel (``sparse_ops_cpu.cpp``: ``bottom_k_per_row``) and
measured on fbgemm-gpu-cpu 1.8.0: ``input`` (int64) is read as ``R = numel / C`` rows of its last
size ``C``; ``k_offsets`` (int64) of two values means one ``k = k_offsets[1] - k_offsets[0]``
for every row (output reshaped to ``(input.size(0), -1, k)``), else row ``r`` gives ``k_r =
k_offsets[r + 1] - k_offsets[r]`` values at ``k_offsets[r]`` of a 1-D output of
``k_offsets[-1]``.  ``requires_unique=False``: the row's first ``k`` values, in order.
``requires_unique=True``: the first ``k`` *distinct* values met scanning the row (a
``std::set`` filled until it holds ``k``), in ascending order; fewer than ``k`` distinct values
raise ``RuntimeError("too skewed distribution (alpha too big)")``.  Not "bottom" unless the rows
are sorted, as upstream's callers make them.

Where upstream reads out of bounds or leaves memory unwritten -- ``k > C`` without
``requires_unique``, a variable ``k_offsets`` not starting at 0 or not of ``R + 1`` values --
ours refuses by name; ``k < 0`` raises as upstream does.  The output size is data: the one sync
reads ``k`` (or ``k_offsets[-1]``) with every bound above (and the least distinct count less
``k_r``), so every error is raised at the call, as upstream's.

Program (no sort: integer sort is AI CPU on a 910B): the first ``k`` values are a slice (fixed
``k``) or a gather at ``row * C + (p - k_offsets[row])``, rows by segment-id marks.  Distinct
values by comparison, ``[R, C, C]`` booleans (memory ``O(R C**2)``; upstream's rows are a few
hundred wide at most): ``x[j]`` is a first occurrence when no earlier ``x[j'] == x[j]``; its
rank among them is an int32 ``cumsum``; the first ``k_r`` are kept, and a kept value's place in
ascending order is the number of kept values below it (the kept values are distinct); one
``index_copy_`` scatters them, the others onto a spare last element.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_same_device,
    check_tensor,
    dynamic_size,
)
from fbgemm_npu.native._index import arange_cached, segment_ids
from fbgemm_npu.native.fbgemm.misc._errors import require, runtime_dtype

__all__ = ["KERNELS", "bottom_k_per_row_npu"]

BOTTOM_K = "fbgemm::bottom_k_per_row"
SKEWED = "too skewed distribution (alpha too big)"


def _distinct(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(first, rank)`` of the ``[R, C]`` rows: ``first[r, j]`` when ``x[r, j]`` occurs first
    there, ``rank`` its 0-based number among the first occurrences (int32)."""
    rows, cols = x.shape
    steps = arange_cached(cols, x.device, torch.int32)
    earlier = steps.unsqueeze(0) < steps.unsqueeze(1)  # [j, j']: j' before j
    with allocation_of(BOTTOM_K, f"the [{rows}, {cols}, {cols}] comparisons of 'input' rows"):
        seen = (x.unsqueeze(2) == x.unsqueeze(1)).logical_and_(earlier).any(2)
    first = seen.logical_not_()
    rank = torch.cumsum(first, 1, dtype=torch.int32).sub_(1)
    return first, rank


def _unique_rows(
    x: torch.Tensor,
    first: torch.Tensor,
    rank: torch.Tensor,
    k_rows: torch.Tensor,
    starts: torch.Tensor,
    total: int,
) -> torch.Tensor:
    """The kept first occurrences (rank below ``k_rows``), sorted per row, at ``starts``."""
    kept = first.logical_and_(rank < k_rows.unsqueeze(1))
    with allocation_of(BOTTOM_K, f"the {tuple(x.shape) + x.shape[-1:]} comparisons of 'input'"):
        below = (x.unsqueeze(1) < x.unsqueeze(2)).logical_and_(kept.unsqueeze(1)).sum(2)
    place = torch.where(kept, below.add_(starts.unsqueeze(1)), total)
    out = x.new_empty(total + 1)
    return out.index_copy_(0, place.view(-1), x.reshape(-1))[:total]


def bottom_k_per_row_npu(
    input: torch.Tensor,  # noqa: A002 - upstream's name
    k_offsets: torch.Tensor,
    requires_unique: bool,
) -> torch.Tensor:
    """The selected values (module docstring): int64, ``(input.size(0), -1, k)`` or 1-D.

    Launches: fixed ``k``: ``sub`` and the read (the 1 sync), a copy of ``x[:, :k]``; unique:
    the distinct ranks (``lt``, ``eq``, ``logical_and_``, ``any``, ``logical_not_``,
    ``cumsum``, ``sub_``, the least count ``amin``), ``lt``, ``logical_and_``, ``lt``,
    ``logical_and_``, ``sum``, ``add_``, ``where``, ``index_copy_`` (and the row starts);
    variable ``k``: the per-row ``k`` (``sub``, ``aminmax``), the row of each output (segment
    ids: 3), its start, the gather.  Budget: ``budgets.py``.
    """
    op = BOTTOM_K
    x = check_tensor(op, "input", input).detach()
    ko = check_tensor(op, "k_offsets", k_offsets).detach()
    check_same_device(op, input=x, k_offsets=ko)
    runtime_dtype(op, "input", x, (torch.int64,))
    runtime_dtype(op, "k_offsets", ko, (torch.int64,))
    require(x.dim() >= 1, op, "argument 'input' must have at least one dimension")
    require(ko.dim() == 1, op, f"argument 'k_offsets' must be 1-D, got {ko.dim()}-D")
    cols = x.size(-1)
    rows = x.numel() // cols if cols else 0
    x2 = x.reshape(rows, cols)
    fixed = ko.numel() == 2
    require(
        fixed or ko.numel() == rows + 1,
        op,
        f"argument 'k_offsets' must hold 2 values (one k) or one per row plus one ({rows + 1}), "
        f"got {ko.numel()}",
    )
    if fixed:
        return _fixed(x, x2, ko, bool(requires_unique))
    return _variable(x2, ko, bool(requires_unique))


def _read(values: list[torch.Tensor]) -> list[int]:
    """The one sync: ``values`` and the queued data checks in one copy."""
    return DataChecks(BOTTOM_K).read_with(values)


def _fixed(x: torch.Tensor, x2: torch.Tensor, ko: torch.Tensor, unique: bool) -> torch.Tensor:
    op, (rows, cols) = BOTTOM_K, x2.shape
    k_dev = ko[1] - ko[0]
    if unique and rows > 0 and cols > 0:
        first, rank = _distinct(x2)
        k, fewest = _read([k_dev, rank[:, -1].amin()])
        require(k >= 0, op, f"argument 'k_offsets' must give k >= 0, got {k}")
        require(
            fewest + 1 >= k,
            op,
            f"{SKEWED}: a row of 'input' has {fewest + 1} distinct values, fewer than k = {k}",
        )
        starts = arange_cached(rows, x.device).mul(k)
        out = _unique_rows(x2, first, rank, k_dev.expand(rows), starts, rows * k)
    else:
        (k,) = _read([k_dev])
        require(k >= 0, op, f"argument 'k_offsets' must give k >= 0, got {k}")
        require(
            unique or k <= cols,
            op,
            f"argument 'k_offsets' gives k = {k}, more than the {cols} values of a row of 'input'",
        )
        require(not unique or k == 0 or rows == 0, op, f"{SKEWED}: 'input' has empty rows")
        out = x2[:, :k].clone(memory_format=torch.contiguous_format)  # never a view of input
    require(
        k > 0 and x.size(0) > 0,
        op,
        "the output (input.size(0), -1, k) needs k > 0 and "
        f"input.size(0) > 0 (upstream's reshape), got k = {k}",
    )
    return out.reshape(x.size(0), -1, k)


def _variable(x2: torch.Tensor, ko: torch.Tensor, unique: bool) -> torch.Tensor:
    op, (rows, cols) = BOTTOM_K, x2.shape
    k_rows = ko[1:] - ko[:-1]
    least, most = torch.aminmax(k_rows) if rows else (ko[0], ko[0])
    values = [ko[-1], ko[0], least, most]
    if unique and cols > 0:
        first, rank = _distinct(x2)
        values.append((rank[:, -1] + 1 - k_rows).amin())
    got = _read(values)
    total, start, least_k, most_k = got[:4]
    require(start == 0, op, f"argument 'k_offsets' must start at 0, got {start}")
    require(least_k >= 0, op, "argument 'k_offsets' must be non-decreasing (k >= 0 per row)")
    if unique:
        spare = got[4] if cols > 0 else -most_k
        require(spare >= 0, op, f"{SKEWED}: a row of 'input' has fewer distinct values than its k")
        if cols == 0 or total == 0:
            return x2.new_empty(total)
        return _unique_rows(x2, first, rank, k_rows, ko[:-1], total)
    require(
        most_k <= cols,
        op,
        f"argument 'k_offsets' gives a k of {most_k}, more than the "
        f"{cols} values of a row of 'input'",
    )
    if total == 0:
        return x2.new_empty(0)
    row = segment_ids(ko, total).to(torch.int64)  # each output's row
    col = arange_cached(total, x2.device) - ko.index_select(0, row)
    flat = row.mul_(cols).add_(col).clamp_(0, x2.numel() - 1)
    return x2.reshape(-1).index_select(0, flat)


def bottom_k_per_row_fake(
    input: torch.Tensor,  # noqa: A002 - upstream's name
    k_offsets: torch.Tensor,
    requires_unique: bool,
) -> torch.Tensor:
    """Meta kernel (upstream registers none): ``k`` (or ``k_offsets[-1]``) is data, so the size
    is ``new_dynamic_size``; the fixed-k output is ``(input.size(0), R / input.size(0), k)``."""
    cols = input.size(-1)
    rows = input.numel() // cols if cols else 0
    if k_offsets.numel() != 2:
        return input.new_empty(dynamic_size(BOTTOM_K, "k_offsets[-1] values"))
    require(input.size(0) > 0, BOTTOM_K, "argument 'input' must not be empty")
    k = dynamic_size(BOTTOM_K, "k = k_offsets[1] - k_offsets[0]")
    return input.new_empty(input.size(0), rows // input.size(0), k)


KERNELS = {BOTTOM_K: {"PrivateUse1": bottom_k_per_row_npu, "Meta": bottom_k_per_row_fake}}
