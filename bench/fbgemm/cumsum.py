"""Cumsum family on a torchrec-shaped lengths vector (26 features x batch 2048), int64 (scanned
as two int32 words on the AI Core) and int32 (one int32 scan)."""

from __future__ import annotations

import torch

from bench.harness import Case, seeded
from fbgemm_npu.native.fbgemm.cumsum import cumsum

F = torch.ops.fbgemm
N = 26 * 2048


def _lengths(device: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.randint(0, 40, (N,), generator=seeded(), dtype=dtype).to(device)


CASES = [
    Case(
        "cumsum",
        name + ("" if dtype == torch.int64 else "_int32"),
        lambda dev, dtype=dtype: _lengths(dev, dtype),
        getattr(cumsum, f"{name}_npu"),
        getattr(F, name),
        shape=f"lengths[{N}] {str(dtype).removeprefix('torch.')}",
    )
    for dtype in (torch.int64, torch.int32)
    for name in (
        "asynchronous_complete_cumsum",
        "asynchronous_exclusive_cumsum",
        "asynchronous_inclusive_cumsum",
    )
]
