"""``populate_bucketized_permute``, ``get_source_mask``, ``get_unique_indices`` and
``get_unique_indices_with_inverse`` on npu against upstream's CPU kernels: int32 / int64, empty
inputs, consistent and arbitrary ``bucketized_lengths``, one and two digit passes of the unique
sort (``max_indices`` below and past ``2**24``), every combination of the optional outputs;
results exact."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import check
from fbgemm_npu.testing.op_samples_bucketize_more import (
    populate_inputs,
    source_mask_inputs,
    unique_inputs,
)

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64


def _same(want: object, got: object) -> None:
    check()
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got, strict=True):
        if w is None:
            assert g is None
            continue
        assert g.device.type == NPU and g.dtype == w.dtype and g.shape == w.shape, (g, w)
        assert torch.equal(g.cpu(), w), (g.cpu(), w)


@pytest.mark.parametrize("consistent", [True, False])
@pytest.mark.parametrize("dtypes", [(I64, I64), (I32, I32), (I32, I64), (I64, I32)])
@pytest.mark.parametrize(("rows", "my_size"), [(1, 1), (6, 3), (60, 8), (0, 4)])
def test_populate_equals_upstream(rows: int, my_size: int, dtypes: tuple, consistent: bool) -> None:
    args = populate_inputs(rows + my_size, rows, my_size, *dtypes, consistent=consistent)
    want = F.populate_bucketized_permute(*args)
    _same(want, F.populate_bucketized_permute(*(t.to(NPU) for t in args)))


@pytest.mark.parametrize("dtype", [I64, I32])
@pytest.mark.parametrize("batch", [0, 1, 7, 300])
def test_source_mask_equals_upstream(batch: int, dtype: torch.dtype) -> None:
    ns, nt, size = source_mask_inputs(batch, batch, dtype)
    want = F.get_source_mask(ns, nt, size)
    _same(want, F.get_source_mask(ns.to(NPU), nt.to(NPU), size))


def test_source_mask_all_zero_counts() -> None:
    ns = torch.zeros(4, dtype=I64)
    _same(F.get_source_mask(ns, ns, 0), F.get_source_mask(ns.to(NPU), ns.to(NPU), 0))


UNIQUE_SHAPES = [(0, 10), (1, 0), (5, 3), (200, 1000), (3000, 2**20), (150, 2**40)]


@pytest.mark.parametrize("count", [False, True])
@pytest.mark.parametrize("dtype", [I64, I32])
@pytest.mark.parametrize(("n", "top"), UNIQUE_SHAPES)
def test_unique_equals_upstream(n: int, top: int, dtype: torch.dtype, count: bool) -> None:
    if dtype == I32 and top >= 2**31:
        top = 2**31 - 1
    v = unique_inputs(n + 1, n, top, dtype)
    _same(F.get_unique_indices(v, top, count), F.get_unique_indices(v.to(NPU), top, count))


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("count", [False, True])
@pytest.mark.parametrize(("n", "top"), UNIQUE_SHAPES)
def test_unique_with_inverse_equals_upstream(n: int, top: int, count: bool, inverse: bool) -> None:
    v = unique_inputs(n + 2, n, top)
    want = F.get_unique_indices_with_inverse(v, top, count, inverse)
    _same(want, F.get_unique_indices_with_inverse(v.to(NPU), top, count, inverse))


def test_unique_default_inverse_flag_and_strided_input() -> None:
    base = unique_inputs(9, 40, 77)
    v = base[::2]
    want = F.get_unique_indices_with_inverse(v.contiguous(), 77, True)
    _same(want, F.get_unique_indices_with_inverse(base.to(NPU)[::2], 77, True))


def test_unique_all_equal_and_all_distinct() -> None:
    for v in (torch.full((50,), 7), torch.randperm(64)):
        want = F.get_unique_indices_with_inverse(v, 100, True, True)
        _same(want, F.get_unique_indices_with_inverse(v.to(NPU), 100, True, True))


def test_populate_empty_mapping_whatever_the_sizes() -> None:
    """Upstream returns an empty result for an empty ``bucket_mapping`` even where the other
    sizes disagree (no index to place)."""
    args = (torch.tensor([0, 0]), torch.zeros(3, dtype=I64), torch.zeros(0, dtype=I32))
    want = F.populate_bucketized_permute(*args)
    _same(want, F.populate_bucketized_permute(*(t.to(NPU) for t in args)))
