"""Opcheck samples of the zch family (``fbgemm_npu/native/fbgemm/zch/``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _murmur_hash3(d: str) -> list[Sample]:
    return [((torch.tensor([12345]).to(d), 0, 0), {}), ((torch.tensor([-7]).to(d), 3, 11), {})]


def _zero_collision_hash(d: str) -> list[Sample]:
    ids = torch.tensor([7, 12, 13, -1, 0, 7])
    table = torch.full((10, 1), -1)
    table[3, 0], table[6, 0] = 7, 12
    ro = {"circular_probe": True, "readonly": True}
    chunks = {
        "local_sizes": torch.full((6,), 5).to(d),
        "offsets": torch.tensor([0, 5, 0, 5, 0, 5]).to(d),
    }
    return [
        ((ids.to(d), table.to(d), 4), ro),
        ((ids.int().to(d), table.int().to(d), 4), {**ro, "disable_fallback": True}),
        ((ids.to(d), table.to(d), 3), {**ro, **chunks}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::murmur_hash3": _murmur_hash3,
    "fbgemm::zero_collision_hash": _zero_collision_hash,
}
