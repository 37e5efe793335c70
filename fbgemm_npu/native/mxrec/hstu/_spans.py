"""Every HSTU mask as key intervals per query row, built once per call.

The masks of the HSTU interfaces (Rec SDK's built-in causal mask with context and targets, its
delta and paged variants, v2's windows and arbitrary intervals, FBGEMM's ``window_size`` and
``func``) all say, for query row ``i`` of batch ``b``, which keys ``j`` it sees; and in every one
of them that set is a union of at most a few intervals.  So a call computes a small table
``spans [B, H, S_q, 2K]`` int32 of ``(lo, hi)`` pairs -- key ``j`` visible iff
``lo_k <= j < hi_k`` for some ``k`` -- in ``O(B * S_q)`` work, and each query tile tests its keys
against it in 1 launch per interval starting at key 0 and 3 per other interval
(:func:`fbgemm_npu.native.mxrec.hstu._attention.invisible`), where building the visibility of a
tile from the rules took 8 to 20.  Sequence lengths are folded in: a row outside its sequence has
only empty intervals, and no interval reaches past the batch's key length.

Rules of :func:`build_spans` (``a = i + shift`` is the key position of query row ``i``; ``L_k``
the key length; ``h = L_k - n_t`` the history length):

* valid rows ``q_first <= i < q_length``; keys ``0 <= j < L_k``;
* window ``(left, right)``: ``a - left <= j <= a + right`` (``-1``: unbounded on that side);
  ``(-1, 0)`` is causal, ``(-1, -1)`` no mask;
* context (causal only): a row with ``a < n_c`` sees every history key ``j < h``;
* targets (causal only, ``group > 0``): a row with ``a >= h`` sees the history ``j < h`` (its
  window's left edge applied) and the targets of its own group,
  ``h + group * floor((a - h) / group) <= j <= a``; ``group == 0`` leaves targets causal;
* ``intervals [B, H_f, S_q, 2K]`` (pairs ``(lo, hi)`` in key coordinates) replace the window,
  context and target rules: an arbitrary mask, clipped to the valid rows and keys.

Launches: about 6 plus 4 for context and 8 for targets (int32 arithmetic on ``[B, S_q]``, no
AI-CPU route); 0 syncs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native._index import arange_cached

__all__ = ["Spans", "build_spans", "mask_type_spans"]

I32 = torch.int32


@dataclass(frozen=True)
class Spans:
    """The interval table and, per interval, whether its ``lo`` is 0 in every row (then a tile
    tests ``j >= hi`` alone: 1 launch instead of 3)."""

    table: torch.Tensor  # [B or 1, H, S_q, 2K] int32 (lo, hi) pairs
    lo_zero: tuple[bool, ...]

    @property
    def heads(self) -> int:
        return self.table.size(1)


def _col(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.to(I32).view(-1, 1)


def build_spans(
    s_q: int,
    s_k: int,
    device: torch.device,
    q_lengths: torch.Tensor | None,
    k_lengths: torch.Tensor | None = None,
    *,
    q_first: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    window: tuple[int, int] = (-1, 0),
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    group: int = 1,
    intervals: torch.Tensor | None = None,
) -> Spans:
    """The spans of one call (module docstring).  ``q_lengths`` / ``k_lengths`` / ``q_first`` /
    ``shift`` / ``num_context`` / ``num_target``: ``[B]`` integer tensors or None
    (``q_lengths`` None: all ``s_q`` rows; ``k_lengths`` None: ``q_lengths``, or all ``s_k``
    keys).  With every per-batch argument None the table has batch size 1 (it broadcasts)."""
    left, right = window
    given = [
        t for t in (q_lengths, k_lengths, q_first, shift, num_context, num_target) if t is not None
    ]
    shape = (given[0].numel() if given else 1, s_q)  # sizes only: no sync
    i = arange_cached(s_q, device, I32).view(1, -1)
    q_len, k_len = _col(q_lengths), _col(k_lengths)
    if k_len is None:
        k_len = q_len if q_len is not None else torch.full((1, 1), s_k, dtype=I32, device=device)
    valid = None if q_len is None else i < q_len
    if q_first is not None:
        first_ok = i >= _col(q_first)
        valid = first_ok if valid is None else valid & first_ok
    a = i if shift is None else i + _col(shift)
    if intervals is not None:
        return _clip(intervals.to(I32), k_len, valid)
    lo = torch.zeros((), dtype=I32, device=device) if left < 0 else (a - left).clamp_min(0)
    hi = k_len if right < 0 else torch.minimum(a + (right + 1), k_len)
    n_t = _col(num_target)
    history = k_len if n_t is None else k_len - n_t
    if num_context is not None and right == 0:
        ctx = a < _col(num_context)  # context rows see all history, whatever the window
        if left >= 0:
            lo = torch.where(ctx, 0, lo)
        hi = torch.where(ctx, torch.maximum(hi, history), hi)
    pairs = [(lo, hi)]
    if n_t is not None and right == 0 and group > 0:
        target = a >= history  # a target row: the history part, then its group's targets
        start = history + torch.div(a - history, group, rounding_mode="floor") * group
        pairs = [(lo, torch.where(target, torch.minimum(hi, history), hi)),
                 (torch.where(target, start, hi), hi)]  # fmt: skip
    parts = [torch.broadcast_to(x, shape) for pair in pairs for x in pair]
    table = torch.stack(parts, -1).unsqueeze(1)  # [B, 1, S_q, 2K]
    lo_zero = (left < 0,) + (False,) * (len(pairs) - 1)
    return _finish(table, None if valid is None else valid.unsqueeze(1), lo_zero)


def _clip(table: torch.Tensor, k_len: torch.Tensor, valid: torch.Tensor | None) -> Spans:
    """User intervals ``[B, H, S_q, 2K]`` clipped into ``[0, L_k]`` (an empty or reversed pair
    stays empty) and emptied on invalid rows."""
    kl = k_len.view(-1, 1, 1, 1)
    lo = torch.minimum(table[..., 0::2].clamp_min(0), kl)
    hi = torch.maximum(torch.minimum(table[..., 1::2], kl), lo)
    out = torch.stack((lo, hi), -1).flatten(-2)
    return _finish(out, None if valid is None else valid.unsqueeze(1), (False,) * lo.size(-1))


def _finish(table: torch.Tensor, valid: torch.Tensor | None, lo_zero: tuple[bool, ...]) -> Spans:
    """Rows outside their sequence (``valid [B, 1, S_q]`` False) get only empty intervals: both
    ends 0, so an interval whose ``lo`` is 0 stays so."""
    if valid is not None:
        table = table * valid.unsqueeze(-1)
    return Spans(table.contiguous(), lo_zero)


def mask_type_spans(
    mask_type: int,
    s_q: int,
    s_k: int,
    device: torch.device,
    q_lengths: torch.Tensor | None,
    k_lengths: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    group: int = 0,
) -> Spans | None:
    """Rec SDK's ``mask_type``: 0 the built-in causal mask with context and targets; 2 (none)
    and 3 (custom tensor, applied on top) only the sequence lengths -- None when there are no
    lengths either (the normal layout)."""
    if mask_type != 0:
        if q_lengths is None:
            return None
        return build_spans(s_q, s_k, device, q_lengths, k_lengths, shift=shift, window=(-1, -1))
    return build_spans(
        s_q, s_k, device, q_lengths, k_lengths, shift=shift, window=(-1, 0),
        num_context=num_context, num_target=num_target, group=group,
    )  # fmt: skip
