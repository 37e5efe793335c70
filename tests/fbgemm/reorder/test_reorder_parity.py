"""The reorder family on npu against upstream's CPU kernels and a plain-Python reference
(``conformance/specs/fbgemm/reorder/inputs.py``): every op, request-major and broadcast, with
``max_batch_size``, int32 / int64 offsets and every value dtype upstream takes, empty requests,
empty batches, non-contiguous inputs.  Integers and floats exact (a gather)."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.fbgemm.reorder.inputs import (
    Batch,
    expected_lengths,
    expected_rows,
    make_batch,
    split_by_request,
)

F = torch.ops.fbgemm
NPU = "npu"

SHAPES = {
    "3 requests": ([2, 0, 1], 2),
    "one ad": ([1], 1),
    "empty requests": ([0, 3, 0, 0, 2], 3),
    "many": ([4, 1, 3, 2, 5, 0, 1, 2], 5),
}
VALUE_TYPES = (torch.int64, torch.int32, torch.float32, torch.float16, torch.bfloat16)


def _npu(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(NPU) for t in ts]


def _equal(got: torch.Tensor, want: torch.Tensor, ref: torch.Tensor | None = None) -> None:
    assert got.device.type == NPU and got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu(), want)
    if ref is not None:
        assert torch.equal(want.reshape(-1), ref.reshape(-1).to(want.dtype))


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16])
def test_lengths(shape: str, broadcast: bool, dtype: torch.dtype) -> None:
    nbs, t = SHAPES[shape]
    b = make_batch(nbs, t, broadcast, seed=len(nbs))
    lengths = b.lengths.to(dtype)
    bo_dtype = torch.int64 if dtype == torch.int64 else torch.int32
    bo = b.batch_offsets.to(bo_dtype)
    want = F.reorder_batched_ad_lengths(lengths, bo, b.num_ads, broadcast)
    got = F.reorder_batched_ad_lengths(*_npu(lengths, bo), b.num_ads, broadcast)
    _equal(got, want, expected_lengths(b))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_lengths_max_batch_size(shape: str) -> None:
    nbs, t = SHAPES[shape]
    mbs = sum(nbs) + 3
    b = make_batch(nbs, t, seed=1, max_batch_size=mbs)
    want = F.reorder_batched_ad_lengths(b.lengths, b.batch_offsets, b.num_ads, False, mbs)
    got = F.reorder_batched_ad_lengths(*_npu(b.lengths, b.batch_offsets), b.num_ads, False, mbs)
    _equal(got, want, expected_lengths(b))


def test_lengths_keep_a_2d_shape_and_read_strided_input() -> None:
    b = make_batch([2, 1], 2, seed=3)
    two_d = b.lengths.view(2, 3)
    want = F.reorder_batched_ad_lengths(two_d, b.batch_offsets, 3)
    _equal(F.reorder_batched_ad_lengths(*_npu(two_d, b.batch_offsets), 3), want)
    wide = torch.stack([b.lengths, -b.lengths], 1)  # [:, 0] is strided; upstream reads it flat
    got = F.reorder_batched_ad_lengths(wide.to(NPU)[:, 0], b.batch_offsets.to(NPU), 3)
    _equal(got, F.reorder_batched_ad_lengths(b.lengths, b.batch_offsets, 3))


def _indices_args(b: Batch) -> tuple[torch.Tensor, ...]:
    return b.offsets, b.values, b.reordered, b.batch_offsets


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("offsets", [torch.int32, torch.int64])
def test_indices(shape: str, broadcast: bool, offsets: torch.dtype) -> None:
    nbs, t = SHAPES[shape]
    b = make_batch(nbs, t, broadcast, seed=2, offsets_dtype=offsets)
    n = b.total if broadcast else -1
    want = F.reorder_batched_ad_indices(*_indices_args(b), b.num_ads, broadcast, n)
    got = F.reorder_batched_ad_indices(*_npu(*_indices_args(b)), b.num_ads, broadcast, n)
    _equal(got, want, expected_rows(b))


@pytest.mark.parametrize("dtype", VALUE_TYPES)
def test_indices_value_dtypes(dtype: torch.dtype) -> None:
    b = make_batch([3, 1, 2], 4, seed=4, values_dtype=dtype, max_len=4)
    want = F.reorder_batched_ad_indices(*_indices_args(b), b.num_ads)
    _equal(F.reorder_batched_ad_indices(*_npu(*_indices_args(b)), b.num_ads), want)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("offsets", [torch.int32, torch.int64])
def test_sequence_embeddings(shape: str, dtype: torch.dtype, offsets: torch.dtype) -> None:
    nbs, t = SHAPES[shape]
    b = make_batch(nbs, t, seed=5, offsets_dtype=offsets, values_dtype=dtype, dim=3)
    bo = b.batch_offsets.to(offsets)
    args = (b.offsets, b.values, b.reordered, bo)
    want = F.reorder_batched_sequence_embeddings(*args, b.num_ads)
    got = F.reorder_batched_sequence_embeddings(*_npu(*args), b.num_ads)
    _equal(got, want, expected_rows(b))


def test_sequence_embeddings_uint8_as_upstream_cuda() -> None:
    """uint8 rows, which upstream's CUDA kernel takes and its CPU kernel refuses: the Python
    reference, and upstream on the same rows widened to float32."""
    b = make_batch([3, 0, 2], 3, seed=10, values_dtype=torch.float32, dim=5)
    rows = (b.values.abs() * 40).to(torch.uint8)
    args = (b.offsets, rows, b.reordered, b.batch_offsets)
    got = F.reorder_batched_sequence_embeddings(*_npu(*args), b.num_ads)
    wide = F.reorder_batched_sequence_embeddings(b.offsets, rows.float(), *args[2:], b.num_ads)
    b.values = rows
    _equal(got, wide.to(torch.uint8), expected_rows(b))


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float16])
def test_cat(shape: str, broadcast: bool, dtype: torch.dtype) -> None:
    nbs, t = SHAPES[shape]
    b = make_batch(nbs, t, broadcast, seed=6, values_dtype=dtype)
    parts = split_by_request(b)
    args = (b.offsets, parts, b.reordered, b.batch_offsets, b.num_ads, broadcast, b.total)
    want = F.cat_reorder_batched_ad_indices(*args)
    dev = (*_npu(b.offsets), [p.to(NPU) for p in parts], *_npu(b.reordered, b.batch_offsets))
    got = F.cat_reorder_batched_ad_indices(*dev, b.num_ads, broadcast, b.total)
    _equal(got, want, expected_rows(b))


@pytest.mark.parametrize("broadcast", [False, True])
def test_cat_max_batch_size_and_offsets_not_from_zero(broadcast: bool) -> None:
    """Padding slots past NA, and offsets that start at 5 with a longer tensor per request:
    upstream counts each request's runs from its own first offset."""
    mbs = 9
    b = make_batch([2, 0, 3], 3, broadcast, seed=7, max_batch_size=mbs)
    offsets = b.offsets + 5
    parts = [torch.cat([p, torch.full((2,), -7, dtype=p.dtype)]) for p in split_by_request(b)]
    args = (offsets, parts, b.reordered, b.batch_offsets, b.num_ads, broadcast, b.total)
    want = F.cat_reorder_batched_ad_indices(*args, False, mbs)
    dev = (*_npu(offsets), [p.to(NPU) for p in parts], *_npu(b.reordered, b.batch_offsets))
    got = F.cat_reorder_batched_ad_indices(*dev, b.num_ads, broadcast, b.total, True, mbs)
    _equal(got, want, expected_rows(b))


def test_empty_outputs() -> None:
    b = make_batch([2, 1], 2, seed=8, max_len=0)  # every length 0
    assert b.total == 0 and b.values.numel() == 0
    want = F.reorder_batched_ad_indices(*_indices_args(b), b.num_ads)
    _equal(F.reorder_batched_ad_indices(*_npu(*_indices_args(b)), b.num_ads), want)
    parts = split_by_request(b)
    args = (b.offsets, parts, b.reordered, b.batch_offsets, b.num_ads, False, 0)
    dev = (*_npu(b.offsets), [p.to(NPU) for p in parts], *_npu(b.reordered, b.batch_offsets))
    _equal(
        F.cat_reorder_batched_ad_indices(*dev, b.num_ads, False, 0),
        F.cat_reorder_batched_ad_indices(*args),
    )
    no_tables = torch.zeros(0, dtype=torch.int32)
    bo = b.batch_offsets
    want = F.reorder_batched_ad_lengths(no_tables, bo, 3)
    _equal(F.reorder_batched_ad_lengths(*_npu(no_tables, bo), 3), want)
    emb = torch.zeros(0, 4)
    one = torch.zeros(1, dtype=torch.int32)
    want = F.reorder_batched_sequence_embeddings(one, emb, one, bo, 3)
    _equal(F.reorder_batched_sequence_embeddings(*_npu(one, emb, one, bo), 3), want)


def test_non_contiguous_indices() -> None:
    b = make_batch([3, 2], 2, seed=9)
    wide = torch.stack([b.values, b.values + 1], 1)
    want = F.reorder_batched_ad_indices(*_indices_args(b), b.num_ads)
    c, r, bo = _npu(b.offsets, b.reordered, b.batch_offsets)
    got = F.reorder_batched_ad_indices(c, wide.to(NPU)[:, 0], r, bo, b.num_ads)
    _equal(got, want)
