"""Argument checks and the concatenations shared by the input-combine ops.

Every op of the family joins per-table lists (``indices_list``, ``offsets_list`` /
``lengths_list``, ``per_sample_weights``) into one int32 indices tensor, one int32 offsets (or
lengths) tensor and one float32 weights tensor.  The lists are schema arguments: a loop over them
builds a list of views on the host, and each output is one ``cat`` of those views written into
a buffer of the output dtype (``cat(..., out=)`` casts int64 pieces to int32 as upstream's
``static_cast<int32_t>`` does: the low 32 bits).  Runs of zeros and ones are views of cached
buffers (``native/_index.py``), so a warm call launches no fill.

Upstream's CPU checks (fbgemm-gpu-cpu 1.8.0, ``input_combine_cpu.cpp``) are kept, as
``ValueError`` naming the op and the list element: non-empty lists of one length, int32 / int64
1-D indices and offsets, weights either empty or float32 1-D with one weight per index.  Upstream
also requires contiguous CPU tensors; ours takes any strides on the npu device (``cat`` reads
them), with every tensor on one device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_ndim,
    check_tensor,
    dtype_name,
)
from fbgemm_npu.native._index import filled_i32

__all__ = [
    "INT32_LIMIT",
    "ZEROS_CACHE_LIMIT",
    "cat_into",
    "check_lists",
    "check_flags",
    "float_ones",
    "int32_zeros",
    "weights_pieces",
]

INT32_LIMIT = 2**31  # int32 outputs: their positions must fit
ZEROS_CACHE_LIMIT = 2**24  # zeros taken from the shared cache up to this size


def check_lists(
    op: str,
    indices_list: Sequence[torch.Tensor],
    meta_list: Sequence[torch.Tensor],
    per_sample_weights: Sequence[torch.Tensor],
    meta_name: str,
) -> torch.device:
    """Upstream's list checks, named; returns the device every tensor lives on."""
    if len(indices_list) == 0:
        raise ValueError(f"{op}: argument 'indices_list' must hold at least one tensor, got none")
    for name, lst in ((meta_name, meta_list), ("per_sample_weights", per_sample_weights)):
        if len(lst) != len(indices_list):
            raise ValueError(
                f"{op}: argument '{name}' must hold one tensor per element of 'indices_list' "
                f"({len(indices_list)}), got {len(lst)}"
            )
    device = indices_list[0].device
    total = 0
    for i, (idx, meta, w) in enumerate(
        zip(indices_list, meta_list, per_sample_weights, strict=True)
    ):
        for name, t in ((f"indices_list[{i}]", idx), (f"{meta_name}[{i}]", meta)):
            check_tensor(op, name, t)
            check_dtype(op, name, t, INDEX_DTYPES)
            check_ndim(op, name, t, (1,))
        for name, t in (
            (f"indices_list[{i}]", idx),
            (f"{meta_name}[{i}]", meta),
            (f"per_sample_weights[{i}]", w),
        ):
            if t.device != device:
                raise RuntimeError(
                    f"{op}: argument '{name}' is on {t.device}, 'indices_list[0]' on {device}: "
                    "every tensor must be on one device"
                )
        if w.numel() > 0:
            name = f"per_sample_weights[{i}]"
            check_ndim(op, name, w, (1,))
            if w.dtype != torch.float32:  # upstream reads them as float
                raise ValueError(
                    f"{op}: argument '{name}' must have dtype float32 (or be empty), got "
                    f"{dtype_name(w.dtype)}"
                )
            if w.numel() != idx.numel():
                raise ValueError(
                    f"{op}: argument '{name}' must have one weight per index of "
                    f"'indices_list[{i}]' ({idx.numel()}), got {w.numel()}"
                )
        total += idx.numel()
    if total >= INT32_LIMIT:
        raise ValueError(
            f"{op}: the tensors of 'indices_list' hold {total} indices together; the int32 "
            "offsets upstream returns reach 2**31 - 1"
        )
    return device


def check_flags(op: str, flags: torch.Tensor, n: int, device: torch.device) -> None:
    """``include_last_offsets``: bool, 1-D, one per table, on the host or on ``device``."""
    check_tensor(op, "include_last_offsets", flags)
    check_dtype(op, "include_last_offsets", flags, (torch.bool,))
    check_ndim(op, "include_last_offsets", flags, (1,))
    if flags.numel() != n:
        raise ValueError(
            f"{op}: argument 'include_last_offsets' must hold one flag per element of "
            f"'indices_list' ({n}), got {flags.numel()}"
        )
    if flags.device.type != "cpu" and flags.device != device:
        raise RuntimeError(
            f"{op}: argument 'include_last_offsets' is on {flags.device}, 'indices_list[0]' on "
            f"{device}: it must be on that device or on the host"
        )


def int32_zeros(n: int, device: torch.device) -> torch.Tensor:
    """``n`` int32 zeros, a view of the shared cache up to ``ZEROS_CACHE_LIMIT`` elements (no
    launch once warm), fresh zeros past it (one launch: a huge ``batch_size`` must not pin its
    buffer in the cache); callers must not write to it."""
    if n > ZEROS_CACHE_LIMIT:
        return torch.zeros(n, dtype=torch.int32, device=device)
    return filled_i32(n, 0, device)


def float_ones(n: int, device: torch.device) -> torch.Tensor:
    """``n`` ones for a float32 ``cat``: a view of the shared int32 cache (``cat``'s ``out=``
    casts them), so no fill is launched and the conformance harness's warm-up covers it; callers
    must not write to it."""
    return filled_i32(n, 1, device)


def cat_into(
    pieces: list[torch.Tensor], n: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """``cat(pieces)`` as a fresh ``dtype`` tensor of ``n`` elements: one launch (none for
    ``n == 0``), the pieces cast by ``cat``'s ``out=``."""
    out = torch.empty(n, dtype=dtype, device=device)
    pieces = [p for p in pieces if p.numel() > 0]
    if n > 0:
        torch.cat(pieces, out=out)
    return out


def weights_pieces(
    per_sample_weights: Sequence[torch.Tensor],
    keep: Sequence[int],
    device: torch.device,
) -> list[torch.Tensor]:
    """The weights of table ``i``'s first ``keep[i]`` indices: its weights, or ones where it has
    none (upstream fills the combined weights with 1 first)."""
    return [
        w[:k] if w.numel() > 0 else float_ones(k, device)
        for w, k in zip(per_sample_weights, keep, strict=True)
    ]
