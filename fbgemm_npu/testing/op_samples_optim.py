"""Opcheck samples of the optim family (``mxrec::fused_sgd``, ``mxrec::fused_lazy_adam``),
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``
(duplicates, a negative and a past-the-table index among them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _table(d: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    var, grad = torch.randn(6, 4, generator=g), torch.randn(5, 4, generator=g)
    idx = torch.tensor([1, 4, 1, -1, 9])
    return var.to(d), grad.to(d), idx.to(d)


def _sgd(d: str) -> list[Sample]:
    var, grad, idx = _table(d, 0)
    lr = torch.tensor(0.1).to(d)
    return [((var, grad, idx, lr), {}), ((var.clone(), grad, idx.int(), lr), {"weight_decay": 0.1})]


def _adam(d: str) -> list[Sample]:
    var, grad, idx = _table(d, 1)
    m, v = torch.zeros_like(var), torch.ones_like(var)
    lr = torch.tensor([0.01]).to(d)
    return [((var, m, v, grad, idx, lr), {"beta1": 0.8})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::fused_sgd": _sgd,
    "mxrec::fused_lazy_adam": _adam,
}
