"""Argument checks shared by the pruning ops: the ``indices`` / ``offsets`` of a TBE batch
(``T * B + 1`` offsets, table ``t`` reads ``indices[offsets[t B] : offsets[(t + 1) B]]``) and
the per-table ``[T + 1]`` int64 offsets into the hash table or remapping array.

Upstream's checks (``TENSORS_HAVE_SAME_SCALAR_TYPE``, the int64 accessor, ``B > 0``) raise
``RuntimeError``; ours raise it too, naming the op and the argument.  ``T = 0`` (a one-element
table offsets) divides by zero in upstream's kernel (SIGFPE); ours refuses it.  The data
conditions (monotone offsets covering every index, table offsets inside the table) are upstream's
memory safety: it reads out of bounds or leaves outputs unwritten without them.
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
)
from fbgemm_npu.native._index import segment_ids

__all__ = ["batch_layout", "check_table_offsets", "index_tables", "offsets_checks"]


def batch_layout(
    op: str,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    table_offsets: torch.Tensor,
    table_offsets_name: str,
) -> tuple[int, int]:
    """``(T, B)`` after the host checks of ``indices``, ``offsets`` and the table offsets."""
    for name, t in (
        ("indices", indices),
        ("offsets", offsets),
        (table_offsets_name, table_offsets),
    ):
        check_tensor(op, name, t)
    check_same_device(op, indices=indices, offsets=offsets, **{table_offsets_name: table_offsets})
    check_dtype(op, "indices", indices, INDEX_DTYPES)
    check_dtype(op, "offsets", offsets, INDEX_DTYPES)
    if indices.dtype != offsets.dtype:
        raise RuntimeError(
            f"{op}: arguments 'indices' ({indices.dtype}) and 'offsets' ({offsets.dtype}) must "
            "have the same dtype"
        )
    check_ndim(op, "offsets", offsets, (1,))
    if table_offsets.dtype != torch.int64:
        raise RuntimeError(
            f"{op}: argument '{table_offsets_name}' must have dtype int64, got "
            f"{table_offsets.dtype}"
        )
    check_ndim(op, table_offsets_name, table_offsets, (1,))
    T = table_offsets.numel() - 1
    if T < 1:
        raise ValueError(
            f"{op}: argument '{table_offsets_name}' must hold T + 1 >= 2 offsets (T tables), "
            f"got {table_offsets.numel()}"
        )
    B = (offsets.numel() - 1) // T
    if B <= 0:
        raise RuntimeError(
            f"{op}: argument 'offsets' must hold T * B + 1 offsets with B > 0 (T = {T}), got "
            f"{offsets.numel()}"
        )
    return T, B


def offsets_checks(
    checks: DataChecks, offsets: torch.Tensor, n: int, T: int, B: int, every: bool
) -> torch.Tensor:
    """Queue the conditions on ``offsets`` and return the ``T + 1`` table bounds
    ``offsets[0 : T B + 1 : B]``.  ``every``: all of ``offsets[: T B + 1]`` must be monotone (the
    hash lookup walks every bag), else only the table bounds (the array lookup reads no other).
    ``offsets[0] == 0`` and ``offsets[T B] == indices.numel()``: upstream leaves the indices
    outside unwritten (``empty_like``) or reads past them.  Launches: 3 or 4 (slices are views)."""
    bounds = offsets[: T * B + 1 : B]
    checks.add(offsets[0], 0, 0, "argument 'offsets' must start at 0")
    checks.add(
        offsets[T * B], n, n, f"argument 'offsets' must end (at offsets[T * B]) at {n} indices"
    )
    mono = offsets[: T * B + 1] if every else bounds
    checks.require(non_decreasing(mono), "argument 'offsets' must be non-decreasing")
    return bounds


def check_table_offsets(checks: DataChecks, name: str, t: torch.Tensor, size: int) -> None:
    """Queue ``0 <= t[0] <= ... <= t[T] <= size`` (``size``: the rows the offsets index)."""
    checks.add(t[0], 0, None, f"argument '{name}' must start at 0 or later")
    checks.add(t[-1], None, size, f"argument '{name}' must end within the {size} rows")
    checks.require(non_decreasing(t), f"argument '{name}' must be non-decreasing")


def index_tables(bounds: torch.Tensor, n: int, T: int) -> torch.Tensor:
    """The table of each of the ``n`` indices (int32, clamped into ``[0, T)`` so bad offsets
    stay in the per-table gathers): segment ids over ``bounds``.  Launches: 4."""
    return segment_ids(bounds, n).clamp_(0, T - 1)
