"""Opcheck samples of the eeg family (upstream's TBE index-distribution estimator and generator),
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def trace(n: int = 4000, rows: int = 500, seed: int = 0) -> torch.Tensor:
    """An index trace upstream's estimator can fit: heavy hitters over a long uniform tail."""
    g = torch.Generator().manual_seed(seed)
    hot = torch.randint(0, 5, (n // 4,), generator=g)
    return torch.cat([hot, torch.randint(0, rows, (n - n // 4,), generator=g)])


def _estimate(d: str) -> list[Sample]:
    return [((trace().to(d),), {})]


def _generate(d: str) -> list[Sample]:
    hitters = torch.tensor([0.2, 0.1, 0.05], dtype=torch.float64)
    return [
        ((hitters.to(d), 1.0, 1.2, 100, 64), {}),
        ((hitters.float().to(d), 3.0, 1.5, 50, 8), {}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::tbe_estimate_indices_distribution": _estimate,
    "fbgemm::tbe_generate_indices_from_distribution": _generate,
}
