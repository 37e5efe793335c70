"""Opcheck samples of ``fbgemm::batch_index_select_dim0_tensor`` (the index-select family's tensor
form of ``batch_index_select_dim0``), merged into :mod:`fbgemm_npu.testing.op_samples`: small
valid calls built fresh on ``device``, the size tensors on the CPU as upstream's callers keep
them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _sizes(*lists: list[int]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.tensor(v, dtype=torch.int64) for v in lists)


def _batch_tensor(d: str) -> list[Sample]:
    tables = torch.arange(18.0).to(d)  # (3, 2) and (4, 3) tables back to back
    plain = (tables.clone().requires_grad_(), torch.tensor([2, 0, 1, 3, 3]).to(d))
    permuted = (tables, torch.tensor([2, 0, 1, 3]).to(d))
    return [
        ((*plain, *_sizes([2, 3], [3, 4], [2, 3])), {}),
        ((*permuted, *_sizes([2, 2], [3, 4], [2, 3])), {"permute_output_dim_0_1": True}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::batch_index_select_dim0_tensor": _batch_tensor,
}
