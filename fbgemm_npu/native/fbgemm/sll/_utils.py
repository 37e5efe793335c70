"""Shared pieces of the sll family: argument checks and the padded ``[B, L]`` row index.

Upstream's SLL CPU kernels (``fbgemm_gpu/sll/cpu/cpu_sll.py``) are Python loops over the batch
that slice ``t[offsets[i] : offsets[i + 1]]``.  Ours pad instead: one ``[B, L]`` (or
``[B, L, L]``) index of the rows each sequence reads, a gather, a batched op, a scatter back.
A slice with ends outside ``[0, rows]`` means something else in Python (negative ends count
from the back, large ones are cut), so every offset is data-checked into ``[0, rows]``; gathers
read clamped rows and scatters write padding to a spare row, so a call whose (queued) check
fails stays inside its buffers (docs/design.md, "Validation without stalls").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_ndim,
    check_on_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached

__all__ = [
    "FLOATS",
    "assert_none_bad",
    "checked",
    "host_int",
    "lengths_arg",
    "offsets_arg",
    "outside",
    "positions",
    "rows_within",
]

# Upstream's bmm / matmul kernels on CPU take these (float64 too, but a 910B has no float64
# matmul or gather on its AI Core: refused by name, docs/hardware.md).
FLOATS: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)


def checked(
    op: str, arg: str, t: object, ndim: int, dtypes: Sequence[torch.dtype] = FLOATS
) -> torch.Tensor:
    """``t`` as a tensor of one of ``dtypes`` with ``ndim`` dims, else a ``ValueError`` naming
    ``op`` and ``arg``; no launch."""
    t = check_tensor(op, arg, t)
    return check_ndim(op, arg, check_dtype(op, arg, t, dtypes), (ndim,))


def offsets_arg(op: str, arg: str, t: object, entries: int | None = None) -> torch.Tensor:
    """1-D int32 / int64 offsets with at least ``entries`` entries (1 when ``None``)."""
    o = checked(op, arg, t, 1, INDEX_DTYPES)
    need = 1 if entries is None else entries
    if o.numel() < need:
        raise ValueError(
            f"{op}: argument '{arg}' must have at least {need} entries, got {o.numel()}"
        )
    return o


def lengths_arg(op: str, arg: str, t: object, entries: int) -> torch.Tensor:
    """1-D int32 / int64 lengths with at least ``entries`` entries."""
    return offsets_arg(op, arg, t, entries)


def host_int(op: str, arg: str, value: object) -> int:
    """A schema ``int`` (a host value; ``bool`` refused as upstream's schema refuses it)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{op}: argument '{arg}' must be an int, got {type(value).__name__}")
    return value


def positions(length: int, device: torch.device) -> torch.Tensor:
    """``arange(length)`` in int64, a view of the shared cache (launch-free once warm)."""
    return arange_cached(length, device)


def outside(o: torch.Tensor, rows: int) -> torch.Tensor:
    """Nonzero where an offset lies outside ``[0, rows]``: a ``lt`` and a ``gt``, one ``logical_or``
    (what a Python slice with such an end means is not the segment the offsets describe)."""
    return (o < 0).logical_or_(o > rows)


def rows_within(idx: torch.Tensor, n: int) -> torch.Tensor:
    """``idx`` clamped into ``[0, n)`` (``n > 0``): one ``clamp``, so no gather leaves a tensor."""
    return idx.clamp(0, n - 1)


def assert_none_bad(op: str, bad: list[torch.Tensor], what: str) -> None:
    """One queued check that every tensor in ``bad`` is all zeros / false: ``cat`` (several
    tensors), ``any``, ``logical_not`` and what ``check_on_device`` adds; nothing when the data
    checks are off."""
    if not bad or not validation_enabled():
        return
    flat = bad[0].reshape(-1) if len(bad) == 1 else torch.cat([b.reshape(-1) for b in bad])
    check_on_device(op, flat.any().logical_not_(), what)
