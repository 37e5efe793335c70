"""Argument and data checks shared by ``mxrec::concat_2d_jagged`` and ``mxrec::split_2d_jagged``
(host checks: no launch; data checks: queued, see ``offsets_ok``)."""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
)
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native._upload import upload

__all__ = ["VALUE_DTYPES", "dense_offsets", "offsets_ok", "check_offsets", "check_sizes"]

# Rec SDK: float32 / float16 / bfloat16 / int32; int64 too (the ops only move rows)
VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)


def check_sizes(op: str, **sizes: object) -> None:
    """SymInt / int arguments that must be ``>= 0`` (a symbolic size is left to the trace)."""
    for name, v in sizes.items():
        if isinstance(v, int) and v < 0:
            raise ValueError(f"{op}: argument '{name}' must be >= 0, got {v}")


def check_offsets(op: str, offsetA: object, offsetB: object) -> tuple[torch.Tensor, torch.Tensor]:
    """1-D integer offsets of one length ``B + 1 >= 2``; an empty one marks a dense side (not
    both).  Returns them."""
    oa = check_dtype(
        op,
        "offsetA",
        check_ndim(op, "offsetA", check_tensor(op, "offsetA", offsetA), (1,)),
        INDEX_DTYPES,
    )
    ob = check_dtype(
        op,
        "offsetB",
        check_ndim(op, "offsetB", check_tensor(op, "offsetB", offsetB), (1,)),
        INDEX_DTYPES,
    )
    if oa.numel() == 0 and ob.numel() == 0:
        raise ValueError(
            f"{op}: arguments 'offsetA' and 'offsetB' are both empty: at most one side may be "
            "dense (an empty offsets tensor), the other gives the batch size"
        )
    for name, o in (("offsetA", oa), ("offsetB", ob)):
        if o.numel() == 1:
            raise ValueError(
                f"{op}: argument '{name}' must have length B + 1 >= 2 (or 0: a dense side), got 1"
            )
    if oa.numel() and ob.numel() and oa.numel() != ob.numel():
        raise ValueError(
            f"{op}: arguments 'offsetA' ({oa.numel()}) and 'offsetB' ({ob.numel()}) must have "
            "the same length B + 1"
        )
    check_same_device(op, offsetA=oa, offsetB=ob)
    return oa, ob


def dense_offsets(batches: int, rows: int, like: torch.Tensor) -> torch.Tensor:
    """``rows * arange(B + 1)`` in ``like``'s dtype (the other side's offsets: no mixed dtypes
    to widen): the offsets of a dense side of ``rows`` rows per batch (1 launch, a ``mul`` of
    the cached arange)."""
    return arange_cached(batches + 1, like.device, like.dtype) * rows


def offsets_ok(offsets: list[torch.Tensor], bounds: list[int] | None) -> torch.Tensor:
    """0-d bool: every tensor of ``offsets`` (one length) starts at 0, never decreases and, with
    ``bounds``, ends at most at its bound.  One comparison of neighbours over the rows
    ``[0, o_0, 0, o_1, ..., o_B (, bound)]``: non-decreasing exactly when ``0 <= o_0 <= 0 <= o_1
    <= ... <= o_B <= bound``.  Compared, never subtracted: no int32 wrap.  Launches: the
    bounds' upload (none without bounds: cached zeros), one ``cat`` of the rows, ``ge``,
    ``all``."""
    dev = offsets[0].device
    if bounds is None:
        zero = filled_i32(1, 0, dev)
        pieces = [p for o in offsets for p in (zero, o[:1], zero, o[1:])]
    else:
        u = upload([[0, 0, b] for b in bounds], torch.int64, dev)
        pieces = [
            p for k, o in enumerate(offsets) for p in (u[k, :1], o[:1], u[k, 1:2], o[1:], u[k, 2:])
        ]
    rows = torch.cat(pieces).view(len(offsets), -1)
    return torch.ge(rows[:, 1:], rows[:, :-1]).all()
