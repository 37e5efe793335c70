"""Inputs of the permute family's tests: a random jagged batch of any size and a small one whose
permuted result reads by eye, on the host (move them with :func:`on_npu`)."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["SMALL", "on_npu", "sparse_batch"]

# Three features of batch 2, nine values; permute [2, 0, 1] gives values 6..8, 0, 1..5.
SMALL = {
    "permute": torch.tensor([2, 0, 1], dtype=torch.int32),
    "lengths": torch.tensor([[1, 2], [0, 3], [2, 1]]),
    "values": torch.arange(9),
    "weights": torch.arange(9.0),
}


def sparse_batch(
    t_in: int, b: int, seed: int = 0, weights: bool = False
) -> dict[str, torch.Tensor]:
    """``t_in`` features x ``b`` samples, lengths in 0..11, int64 values, a random int32
    ``permute`` of the features, float32 ``weights`` when asked."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 12, (t_in, b), generator=gen)
    n = int(lengths.sum())
    out = {"lengths": lengths, "values": torch.randint(0, 1000, (n,), generator=gen)}
    out["permute"] = torch.randperm(t_in, generator=gen).to(torch.int32)
    if weights:
        out["weights"] = torch.rand(n, generator=gen)
    return out


def on_npu(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with every tensor moved to the npu device."""
    return {k: v.to("npu") if isinstance(v, torch.Tensor) else v for k, v in d.items()}
