"""Opcheck samples of the sequence family (``mxrec::multislice_concat``,
``mxrec::reverse_sequence``), merged into :mod:`fbgemm_npu.testing.op_samples`: small valid
calls built fresh on ``device``; reverse_sequence's first sample requires grad (its autograd
kernel), the last does not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _multislice(d: str) -> list[Sample]:
    x = torch.randn(3, 10, generator=_g(0)).to(d)
    return [((x, 2, [2, 1], [0, 7, 3], [3, -1, 4]), {})]


def _reverse(d: str) -> list[Sample]:
    x = torch.randn(3, 5, 4, generator=_g(1)).to(d)
    lens = torch.tensor([0, 5, 3], dtype=torch.int64).to(d)
    lens32 = torch.tensor([2, 1, 4], dtype=torch.int32).to(d)
    return [((x.clone().requires_grad_(), lens), {}), ((x, lens32), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::multislice_concat": _multislice,
    "mxrec::reverse_sequence": _reverse,
}
