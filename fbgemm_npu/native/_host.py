"""Host-side arithmetic shared by the families' index plans (sizes known on the host)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

__all__ = ["exclusive_cumsum"]


def exclusive_cumsum(sizes: Sequence[int]) -> list[int]:
    """``[0, s0, s0 + s1, ...]`` without the total: each block's start when blocks of ``sizes``
    are laid out back to back."""
    return list(accumulate(sizes, initial=0))[:-1]
