"""Host checks of ``mxrec::disentangle_attention`` and its backward (no launch, no sync).

Rec SDK's adapter (``DisentangleAttenFusion.cpp``) checks ranks, shapes and float16 / int64
dtypes with ``TORCH_CHECK`` messages that name neither the op nor (always) the argument, and
limits b <= 100, n <= 64, 1 <= d <= 512, s == 256 for its tiling; a ``pos_attr_type`` outside
its three spellings prints a line and returns uninitialised outputs.  Ours: every refusal names
the op and the argument; any b, n, s, d (zero-size too); float16 / bfloat16 / float32 (float64
on CPU, for gradcheck); int32 or int64 ``relative_pos``; ``pos_attr_type`` outside the three
spellings and a non-finite ``score_scale`` refused.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from fbgemm_npu.native._checks import (
    check_dtype,
    check_ndim,
    check_same_device,
    check_same_dtype,
    check_tensor,
)

__all__ = ["POS_ATTR_TYPES", "Inputs", "check_inputs", "check_pos_attr_type"]

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
REL_DTYPES = (torch.int64, torch.int32)
# Rec SDK's three spellings -> (c2p, p2c)
POS_ATTR_TYPES: dict[str, tuple[bool, bool]] = {
    "c2p": (True, False),
    "p2c": (False, True),
    "c2p|p2c": (True, True),
}


class Inputs(NamedTuple):
    """The checked tensors (the caller's objects, not copies) and the positional terms asked."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    pos_key: torch.Tensor
    pos_query: torch.Tensor
    rel: torch.Tensor
    mask: torch.Tensor | None
    c2p: bool
    p2c: bool


def check_pos_attr_type(op: str, pos_attr_type: object) -> tuple[bool, bool]:
    """``(c2p, p2c)`` for one of Rec SDK's spellings; anything else a ``ValueError``."""
    if not isinstance(pos_attr_type, str) or pos_attr_type not in POS_ATTR_TYPES:
        raise ValueError(
            f"{op}: argument 'pos_attr_type' must be one of 'c2p', 'p2c' or 'c2p|p2c', got "
            f"{pos_attr_type!r}"
        )
    return POS_ATTR_TYPES[pos_attr_type]


def _float_dtype(op: str, arg: str, t: torch.Tensor) -> None:
    allowed = FLOATS + ((torch.float64,) if t.device.type == "cpu" else ())
    check_dtype(op, arg, t, allowed)


def check_inputs(
    op: str,
    query_layer: object,
    key_layer: object,
    value_layer: object,
    pos_key_layer: object,
    pos_query_layer: object,
    relative_pos: object,
    attn_mask: object,
    pos_attr_type: object,
    score_scale: float,
    *,
    mask_optional: bool = False,
) -> Inputs:
    """Shapes ``(b, n, s, d)`` x3, ``(2s, n, d)`` x2, ``relative_pos`` ``(s, s)`` /
    ``(1, s, s)`` / ``(1, 1, s, s)``, ``attn_mask`` ``(b, s, s)`` / ``(b, 1, s, s)``, one float
    dtype and one device; Rec SDK's conditions, each refusal naming the argument."""
    c2p, p2c = check_pos_attr_type(op, pos_attr_type)
    if not (isinstance(score_scale, (int, float)) and math.isfinite(score_scale)):
        raise ValueError(f"{op}: argument 'score_scale' must be a finite float, got {score_scale}")
    q = check_ndim(op, "query_layer", check_tensor(op, "query_layer", query_layer), (4,))
    _float_dtype(op, "query_layer", q)
    named = {"key_layer": key_layer, "value_layer": value_layer}
    qkv = [q] + [check_ndim(op, a, check_tensor(op, a, t), (4,)) for a, t in named.items()]
    for arg, t in zip(named, qkv[1:], strict=True):
        if t.shape != q.shape:
            raise ValueError(
                f"{op}: argument '{arg}' must have query_layer's shape (b, n, s, d) = "
                f"{tuple(q.shape)}, got {tuple(t.shape)}"
            )
    b, n, s, d = q.shape
    pos = []
    for arg, t in (("pos_key_layer", pos_key_layer), ("pos_query_layer", pos_query_layer)):
        t = check_ndim(op, arg, check_tensor(op, arg, t), (3,))
        if tuple(t.shape) != (2 * s, n, d):
            raise ValueError(
                f"{op}: argument '{arg}' must have shape (2s, n, d) = {(2 * s, n, d)} for "
                f"query_layer of shape {tuple(q.shape)}, got {tuple(t.shape)}"
            )
        pos.append(t)
    rel = check_ndim(op, "relative_pos", check_tensor(op, "relative_pos", relative_pos), (2, 3, 4))
    check_dtype(op, "relative_pos", rel, REL_DTYPES)
    if tuple(rel.shape) != (1,) * (rel.dim() - 2) + (s, s):
        raise ValueError(
            f"{op}: argument 'relative_pos' must have shape (s, s), (1, s, s) or (1, 1, s, s) "
            f"with s = {s}, got {tuple(rel.shape)}"
        )
    mask = None
    if attn_mask is not None or not mask_optional:
        mask = check_ndim(op, "attn_mask", check_tensor(op, "attn_mask", attn_mask), (3, 4))
        want = (b, s, s) if mask.dim() == 3 else (b, 1, s, s)
        if tuple(mask.shape) != want:
            raise ValueError(
                f"{op}: argument 'attn_mask' (additive) must have shape (b, s, s) or "
                f"(b, 1, s, s) = {want}, got {tuple(mask.shape)}"
            )
    floats = dict(zip(("query_layer", *named), qkv, strict=True))
    floats.update(pos_key_layer=pos[0], pos_query_layer=pos[1], attn_mask=mask)
    check_same_dtype(op, **floats)
    check_same_device(op, **floats, relative_pos=rel)
    return Inputs(*qkv, pos[0], pos[1], rel, mask, c2p, p2c)
