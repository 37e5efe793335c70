"""Pieces the jagged family's 1-D segment ops share (``slicing.py``, ``select.py``): int32
segment bounds of lengths, their data checks, and the per-position gather of a segment value.

A 1-D jagged tensor is ``values [N]`` cut into ``B`` segments by ``lengths``; an op that copies a
part of every segment into a packed output of ``P`` positions (``sum`` of the parts) computes,
per output position ``p``, its segment ``s(p)`` (:func:`~fbgemm_npu.native._index.segment_ids`:
int32 ``index_add`` + ``cumsum``, no ``searchsorted``) and reads ``values[p + base[s(p)]]``,
``base[s]`` being the first row segment ``s`` reads minus its first output position.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import DataChecks
from fbgemm_npu.native._index import arange_cached, segment_ids

__all__ = ["I32_MAX", "check_lengths_data", "ends_i32", "segment_rows"]

I32_MAX = 2**31 - 1


def ends_i32(lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(starts, ends)``: the exclusive and inclusive int32 cumsums of ``lengths`` (an int32
    scan: int64 ``cumsum`` runs on a 910B's AI CPU).  Launches: the int32 cast (int64 lengths),
    ``cumsum``, ``sub``."""
    small = lengths if lengths.dtype == torch.int32 else lengths.to(torch.int32)
    ends = torch.cumsum(small, 0, dtype=torch.int32)
    return ends - small, ends


def check_lengths_data(checks: DataChecks, lengths: torch.Tensor, arg: str) -> None:
    """Queue ``0 <= lengths[b] < 2**31`` and ``sum(lengths) < 2**31`` (the int32 scans' range)
    on ``checks``: ``aminmax`` and an int64 ``sum``."""
    lo, hi = torch.aminmax(lengths)
    checks.add(lo, 0, None, f"argument '{arg}' must be >= 0")
    checks.add(hi, None, I32_MAX, f"argument '{arg}' must be < 2**31")
    checks.add(
        lengths.sum(dtype=torch.int64), None, I32_MAX, f"argument '{arg}' must sum to < 2**31"
    )


def segment_rows(starts: torch.Tensor, base: torch.Tensor, total: int, n: int) -> torch.Tensor:
    """``rows[p] = p + base[s(p)]`` for ``p < total``, clamped into ``[0, n)`` (``n > 0``), where
    ``s(p)`` is the segment of output position ``p`` given the segments' output ``starts``
    (``[B]``, int32, ``B > 0``).  The ids are in ``[0, B)`` whatever the data (the bounds passed
    to ``segment_ids`` are the B - 1 inner starts).  Launches: ``segment_ids``' three, the gather
    of ``base``, the ``add`` of the cached ``arange``, ``clamp_``."""
    seg = segment_ids(starts, total)
    rows = base.index_select(0, seg) + arange_cached(total, base.device)
    return rows.clamp_(0, n - 1)
