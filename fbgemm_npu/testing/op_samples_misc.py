"""Opcheck samples of the small upstream ops added for issue 13 (the cumsum family's
``asynchronous_batched_complete_cumsum``, the misc family, ``index_select_dim0``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _batched_complete_cumsum(d: str) -> list[Sample]:
    i64 = torch.tensor([[3, 0, 2], [1, 4, 2]], dtype=torch.int64).to(d)
    i32 = torch.tensor([[1, 4], [2, 0], [5, 5]], dtype=torch.int32).to(d)
    f32 = torch.tensor([[0.5, -1.0, 2.0, 0.25]]).to(d)
    return [((i64,), {}), ((i32,), {}), ((f32,), {})]


def _repeat_arange(d: str) -> list[Sample]:
    i64 = torch.tensor([3, 0, 2, 1], dtype=torch.int64).to(d)
    i32 = torch.tensor([0, 4, 1], dtype=torch.int32).to(d)
    return [((i64,), {}), ((i32,), {})]


def _index_select_dim0(d: str) -> list[Sample]:
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0)).to(d)
    i64 = torch.tensor([4, 0, 0, 2], dtype=torch.int64).to(d)
    i32 = torch.tensor([1, 3], dtype=torch.int32).to(d)
    return [((x.clone().requires_grad_(), i64), {}), ((x, i32, 2, 3, True), {})]


def _histogram_binning_calibration(d: str) -> list[Sample]:
    g = torch.Generator().manual_seed(1)
    ex = torch.tensor([0.0, 5, 20, 30, 1, 100, 0, 7, 12, 3], dtype=torch.float64)
    pos = (ex * 0.3).floor()
    logit = torch.randn(6, generator=g)
    scalars = (0.4, 0.0, 1.0, 4, 0.9995)
    return [
        ((logit.to(d), ex.to(d), pos.to(d), *scalars), {}),
        ((logit.view(2, 3).half().to(d), ex.to(d), pos.to(d), *scalars), {}),
    ]


def _by_feature_args(d: str) -> tuple[torch.Tensor, ...]:
    logit = torch.randn(6, generator=torch.Generator().manual_seed(2))
    sv = torch.tensor([0, 2, 1, 3, 0], dtype=torch.int64)
    sl = torch.tensor([1, 0, 2, 1, 1, 0], dtype=torch.int64)
    ex = torch.arange(15, dtype=torch.float64)  # (num_segments 2 + 1) x 5 bins
    return tuple(t.to(d) for t in (logit, sv, sl, ex, (ex * 0.3).floor()))


def _hbc_by_feature(d: str) -> list[Sample]:
    logit, sv, sl, ex, pos = _by_feature_args(d)
    return [((logit, sv, sl, 2, ex, pos, 5, 0.4, 0.0, 1.0, 4, 0.9), {})]


def _generic_hbc_by_feature(d: str) -> list[Sample]:
    logit, sv, sl, ex, pos = _by_feature_args(d)
    edges = torch.tensor([0.2, 0.4, 0.6, 0.8], dtype=torch.float64).to(d)
    return [((logit, sv, sl, 2, ex, pos, edges, 0.4, 4, 0.9), {})]


def _rowwise_prune(d: str) -> list[Sample]:
    g = torch.Generator().manual_seed(3)
    weight, indicator = torch.randn(6, 3, generator=g).to(d), torch.randn(6, generator=g).to(d)
    return [
        ((weight, indicator, 0.5, torch.int32), {}),
        ((weight, indicator, 0.5, torch.int64, False, 4, None), {}),
        ((weight[:, :1], indicator, 0.5, torch.int64), {}),  # skip: nothing worth pruning
    ]


def _unary_embeddings(d: str) -> list[Sample]:
    weight = torch.randn(2, 7, 1, generator=torch.Generator().manual_seed(4))
    table_offsets = torch.tensor([0, 3, 7])
    offsets = torch.tensor([0, 1, 3, 3, 4, 6, 8])
    indices = torch.tensor([0, 2, 1, 3, 0, 1, 2, 3])
    ints = tuple(t.to(d) for t in (table_offsets, offsets, indices))
    return [
        ((weight.to(d).requires_grad_(), *ints), {}),
        ((weight.half().to(d), *(t.int() for t in ints)), {}),
    ]


def _bottom_k(d: str) -> list[Sample]:
    x = torch.tensor([[5, 3, 5, 1, 0, 3], [2, 2, 2, 2, 1, 0], [9, 8, 7, 6, 5, 4]]).to(d)
    fixed, variable = torch.tensor([0, 2]).to(d), torch.tensor([0, 1, 3, 6]).to(d)
    return [((x, fixed, False), {}), ((x, fixed, True), {}), ((x, variable, True), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::asynchronous_batched_complete_cumsum": _batched_complete_cumsum,
    "fbgemm::repeat_arange": _repeat_arange,
    "fbgemm::index_select_dim0": _index_select_dim0,
    "fbgemm::histogram_binning_calibration": _histogram_binning_calibration,
    "fbgemm::histogram_binning_calibration_by_feature": _hbc_by_feature,
    "fbgemm::generic_histogram_binning_calibration_by_feature": _generic_hbc_by_feature,
    "fbgemm::embedding_bag_rowwise_prune": _rowwise_prune,
    "fbgemm::batched_unary_embeddings": _unary_embeddings,
    "fbgemm::bottom_k_per_row": _bottom_k,
}
