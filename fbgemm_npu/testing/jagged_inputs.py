"""Small inputs of the jagged family's tests, built on the host (move them with :func:`to_npu`).

:func:`jagged` is a batch of one jagged dim whose rows are sometimes longer than ``max_len``
(truncation), :func:`nested` one of two or more jagged dims; ``VALUES`` / ``OFFSETS`` are five
rows in three segments, small enough to read a result by eye.  :func:`dims_path` names the
budget path of a call with ``k`` jagged dims (``fbgemm_npu/native/fbgemm/jagged/budgets.py``).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["OFFSETS", "VALUES", "dims_path", "jagged", "nested", "nested_lengths", "to_npu"]

VALUES = torch.arange(1.0, 6.0).view(5, 1)
OFFSETS = torch.tensor([0, 2, 2, 5])  # rows of length 2, 0 and 3

_DIMS_PATHS = {1: None, 2: "two_dims", 3: "three_dims"}


def dims_path(k: int, *more: str) -> str | None:
    """The budget path of a call with ``k`` jagged dims, joined with ``more`` (path parts such
    as ``"no_total_L"``): ``dims_path(2, "no_total_L") == "two_dims_no_total_L"``."""
    parts = [p for p in (_DIMS_PATHS[k], *more) if p]
    return "_".join(parts) or None


def _offsets(lengths: torch.Tensor, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(dtype)


def jagged(
    b: int,
    max_len: int,
    d: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    index: torch.dtype = torch.int64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Values ``[N, d]`` and offsets of ``b`` rows with lengths 0..max_len+2 (some truncated)."""
    gen = torch.Generator().manual_seed(seed)
    offsets = _offsets(torch.randint(0, max_len + 3, (b,), generator=gen), index)
    values = torch.randn(int(offsets[-1]), d, generator=gen).to(dtype)
    return values, offsets


def nested(
    b: int, seed: int = 0, dims: int = 2, index: torch.dtype = torch.int64
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A tensor of ``dims`` jagged dims, values ``[N, 3]``: b rows of 0..3 sub-rows at each level
    but the last, of 0..4 values at the last (:func:`nested_lengths` holds every row); offsets
    of dtype ``index``."""
    gen = torch.Generator().manual_seed(seed)
    rows, offsets = b, []
    for level in range(dims):
        top = 5 if level == dims - 1 else 4
        offsets.append(_offsets(torch.randint(0, top, (rows,), generator=gen), index))
        rows = int(offsets[-1][-1])
    return torch.randn(rows, 3, generator=gen), offsets


def nested_lengths(dims: int) -> list[int]:
    """Dense lengths that hold every row of :func:`nested` with ``dims`` jagged dims."""
    return [3] * (dims - 1) + [4]


def to_npu(x: Any) -> Any:
    """``x`` on the npu device: tensors moved, lists and tuples of them moved element-wise."""
    if isinstance(x, torch.Tensor):
        return x.to("npu")
    if isinstance(x, (list, tuple)):
        return type(x)(to_npu(t) for t in x)
    return x
