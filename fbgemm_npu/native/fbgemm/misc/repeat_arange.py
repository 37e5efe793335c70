"""``fbgemm::repeat_arange`` on npu: ``cat([arange(l) for l in lengths])``.

Semantics, measured on upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0): ``lengths`` int32 or int64,
the output has its dtype and ``sum(lengths)`` elements; ``lengths = [3, 0, 2]`` gives
``[0, 1, 2, 0, 1]``.  Upstream reads only ``lengths.size(0)`` elements of a 2-D tensor and gives
a result that depends on its memory for negative lengths; ours takes 1-D ``lengths`` and refuses
other ranks and negative lengths, naming the op and ``lengths``.

The output size is data: the one sync of the op reads ``sum(lengths)`` (with the data check
``min(lengths) >= 0`` in the same copy, :meth:`DataChecks.read_with`).  The values are a tensor
program without ``repeat_interleave`` (AI CPU on a 910B with tensor repeats) nor an int64 scan:
with ``E_k = l_0 + ... + l_k`` the segment ends, ``out[i] = i - E_{k-1}`` for ``i`` in segment
``k``, so ``out = cumsum(m)`` where ``m = [0, 1, 1, ..., 1]`` (``arange``'s increments) with
``-l_k`` added at ``E_k`` (empty segments stack at one position and telescope): int32
``cumsum`` / ``index_add`` (AI Core), ends clamped to ``[0, total]`` so any data stays in the
buffer.  A total of ``2**31`` or more is refused (an int64 output of 16 GiB and up; the int32
scans would wrap).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_ndim,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import steps_cached

__all__ = ["KERNELS", "repeat_arange_npu"]

REPEAT_ARANGE = "fbgemm::repeat_arange"
LIMIT = 2**31  # total elements: the int32 scans' range


def repeat_arange_npu(lengths: torch.Tensor) -> torch.Tensor:
    """``out = cat([arange(l, dtype=lengths.dtype) for l in lengths])``, 1-D ``lengths`` of
    int32 or int64 (the output's dtype), ``sum(lengths)`` elements.

    Math: ``E = cumsum(lengths)`` (int32), ``m = steps + index_add(E, -lengths)``, ``out =
    cumsum(m[:total])`` (module docstring).  Launches: the int64 ``sum`` and (checks on) ``amin``
    read in one copy (``cat``: the 1 sync), int32 cast (int64 lengths), ``cumsum``,
    ``index_add``, ``cumsum``, and the int64 cast of the result (int64 lengths).  Budgets:
    ``budgets.py``.
    """
    op = REPEAT_ARANGE
    t = check_tensor(op, "lengths", lengths)
    t = check_dtype(op, "lengths", t, (torch.int32, torch.int64)).detach()
    check_ndim(op, "lengths", t, (1,))
    if t.numel() == 0:
        return t.new_empty(0)
    checks = DataChecks(op)
    if validation_enabled():
        checks.add(t.amin(), 0, None, "argument 'lengths' must be non-negative")
    total = checks.read_with([t.sum(dtype=torch.int64)])[0]
    if total >= LIMIT or total < 0:
        raise ValueError(f"{op}: sum of argument 'lengths' must be in [0, 2**31), got {total}")
    if total == 0:
        return t.new_empty(0)
    small = t.to(torch.int32)
    ends = torch.cumsum(small, 0, dtype=torch.int32).clamp_(0, total)
    marks = torch.index_add(steps_cached(total + 1, t.device), 0, ends, small, alpha=-1)
    return torch.cumsum(marks[:total], 0, dtype=torch.int32).to(t.dtype)


KERNELS = {REPEAT_ARANGE: {"PrivateUse1": repeat_arange_npu}}
