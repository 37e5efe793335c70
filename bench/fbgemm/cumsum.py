"""Cumsum family on a torchrec-shaped lengths vector (26 features x batch 2048)."""

from __future__ import annotations

import torch

from bench.harness import Case, seeded
from fbgemm_npu.native.fbgemm.cumsum import cumsum

F = torch.ops.fbgemm


def _lengths(device: str) -> torch.Tensor:
    return torch.randint(0, 40, (26 * 2048,), generator=seeded(), dtype=torch.int64).to(device)


CASES = [
    Case(
        "cumsum",
        name,
        _lengths,
        getattr(cumsum, f"{name}_npu"),
        getattr(F, name),
        shape="lengths[53248] int64",
    )
    for name in (
        "asynchronous_complete_cumsum",
        "asynchronous_exclusive_cumsum",
        "asynchronous_inclusive_cumsum",
    )
]
