"""Packed segments on npu: ``fbgemm::pack_segments``, ``pack_segments_v2`` and
``pack_segments_backward`` (Caffe2's PackSegments / UnpackSegments).

Shapes: ``t_in [N, *inner]``, ``lengths [B]`` (int32 / int64), ``max_length = L > 0``.  With
``off`` the exclusive cumsum of ``lengths``::

    packed[b, j] = t_in[off[b] + j]  if j < lengths[b] else padding     [B, L, *inner]
    presence_mask[b, j] = j < lengths[b]                                 [B, L] (v2 only)
    pack_segments_backward(data, lengths, T, L)[off[b] + j] = data[b, j]  for j < min(lengths[b], L)
                                                               (other rows 0)   [T, *inner]

Padding is 0, or -inf with ``pad_minf`` (float dtypes only: upstream refuses it for integers).
Dtypes, as upstream's CPU kernels: ``pack_segments`` float32 / float16 / bfloat16 / int32;
``pack_segments_v2`` those and int64; ``pack_segments_backward`` the three float types.

Autograd: upstream's program at ``AutogradPrivateUse1`` (its ``Autograd`` kernels call
``pack_segments`` / ``pack_segments_v2`` below autograd and ``pack_segments_backward`` for the
gradient): ours is the same, after the family's argument guard (upstream's C++ kernel reads the
size of a ``None`` ``t_in`` before any kernel of ours could name it).  Upstream's backward
leaves the rows a truncated segment (``lengths[b] > L``) never wrote uninitialised; ours writes
0 there, the gradient of values no output reads.

How: the offsets are one int32 ``cumsum`` of the lengths (no int64 scan, docs/hardware.md); the
packing is the family's jagged -> dense gather (:func:`.to_dense.to_dense`: the ``[B, L]`` index,
clamped rows, one ``index_select``, the padding filled after it) and the unpacking its dense ->
jagged scatter (:func:`.to_jagged.to_jagged`: padding positions sent to a spare row, one
``index_copy_``).  No sync: every size is a host value.  Data checks (queued, unless
``FBGEMM_NPU_VALIDATE=0``; gathers and scatters are clamped so bad data stays memory-safe):
``lengths >= 0``, each and their sum below 2**31, and every row read or written inside
``t_in`` / the output (upstream reads and writes past them).  Launches: ``BUDGETS`` in
``budgets.py``.
"""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.fbgemm.jagged.to_dense import to_dense
from fbgemm_npu.native.fbgemm.jagged.to_jagged import to_jagged

__all__ = [
    "KERNELS",
    "lengths_to_offsets",
    "pack_segments_backward_npu",
    "pack_segments_npu",
    "pack_segments_v2_npu",
]

PACK_SEGMENTS = "fbgemm::pack_segments"
PACK_SEGMENTS_V2 = "fbgemm::pack_segments_v2"
PACK_SEGMENTS_BACKWARD = "fbgemm::pack_segments_backward"
_I32_MAX = 2**31 - 1
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_PACK_DTYPES = {
    PACK_SEGMENTS: (*_FLOATS, torch.int32),
    PACK_SEGMENTS_V2: (*_FLOATS, torch.int32, torch.int64),
}


def lengths_to_offsets(
    op: str, lengths: torch.Tensor, arg: str = "lengths", empty_rows: bool = False
) -> torch.Tensor:
    """``[0, cumsum(lengths)]`` (``B + 1`` int32 entries) of 1-D int32 / int64 ``lengths``, with
    the data checks ``lengths >= 0``, each (int64) and their sum ``< 2**31`` queued (with the checks
    on); ``empty_rows``: the lengths index a tensor of no rows, so each must be 0.  Launches: the
    int32 cast (int64 lengths), ``zeros``, ``cumsum``; checks: ``amin``, ``amax`` (int64 lengths
    or ``empty_rows``), the int64 ``sum`` and the queued check's."""
    offsets = lengths.new_zeros(lengths.numel() + 1, dtype=torch.int32)
    small = lengths if lengths.dtype == torch.int32 else lengths.to(torch.int32)
    torch.cumsum(small, 0, dtype=torch.int32, out=offsets[1:])
    if validation_enabled() and lengths.numel() > 0:
        checks = DataChecks(op)
        checks.add(lengths.amin(), 0, None, f"argument '{arg}' must be >= 0")
        if lengths.dtype == torch.int64 or empty_rows:  # an int64 length past 2**31 would wrap
            most = 0 if empty_rows else _I32_MAX
            what = (
                "must be 0 (the tensor it indexes has no rows)" if empty_rows else "must be < 2**31"
            )
            checks.add(lengths.amax(), None, most, f"argument '{arg}' {what}")
        total = lengths.sum(dtype=torch.int64)
        checks.add(total, None, _I32_MAX, f"argument '{arg}' must sum to < 2**31")
        checks.assert_on_device()
    return offsets


def _check_lengths(op: str, lengths: object) -> torch.Tensor:
    t = check_tensor(op, "lengths", lengths)
    check_ndim(op, "lengths", t, (1,))
    return check_dtype(op, "lengths", t, INDEX_DTYPES)


def _check_max_length(op: str, max_length: object) -> int:
    length = int(max_length)  # type: ignore[call-overload]
    if length <= 0:  # upstream's CHECK_GT
        raise ValueError(f"{op}: argument 'max_length' must be > 0, got {length}")
    return length


def _pack(
    op: str, t_in: object, lengths: object, max_length: object, pad_minf: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(packed, offsets)`` after upstream's checks (in its order)."""
    t = check_tensor(op, "t_in", t_in)
    lens = _check_lengths(op, lengths)
    check_dtype(op, "t_in", t, _PACK_DTYPES[op])
    if t.dim() < 1:
        raise ValueError(f"{op}: argument 't_in' must have at least 1 dim, got a 0-D tensor")
    check_same_device(op, t_in=t, lengths=lens)
    length = _check_max_length(op, max_length)
    if pad_minf and not t.dtype.is_floating_point:  # upstream: "cannot be converted to type int"
        raise ValueError(
            f"{op}: argument 'pad_minf' needs a float 't_in' (-inf does not fit in "
            f"{str(t.dtype).removeprefix('torch.')})"
        )
    n, inner = t.size(0), t.shape[1:]
    offsets = lengths_to_offsets(op, lens, empty_rows=n == 0)
    flat = t.reshape(n) if not inner else t.reshape(n, math.prod(inner))
    pad = -math.inf if pad_minf else 0.0
    packed = to_dense(op, flat, [offsets], [length], pad, "t_in", "lengths", "max_length")
    return packed.view(lens.numel(), length, *inner), offsets


def pack_segments_npu(t_in: torch.Tensor, lengths: torch.Tensor, max_length: int) -> torch.Tensor:
    """``fbgemm::pack_segments``: ``[B, L, *inner]``, 0 at the padding (module docstring)."""
    return _pack(PACK_SEGMENTS, t_in, lengths, max_length, False)[0]


def pack_segments_v2_npu(
    t_in: torch.Tensor,
    lengths: torch.Tensor,
    max_length: int,
    pad_minf: bool = False,
    return_presence_mask: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``fbgemm::pack_segments_v2``: ``(packed, presence_mask or None)``; the mask (``[B, L]``
    bool, ``j < lengths[b]``) is one ``lt`` of the cached ``arange`` against the lengths."""
    packed, _ = _pack(PACK_SEGMENTS_V2, t_in, lengths, max_length, pad_minf)
    if not return_presence_mask:
        return packed, None
    mask = arange_cached(packed.size(1), packed.device).unsqueeze(0) < lengths.unsqueeze(1)
    return packed, mask


def pack_segments_backward_npu(
    data: torch.Tensor, lengths: torch.Tensor, total_length: int, max_length: int
) -> torch.Tensor:
    """``fbgemm::pack_segments_backward``: ``[total_length, *inner]``, row ``off[b] + j`` the
    packed position ``(b, j)``, zeros where no position lands (module docstring)."""
    op = PACK_SEGMENTS_BACKWARD
    d = check_tensor(op, "data", data)
    lens = _check_lengths(op, lengths)
    if d.dim() < 2:
        raise ValueError(
            f"{op}: argument 'data' must be [B, max_length, ...], got shape {tuple(d.shape)}"
        )
    if d.size(0) != lens.numel():  # upstream: "LENGTHS and DATA must match in dimension 0"
        raise ValueError(
            f"{op}: argument 'data' has {d.size(0)} segments but 'lengths' has {lens.numel()}"
        )
    length = _check_max_length(op, max_length)
    if d.size(1) != length:
        raise ValueError(
            f"{op}: argument 'max_length' ({length}) must equal data.size(1) ({d.size(1)})"
        )
    check_dtype(op, "data", d, _FLOATS)
    check_same_device(op, data=d, lengths=lens)
    total = int(total_length)
    if total < 0:
        raise ValueError(f"{op}: argument 'total_length' must be >= 0, got {total}")
    offsets = lengths_to_offsets(op, lens)
    inner = d.shape[2:]
    dense = d.reshape(d.size(0), length, math.prod(inner))
    out = to_jagged(op, dense, [offsets], total, "data", "lengths", "'total_length'")
    return out.view(total, *inner)


class _Pack(torch.autograd.Function):
    """``pack_segments`` / ``_v2`` (``v2`` args given) and, as upstream's, the gradient
    ``pack_segments_backward(grad, lengths, t_in.size(0), max_length)``."""

    @staticmethod
    def forward(ctx, t_in, lengths, max_length, v2):  # type: ignore[override]
        ctx.save_for_backward(lengths)
        ctx.total, ctx.max_length = t_in.size(0), max_length
        if v2 is None:
            return below_autograd(torch.ops.fbgemm.pack_segments, t_in, lengths, max_length)
        packed, mask = below_autograd(
            torch.ops.fbgemm.pack_segments_v2, t_in, lengths, max_length, *v2
        )
        if mask is not None:
            ctx.mark_non_differentiable(mask)
        return packed, mask

    @staticmethod
    def backward(ctx, grad, *_):  # type: ignore[override]
        (lengths,) = ctx.saved_tensors
        g = torch.ops.fbgemm.pack_segments_backward(grad, lengths, ctx.total, ctx.max_length)
        return g, None, None, None


def _pack_autograd(t_in: torch.Tensor, lengths: torch.Tensor, max_length: int) -> torch.Tensor:
    if needs_grad(t_in):
        return _Pack.apply(t_in, lengths, max_length, None)
    return below_autograd(torch.ops.fbgemm.pack_segments, t_in, lengths, max_length)


def _pack_v2_autograd(
    t_in: torch.Tensor,
    lengths: torch.Tensor,
    max_length: int,
    pad_minf: bool = False,
    return_presence_mask: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    v2 = (pad_minf, return_presence_mask)
    if needs_grad(t_in):
        return _Pack.apply(t_in, lengths, max_length, v2)
    return below_autograd(torch.ops.fbgemm.pack_segments_v2, t_in, lengths, max_length, *v2)


KERNELS = {
    PACK_SEGMENTS: {"PrivateUse1": pack_segments_npu, "AutogradPrivateUse1": _pack_autograd},
    PACK_SEGMENTS_V2: {
        "PrivateUse1": pack_segments_v2_npu,
        "AutogradPrivateUse1": _pack_v2_autograd,
    },
    PACK_SEGMENTS_BACKWARD: {"PrivateUse1": pack_segments_backward_npu},
}
