"""Hypothesis building blocks that every family's fuzz tests share (``tests/fuzz/``).

Each helper takes hypothesis' ``data`` object (``st.data()``) and draws: a layout for a tensor
(same logical values, other strides), a non-tensor where a tensor belongs, a dtype outside the
allowed ones, an offsets tensor broken in one of the ways offsets break.  Tensors are CPU
tensors; the harness (:mod:`fbgemm_npu.testing.fuzz`) reproduces their layout on npu.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

__all__ = [
    "ALL_DTYPES",
    "INT32_MAX",
    "bad_offsets",
    "in_layout",
    "lengths_to_offsets",
    "not_a_tensor",
    "other_dtype",
    "seeded",
]

INT32_MAX = 2**31 - 1
ALL_DTYPES: tuple[torch.dtype, ...] = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)
LAYOUTS = ("contiguous", "strided", "transposed", "expanded", "offset")


def seeded(data: Any) -> torch.Generator:
    """A torch generator seeded from the draw, so that a failing case replays."""
    return torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))


def in_layout(data: Any, t: torch.Tensor, layouts: tuple[str, ...] = LAYOUTS) -> torch.Tensor:
    """``t``'s values in a drawn memory layout: contiguous, every other element of a buffer
    twice as long, transposed storage (2-D and more), stride 0 (only where ``t`` is constant
    along dim 0), or a non-zero storage offset."""
    choices = [k for k in layouts if _fits(k, t)]
    kind = data.draw(st.sampled_from(choices), label="layout")
    if kind == "strided":
        buf = torch.zeros((t.shape[0] * 2, *t.shape[1:]), dtype=t.dtype)
        buf[::2] = t
        return buf[::2]
    if kind == "transposed":
        return t.transpose(0, 1).contiguous().transpose(0, 1)
    if kind == "expanded":
        return t[:1].expand(t.shape)
    if kind == "offset":
        buf = torch.zeros(t.numel() + 3, dtype=t.dtype)
        buf[3:] = t.reshape(-1)
        return buf[3:].view(t.shape)
    return t


def _fits(kind: str, t: torch.Tensor) -> bool:
    if kind in ("strided", "offset"):
        return t.dim() >= 1 and t.numel() > 0
    if kind == "transposed":
        return t.dim() >= 2 and t.numel() > 0
    if kind == "expanded":
        return t.dim() >= 1 and t.shape[0] > 1 and bool((t == t[:1]).all())
    return True


def not_a_tensor(data: Any) -> object:
    """What a user passes by mistake where a tensor belongs."""
    return data.draw(
        st.sampled_from([None, 3, 2.5, "values", [1, 2, 3], (0, 1), {"a": 1}, object()]),
        label="not a tensor",
    )


def other_dtype(data: Any, allowed: tuple[torch.dtype, ...]) -> torch.dtype:
    """A dtype that is not in ``allowed``."""
    return data.draw(st.sampled_from([d for d in ALL_DTYPES if d not in allowed]), label="dtype")


def lengths_to_offsets(lengths: torch.Tensor, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """The complete cumsum of ``lengths`` (a leading 0), in ``dtype``."""
    out = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    out[1:] = torch.cumsum(lengths.reshape(-1).to(torch.int64), 0)
    return out.to(dtype)


BAD_OFFSETS = ("decreasing", "negative", "past_end", "not_from_zero", "wrapped", "float")


def bad_offsets(data: Any, offsets: torch.Tensor, total: int) -> tuple[str, torch.Tensor]:
    """``offsets`` (1-D, from 0 to ``total``) broken in a drawn way; returns (how, tensor).

    decreasing: two neighbours swapped; negative: one below 0; past_end: the last beyond
    ``total``; not_from_zero: the first above 0; wrapped: int32 values that passed 2**31 and
    wrapped negative; float: the right values in float32."""
    how = data.draw(st.sampled_from(BAD_OFFSETS), label="broken offsets")
    o = offsets.clone().to(torch.int64)
    n = o.numel()
    if how == "decreasing" and n >= 3 and o[1] < o[2]:
        o[1], o[2] = o[2].clone(), o[1].clone()
    elif how == "decreasing" and n >= 2:
        o[-1] = o[-2] - 1
    elif how == "negative":
        o[data.draw(st.integers(0, max(n - 1, 0)))] = -data.draw(st.integers(1, 2**20))
    elif how == "past_end":
        o[-1] = total + data.draw(st.integers(1, 2**20))
    elif how == "not_from_zero":
        o[0] = data.draw(st.integers(1, max(total, 1)))
    elif how == "wrapped":
        o[-1] = o[-1] + INT32_MAX  # past 2**31: wraps negative in int32
        return how, o.to(torch.int32)
    elif how == "float":
        return how, o.to(torch.float32)
    return how, o.to(offsets.dtype)
