"""Argument checks and the distinct-row plan shared by the fused sparse optimizers.

``indices`` name rows of ``var [rows, D]``; an index ``< 0`` or ``>= rows`` names no row and is
skipped (Rec SDK skips them on its gather path; a kernel never reads or writes outside ``var``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native._checks import check_dtype, check_ndim, check_same_device, check_tensor
from fbgemm_npu.native.fbgemm.tbe.backward import sort_keys

__all__ = ["Distinct", "check_update", "distinct_rows"]

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)


def check_update(
    op: str, var: object, gradient: object, indices: object, lr: object, **state: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """``var [rows, D]`` float; ``gradient [n, D]`` of var's dtype; ``indices [n]`` or
    ``[n, 1]`` int32 / int64; ``lr`` a float 0-d or 1-element tensor; ``state`` tensors of
    var's shape and dtype; all on var's device.  Returns them with indices flattened."""
    v = check_ndim(op, "var", check_tensor(op, "var", var), (2,))
    check_dtype(op, "var", v, FLOAT_DTYPES)
    g = check_ndim(op, "gradient", check_tensor(op, "gradient", gradient), (2,))
    check_dtype(op, "gradient", g, (v.dtype,))
    idx = check_tensor(op, "indices", indices)
    check_dtype(op, "indices", idx, INDEX_DTYPES)
    if not (idx.dim() == 1 or (idx.dim() == 2 and idx.size(1) == 1)):
        raise ValueError(f"{op}: argument 'indices' must be [n] or [n, 1]; got {list(idx.shape)}")
    idx = idx.reshape(-1)
    if g.size(0) != idx.numel() or g.size(1) != v.size(1):
        raise ValueError(
            f"{op}: argument 'gradient' must be [len(indices), var.size(1)] = "
            f"{[idx.numel(), v.size(1)]}; got {list(g.shape)}"
        )
    rate = check_tensor(op, "lr", lr)
    check_dtype(op, "lr", rate, FLOAT_DTYPES)
    if rate.numel() != 1:
        raise ValueError(f"{op}: argument 'lr' must hold one value; got shape {list(rate.shape)}")
    states = {}
    for name, t in state.items():
        s = check_tensor(op, name, t)
        if s.shape != v.shape or s.dtype != v.dtype:
            raise ValueError(
                f"{op}: argument '{name}' must have var's shape {list(v.shape)} and dtype; got "
                f"{list(s.shape)} {s.dtype}"
            )
        states[name] = s
    check_same_device(op, var=v, gradient=g, indices=idx, lr=rate, **states)
    return v, g, idx, rate.reshape(()), states


def valid_rows(idx: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(clamped index, valid)``: the index clamped into ``[0, rows)`` and whether it was
    there already (2 launches)."""
    clamped = idx.clamp(0, max(rows - 1, 0))
    return clamped, clamped == idx


@dataclass
class Distinct:
    """The distinct rows of a call: slot ``k`` (``n`` slots) holds row ``row[k]`` and the sum
    ``grad[k]`` of the gradients of every index naming it; ``skip[k]`` marks a slot with no row
    (past the last distinct row, or the skipped indices' slot)."""

    row: torch.Tensor  # [n] int64, clamped into var
    grad: torch.Tensor  # [n, D] float32
    skip: torch.Tensor  # [n] bool


def distinct_rows(idx: torch.Tensor, g: torch.Tensor, rows: int) -> Distinct:
    """Duplicates folded: the indices sorted as float keys (``row + 1``; 0 for a skipped index,
    exact below ``2**24`` rows: ``sort_keys``), runs numbered by an int32 cumsum, each run's
    gradients summed by one ``index_add_`` and its row written by one ``index_copy_``.  No
    integer sort, no ``unique`` (AI CPU on a 910B).  Launches: about 14."""
    n, dev = idx.numel(), idx.device
    clamped, ok = valid_rows(idx, rows)
    if rows + 1 > 2**24:  # the two-digit float sort takes int64 keys
        clamped = clamped.to(torch.int64)
    key = (clamped + 1) * ok  # 0: a skipped index
    key_sorted, perm = sort_keys(key, rows + 1)
    starts = torch.ones(n, dtype=torch.bool, device=dev)
    torch.ne(key_sorted[1:], key_sorted[:-1], out=starts[1:])
    run = torch.cumsum(starts, 0, dtype=torch.int32) - 1  # slot of each sorted index, from 0
    grad = torch.zeros(n, g.size(1), dtype=torch.float32, device=dev)
    grad.index_add_(0, run, g.index_select(0, perm).to(torch.float32))
    row = torch.full((n,), -1, dtype=torch.int64, device=dev)
    row.index_copy_(0, run.to(torch.int64), key_sorted.to(torch.int64) - 1)
    skip = row < 0  # unused slots keep -1; the skipped indices' key 0 gives -1 too
    return Distinct(row.clamp_(min=0), grad, skip)
