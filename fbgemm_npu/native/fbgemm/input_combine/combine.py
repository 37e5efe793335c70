"""``fbgemm::tbe_input_combine`` and ``fbgemm::padding_fused_tbe_input_combine`` on npu: per-table
indices / offsets / per-sample weights joined into one TBE input (int32 indices and offsets,
float32 weights).

Semantics, read from upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0) and measured on it.  Table
``i`` has ``n_i`` offsets ``o_i``, ``N_i`` indices and flag ``f_i = include_last_offsets[i]``;
``s_i = n_i - f_i`` of its offsets are bag starts.  With ``d_i`` what table ``i`` adds to the
running offset and ``E_i = d_0 + ... + d_i`` (int32, wrapping as upstream's does)::

    offsets = [0] ++ for each i: (o_i[1:s_i] + E_{i-1}) ++ [E_i] * r_i

``tbe_input_combine``: ``r_i = 1`` (a table of ``s_i = 0`` adds one offset), ``d_i = N_i``;
except when every flag is set and some table has padding (``N_i > o_i[-1]``): then table ``i``
keeps its first ``k_i = o_i[-1]`` indices (``d_i = k_i``), and the padding indices of every table
follow all the kept ones, in table order; the weights of the kept indices come first, ones after
them.  ``padding_fused_tbe_input_combine``: every table takes ``B = batch_size`` offsets
(``r_i = B + 1 - s_i``), ``d_i = N_i``, no trimming.  Indices are cast to int32, weights are a
table's own or ones, and the weights output is empty when no table has weights.

Where upstream writes outside its buffers or fails we refuse by name: empty offsets
(``tbe_input_combine`` reads ``o_i[-1]``, an IndexError, unless an earlier table is padded; with
the flag set it then writes past its buffer), a trimmed table whose last offset is negative or
past its indices, and for the padding op ``s_i`` outside ``[1, B + 1]``.  One deviation:
upstream keeps every index of a trimmed table whose last offset is 0 (its ``k_i > 0`` test)
while counting none of them in the offsets; ours trims it to 0 like any other (its indices are
all padding), so the offsets, indices and weights stay aligned.

Launches (budgets.py): ``tbe_input_combine``'s output size depends on the values of
``include_last_offsets``: its one sync reads the flags and every table's last offset in one copy
(``DataChecks.read_with``, which carries the queued data checks) unless the flags are a host
tensor and not all set.  Then three ``cat``s into the outputs, and the offsets' running part as
the cumsum of a jump vector: the upload of the jump positions and values (pinned,
non-blocking), an int32 ``index_add`` into cached zeros, ``cumsum``, ``add``.  The padding op
knows its sizes: no sync, flags on the device are applied by a broadcast compare and a ``where``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import DataChecks, allocation_of, validation_enabled
from fbgemm_npu.native._host import exclusive_cumsum
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.input_combine._layout import (
    INT32_LIMIT,
    cat_into,
    check_flags,
    check_lists,
    float_ones,
    int32_zeros,
    weights_pieces,
)

__all__ = ["KERNELS", "padding_fused_tbe_input_combine_npu", "tbe_input_combine_npu"]

COMBINE = "fbgemm::tbe_input_combine"
PADDING = "fbgemm::padding_fused_tbe_input_combine"


def _wrap32(v: int) -> int:
    """``v`` modulo 2**32 as a signed int32 (upstream's int32 running offset wraps)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _weights(
    per_sample_weights: Sequence[torch.Tensor],
    keep: Sequence[int],
    total: int,
    device: torch.device,
) -> torch.Tensor:
    """The combined weights: the kept indices' weights, ones for the rest (one ``cat``), or an
    empty float32 tensor when no table has weights (no launch)."""
    if not any(w.numel() > 0 for w in per_sample_weights):
        return torch.empty(0, dtype=torch.float32, device=device)
    pieces = weights_pieces(per_sample_weights, keep, device)
    pieces.append(float_ones(total - sum(keep), device))
    return cat_into(pieces, total, torch.float32, device)


def _running_offsets(
    pieces: list[torch.Tensor], repeats: Sequence[int], adds: Sequence[int], device: torch.device
) -> torch.Tensor:
    """``[0] ++ for each i: (pieces[i] + E_{i-1}) ++ [E_i] * repeats[i]`` with ``E_i`` the
    wrapped running sum of ``adds``, int32.

    ``c = cat(0, pieces[0], zeros(repeats[0]), ...)`` is the offsets without their running part;
    that part is ``cumsum(J)`` for ``J`` zero but ``adds[i]`` where table ``i``'s repeated run
    starts (an empty run puts it on the next table's first element).  Launches: ``cat``, the
    upload of the jumps, ``index_add`` into cached zeros, ``cumsum``, ``add``."""
    n = 1 + sum(p.numel() + r for p, r in zip(pieces, repeats, strict=True))
    zeros = int32_zeros(n + 1, device)
    layout: list[torch.Tensor] = [zeros[:1]]
    where: list[int] = []
    at = 1
    for p, r in zip(pieces, repeats, strict=True):
        layout += [p, zeros[:r]]
        at += p.numel()
        where.append(at)
        at += r
    c = cat_into(layout, n, torch.int32, device)
    jumps = upload([where, [_wrap32(a) for a in adds]], torch.int32, device)
    marks = torch.index_add(zeros, 0, jumps[0], jumps[1])
    return c.add_(torch.cumsum(marks[:n], 0, dtype=torch.int32))


def _read_layout(
    op: str,
    offsets_list: Sequence[torch.Tensor],
    include_last_offsets: torch.Tensor,
    numels: Sequence[int],
) -> tuple[list[bool], list[int] | None]:
    """``(flags, last offsets or None)`` on the host: one read of the flags and every table's
    last offset (with the queued checks) unless the flags are a host tensor not all set."""
    if include_last_offsets.device.type == "cpu":
        flags = [bool(f) for f in include_last_offsets.tolist()]
        if not all(flags):
            return flags, None
        extra = [o[-1] for o in offsets_list]
    else:
        extra = [*include_last_offsets.unbind(0), *(o[-1] for o in offsets_list)]
        flags = []
    got = DataChecks(op).read_with(extra)
    if not flags:
        flags, got = [bool(v) for v in got[: len(numels)]], got[len(numels) :]
    return flags, got


def tbe_input_combine_npu(
    indices_list: list[torch.Tensor],
    offsets_list: list[torch.Tensor],
    per_sample_weights: list[torch.Tensor],
    include_last_offsets: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(indices int32 [sum N_i], offsets int32 [1 + sum max(s_i, 1)], weights float32)``: the
    module docstring's math.  Launches: the read (a ``cat`` of the flags and last offsets, the 1
    sync), three ``cat``s and the running offsets' upload, ``index_add``, ``cumsum``, ``add``
    (``budgets.py``)."""
    op = COMBINE
    device = check_lists(op, indices_list, offsets_list, per_sample_weights, "offsets_list")
    check_flags(op, include_last_offsets, len(indices_list), device)
    for i, o in enumerate(offsets_list):
        if o.numel() == 0:  # upstream reads o[-1]
            raise ValueError(f"{op}: argument 'offsets_list[{i}]' must hold at least one offset")
    numels = [t.numel() for t in indices_list]
    flags, last = _read_layout(op, offsets_list, include_last_offsets, numels)
    trim = last is not None and all(flags) and any(n > v for n, v in zip(numels, last, strict=True))
    if trim:
        assert last is not None
        for i, (n, v) in enumerate(zip(numels, last, strict=True)):
            if not 0 <= v <= n:
                raise ValueError(
                    f"{op}: argument 'offsets_list[{i}]' must end in [0, {n}] (its indices) when "
                    f"'include_last_offsets' is all set and indices are padded, got {v}"
                )
        keep = list(last)
    else:
        keep = numels
    total = sum(numels)
    pieces = [t[:k] for t, k in zip(indices_list, keep, strict=True)]
    pieces += [
        t[k:] for t, k in zip(indices_list, keep, strict=True)
    ]  # the padding, after every table
    indices = cat_into(pieces, total, torch.int32, device)
    starts = [o[1 : max(o.numel() - f, 0)] for o, f in zip(offsets_list, flags, strict=True)]
    offsets = _running_offsets(starts, [1] * len(starts), keep, device)
    return indices, offsets, _weights(per_sample_weights, keep, total, device)


def padding_fused_tbe_input_combine_npu(
    indices_list: list[torch.Tensor],
    offsets_list: list[torch.Tensor],
    per_sample_weights: list[torch.Tensor],
    include_last_offsets: torch.Tensor,
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(indices int32 [sum N_i], offsets int32 [1 + B T], weights float32)``: table ``i``'s
    offset slot ``j < B`` is ``o_i[j + 1] + E_{i-1}`` for ``j < s_i - 1``, else ``E_i``.

    Slots from ``o_i`` are ``cat`` into a ``[T, B]`` buffer (zeros past ``min(n_i - 1, B)``);
    ``thr_i = n_i - 1 - f_i`` (an ``add`` of minus the flags on the device, or on the host);
    ``where(j < thr_i, slot + E_{i-1}, E_i)`` written after a zeroed first offset.  Launches:
    two ``cat``s (one more with weights), the upload of ``n_i - 1``, ``E_{i-1}``, ``E_i``, the
    ``add`` of the flags, the broadcast ``lt``, ``add``, ``where``, the first offset's fill; no
    sync.  Data check (flags on
    the device): ``thr`` in ``[0, B]`` (``aminmax``), queued."""
    op = PADDING
    device = check_lists(op, indices_list, offsets_list, per_sample_weights, "offsets_list")
    check_flags(op, include_last_offsets, len(indices_list), device)
    B = batch_size
    if B < 0:
        raise ValueError(f"{op}: argument 'batch_size' must be non-negative, got {B}")
    T = len(indices_list)
    if 1 + B * T >= INT32_LIMIT:
        raise ValueError(f"{op}: 1 + batch_size * len(indices_list) must be below 2**31")
    host = include_last_offsets.device.type == "cpu"
    flags = [bool(f) for f in include_last_offsets.tolist()] if host else [False] * T
    for i, o in enumerate(offsets_list):
        lo, hi = (1 + flags[i], B + 1 + flags[i]) if host else (1, B + 2)
        if not lo <= o.numel() <= hi:
            raise ValueError(
                f"{op}: argument 'offsets_list[{i}]' must hold {lo} to {hi} offsets "
                f"(batch_size {B}, include_last_offsets {flags[i] if host else 'on the device'}), "
                f"got {o.numel()}"
            )
    numels = [t.numel() for t in indices_list]
    indices = cat_into(list(indices_list), sum(numels), torch.int32, device)
    weights = _weights(per_sample_weights, numels, sum(numels), device)
    with allocation_of(op, f"the offsets of batch_size = {B} per table"):
        offsets = torch.empty(1 + B * T, dtype=torch.int32, device=device)
        offsets[:1].zero_()
        zeros = int32_zeros(B, device)
        layout: list[torch.Tensor] = []
        for o in offsets_list:
            slots = o[1 : 1 + B]
            layout += [slots, zeros[: B - slots.numel()]]
        c = cat_into(layout, B * T, torch.int32, device).view(T, B)
    ends = [_wrap32(v) for v in exclusive_cumsum(numels + [0])]
    thr = [o.numel() - 1 - f for o, f in zip(offsets_list, flags, strict=True)]
    table = upload([thr, ends[:-1], ends[1:]], torch.int32, device)
    if host:
        limit = table[0]
    else:
        limit = torch.add(table[0], include_last_offsets, alpha=-1)
        if validation_enabled():
            checks = DataChecks(op)
            lo_hi = torch.aminmax(limit)
            first = "argument 'include_last_offsets' may be set only for a table of 2+ offsets"
            checks.add(lo_hi.min, 0, None, first)
            last = f"argument 'offsets_list' of {B + 2} offsets needs its 'include_last_offsets'"
            checks.add(lo_hi.max, None, B, last + " set (batch_size + 1 bag starts at most)")
            checks.assert_on_device()
    mask = torch.lt(arange_cached(B, device, torch.int32)[None, :], limit[:, None])
    torch.where(mask, c + table[1][:, None], table[2][:, None], out=offsets[1:].view(T, B))
    return indices, offsets, weights


def _padding_fake(
    indices_list: list[torch.Tensor],
    offsets_list: list[torch.Tensor],
    per_sample_weights: list[torch.Tensor],
    include_last_offsets: torch.Tensor,
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Meta (upstream registers none): sizes known from the shapes and ``batch_size``."""
    total = sum(t.numel() for t in indices_list)
    first = indices_list[0]
    weighted = any(w.numel() > 0 for w in per_sample_weights)
    return (
        first.new_empty(total, dtype=torch.int32),
        first.new_empty(1 + batch_size * len(indices_list), dtype=torch.int32),
        first.new_empty(total if weighted else 0, dtype=torch.float32),
    )


KERNELS = {
    COMBINE: {"PrivateUse1": tbe_input_combine_npu},
    PADDING: {"PrivateUse1": padding_fused_tbe_input_combine_npu, "Meta": _padding_fake},
}
