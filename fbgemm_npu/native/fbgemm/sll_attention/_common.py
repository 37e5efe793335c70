"""Shared pieces of the sll_attention family: argument checks, the padded row index and the
square (``[B, M, M]``) index of the jagged2 layouts.

Two jagged layouts meet here.  A row jagged tensor ``x [N, ...]`` with ``offsets [B + 1]``
(``len_b = offsets[b + 1] - offsets[b]``) is padded to ``[B, M, ...]`` by
the jagged family's dense index (:func:`row_index`: add, ge, clamp).  A jagged2 tensor ``x
[sum_b n_b**2]`` holds one ``n_b x n_b`` matrix per batch row, row-major from ``x_offsets[b]``;
:func:`square_index` builds its ``[B, M, M]`` positions ``x_offsets[b] + i * n_b + j`` (valid
where ``i, j < n_b``): an int64 ``mul``, two ``add`` s, a ``ge`` and a ``logical_or``, no loop.

``M`` is :func:`padded`: ``max_seq_len``, capped by the rows the inputs can hold, so a
generous ``max_seq_len`` costs no memory.  Every gather reads clamped positions and every
scatter writes padding to a spare slot (the jagged family's :func:`read_rows` /
:func:`write_rows`), so a call whose queued data check fails stays memory-safe until the
check is read.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import INDEX_DTYPES, check_dtype, check_ndim, check_tensor
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.fbgemm.jagged._utils import dense_index, read_rows, write_rows

__all__ = [
    "FLOATS",
    "HALF_FLOATS",
    "check_float",
    "check_int",
    "check_offsets",
    "padded",
    "positions",
    "row_index",
    "square_index",
]

# Padded lengths up to this read the shared cached arange; a longer one builds its own (one
# launch more), so one huge max_seq_len leaves no cache of its size behind.
_CACHED_POSITIONS = 1 << 16

# upstream's fbgemm-kernel paths (jagged_softmax, jagged_dense_bmm) take these; its pure-torch
# paths (jagged2 softmax / padding, flash_attention_basic) take float64 as well
HALF_FLOATS: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
FLOATS: tuple[torch.dtype, ...] = (*HALF_FLOATS, torch.float64)


def check_float(
    op: str, arg: str, t: object, ndim: int, dtypes: tuple[torch.dtype, ...] = HALF_FLOATS
) -> torch.Tensor:
    """A tensor of one of ``dtypes`` with ``ndim`` dims."""
    v = check_tensor(op, arg, t)
    return check_ndim(op, arg, check_dtype(op, arg, v, dtypes), (ndim,))


def check_offsets(op: str, arg: str, t: object) -> torch.Tensor:
    """1-D int32 / int64 offsets with at least one entry (``B + 1``)."""
    o = check_ndim(op, arg, check_dtype(op, arg, check_tensor(op, arg, t), INDEX_DTYPES), (1,))
    if o.numel() == 0:
        raise ValueError(f"{op}: argument '{arg}' must have at least one entry (B + 1)")
    return o


def check_int(op: str, arg: str, value: object) -> int:
    """A host int (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{op}: argument '{arg}' must be an int, got {type(value).__name__}")
    return value


def positions(length: int, device: torch.device) -> torch.Tensor:
    """``arange(length)`` int64: a view of the shared cache up to 2**16, else a fresh one."""
    if length <= _CACHED_POSITIONS:
        return arange_cached(length, device)
    return torch.arange(length, dtype=torch.int64, device=device)


def padded(max_seq_len: int, most: int) -> int:
    """The padded length: ``max_seq_len`` (at least 0), but never more than ``most``, the most
    rows a batch row can hold in the inputs' sizes (its rows, or ``isqrt`` of a jagged2
    tensor's elements): rows past that are padding for any offsets the data checks pass, so a
    generous ``max_seq_len`` costs no memory (upstream's loops allocate nothing by it)."""
    return max(min(max_seq_len, most), 0)


def row_index(
    o: torch.Tensor, length: int, n: int, bad: list[torch.Tensor] | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(read, pad, write)`` of the ``[B, length]`` padded form of ``n > 0`` jagged rows:
    ``read`` clamped into ``[0, n)`` (a gather), ``write`` with padding at the spare row ``n``
    (a scatter into ``n + 1`` rows), ``pad`` true past ``min(len_b, length)``.  ``bad`` gets the
    offsets' int32 range and the rows past ``n`` (the jagged family's data checks).  Launches:
    add, ge, where, remainder, clamp (+ int32_bad, where, ge, ge with the checks)."""
    idx, pad = dense_index([o], [length], bad)  # type: ignore[misc]
    write = write_rows(idx, pad, n, None)
    read = read_rows(idx, pad, n, bad)
    return read, pad, write


def square_index(
    starts: torch.Tensor, sizes: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pos, pad)`` ``[B, M, M]`` (``M = length``) of one ``n_b x n_b`` row-major matrix per
    batch row starting at ``starts[b]``: ``pos = starts[b] + i * n_b + j``, ``pad`` true where
    ``i >= n_b`` or ``j >= n_b``.  int64 throughout (``starts`` / ``sizes`` int32 or int64 are
    promoted by the int64 ``arange``).  Launches: mul, add, add, ge, logical_or."""
    ar = positions(length, starts.device)
    n = sizes.unsqueeze(-1)  # [B, 1]
    row_start = starts.unsqueeze(-1) + ar * n  # [B, M]
    pos = row_start.unsqueeze(-1) + ar  # [B, M, M]
    pad_i = ar >= n  # [B, M]
    pad = pad_i.unsqueeze(-1) | pad_i.unsqueeze(1)
    return pos, pad
