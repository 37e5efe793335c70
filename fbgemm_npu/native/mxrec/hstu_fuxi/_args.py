"""Argument checks of the FuXi ops, all on the host: ``seqOffset`` is a host int list (Rec SDK's
contract), so even its data conditions (start 0, end T, non-decreasing, lengths within
``maxSeqLen``) cost no launch and no sync.

Rec SDK's refusals kept (its adapters and ``TestHstuJaggedInvalidParams``): an empty q / k / v, a
dtype outside float32 / float16 / bfloat16, ``maxSeqLen`` outside ``[1, 20480]`` (the normal
layout: equal to ``q.size(1)``), fewer than 2 offsets (batch 0), ``maskType`` 1 (upper
triangular) or outside ``{0, 2, 3}``, type 3 without a mask.  Checks Rec SDK leaves to the user
("需用户自行保证合法性") are ours too: offsets and bias / mask shapes, one dtype and device, the two
biases given together (Rec SDK's kernel reads the other one undefined).  Not kept: Rec SDK's
kernel tiling limits (``N`` in {2, 4, 6, 8}, ``D`` a multiple of 16 in [16, 512], ``B <= 512``):
this program has none, so any ``N, D >= 1`` and any batch run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fbgemm_npu.native._checks import (
    check_dtype,
    check_ndim,
    check_same_device,
    check_same_dtype,
    check_tensor,
)

__all__ = ["FLOAT_DTYPES", "MAX_SEQ_LEN", "Call", "check_call"]

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_SEQ_LEN = 20480  # Rec SDK's MAX_SEQ_LEN (both adapters)


@dataclass
class Call:
    """One checked call: the tensors as given, the sizes, the host offsets (jagged) and the
    silu scale (``siluScale`` or ``1 / maxSeqLen``)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    ts: torch.Tensor | None  # [B, S, S]
    pos: torch.Tensor | None  # [1, S, S]
    mask: torch.Tensor | None  # [B, N, S, S], maskType 3 only
    mask_type: int
    s: int  # maxSeqLen
    scale: float
    layout: str
    offsets: list[int] | None  # jagged: [B + 1] host ints
    batch: int

    @property
    def channels(self) -> int:
        """3 with the two biases (score | ts | pos), else 1."""
        return 3 if self.ts is not None else 1


def _qkv(op: str, q: object, k: object, v: object, ndim: int) -> tuple[torch.Tensor, ...]:
    q, k, v = (check_tensor(op, n, t) for n, t in (("q", q), ("k", k), ("v", v)))
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_ndim(op, name, t, (ndim,))
        check_dtype(op, name, t, FLOAT_DTYPES)
        if t.numel() == 0:
            raise ValueError(
                f"{op}: argument '{name}' must be non-empty (Rec SDK refuses empty inputs); got "
                f"shape {tuple(t.shape)}"
            )
    check_same_dtype(op, q=q, k=k, v=v)
    check_same_device(op, q=q, k=k, v=v)
    for name, t in (("k", k), ("v", v)):
        if t.shape != q.shape:  # FuXi: no GQA, D_v == D_qk
            raise ValueError(
                f"{op}: argument '{name}' must have q's shape {tuple(q.shape)}; got "
                f"{tuple(t.shape)}"
            )
    return q, k, v


def _offsets(op: str, seq_offset: object, tokens: int, s: int) -> list[int]:
    """``seqOffset``: host ints, at least 2, from 0 to ``tokens``, never decreasing, each
    sequence at most ``s`` long."""
    if seq_offset is None or isinstance(seq_offset, (str, bytes, torch.Tensor)):
        raise ValueError(
            f"{op}: argument 'seqOffset' must be a list of host ints [B + 1] with the jagged "
            f"layout; got {type(seq_offset).__name__}"
        )
    try:
        off = [int(x) for x in seq_offset]  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{op}: argument 'seqOffset' must hold ints: {exc}") from None
    if len(off) < 2:
        raise ValueError(
            f"{op}: argument 'seqOffset' must have at least 2 elements (batch >= 1); got {off}"
        )
    if off[0] != 0 or off[-1] != tokens:
        raise ValueError(
            f"{op}: argument 'seqOffset' must start at 0 and end at q.size(0) = {tokens}; got "
            f"{off[0]} .. {off[-1]}"
        )
    lengths = [b - a for a, b in zip(off[:-1], off[1:], strict=True)]
    if min(lengths) < 0:
        raise ValueError(f"{op}: argument 'seqOffset' must be non-decreasing; got {off}")
    if max(lengths) > s:
        raise ValueError(
            f"{op}: argument 'seqOffset' holds a sequence of {max(lengths)} rows, more than "
            f"maxSeqLen {s}"
        )
    return off


def _mask_type(op: str, mask_type: int, mask: torch.Tensor | None) -> None:
    if mask_type == 1:
        raise ValueError(f"{op}: argument 'maskType' 1 (upper triangular) is not supported")
    if mask_type not in (0, 2, 3):
        raise ValueError(f"{op}: argument 'maskType' must be 0, 2 or 3; got {mask_type}")
    if mask_type == 3 and mask is None:
        raise ValueError(f"{op}: argument 'mask' is required with maskType 3")


def _like_q(op: str, name: str, t: torch.Tensor, q: torch.Tensor, shape: Sequence[int]) -> None:
    check_tensor(op, name, t)
    if list(t.shape) != list(shape):
        raise ValueError(
            f"{op}: argument '{name}' must have shape {list(shape)}; got {list(t.shape)}"
        )
    if t.dtype != q.dtype:
        raise ValueError(f"{op}: argument '{name}' must have q's dtype {q.dtype}; got {t.dtype}")
    check_same_device(op, q=q, **{name: t})


def check_call(
    op: str,
    q: object,
    k: object,
    v: object,
    ts: torch.Tensor | None,
    pos: torch.Tensor | None,
    mask: torch.Tensor | None,
    mask_type: int,
    max_seq_len: int,
    silu_scale: float,
    layout: str,
    seq_offset: object,
    names: tuple[str, str] = ("timestampBias", "positionBias"),
    layouts: tuple[str, ...] = ("normal", "jagged"),
) -> Call:
    """Every check of one call (module docstring); ``names``: the op's names of the timestamp
    and position biases; ``layouts``: the layouts it accepts."""
    if layout not in layouts:
        want = " or ".join(repr(x) for x in layouts)
        raise ValueError(f"{op}: argument 'layout' must be {want}; got {layout!r}")
    jagged = layout == "jagged"
    q, k, v = _qkv(op, q, k, v, 3 if jagged else 4)
    if not 1 <= max_seq_len <= MAX_SEQ_LEN:
        raise ValueError(
            f"{op}: argument 'maxSeqLen' must be in [1, {MAX_SEQ_LEN}]; got {max_seq_len}"
        )
    if jagged:
        off: list[int] | None = _offsets(op, seq_offset, q.size(0), max_seq_len)
        batch = len(off) - 1
    else:
        off, batch = None, q.size(0)
        if max_seq_len != q.size(1):
            raise ValueError(
                f"{op}: argument 'maxSeqLen' must equal q.size(1) = {q.size(1)} with the normal "
                f"layout; got {max_seq_len}"
            )
    s, heads = max_seq_len, q.size(-2)
    if batch * s >= 2**31:
        raise ValueError(f"{op}: batch x maxSeqLen must be below 2**31; got {batch * s}")
    _mask_type(op, mask_type, mask)
    if mask_type == 3:
        _like_q(op, "mask", mask, q, [batch, heads, s, s])  # type: ignore[arg-type]
    if (ts is None) != (pos is None):
        raise ValueError(
            f"{op}: arguments '{names[0]}' and '{names[1]}' must be given together (the bias "
            f"channels use both); got only '{names[0] if pos is None else names[1]}'"
        )
    if ts is not None and pos is not None:
        _like_q(op, names[0], ts, q, [batch, s, s])
        _like_q(op, names[1], pos, q, [1, s, s])
    scale = float(silu_scale) if silu_scale != 0.0 else 1.0 / s
    return Call(
        q,
        k,
        v,
        ts,
        pos,
        mask if mask_type == 3 else None,
        mask_type,
        s,
        scale,
        layout,
        off,
        batch,
    )
