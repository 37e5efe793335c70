"""The bucketize family's host decisions and the routes they choose (``_order.py``,
``_search.py``): int32 offsets below ``2**31`` indices and int64 from there, float sort keys
(one pass up to ``my_size`` ``2**24``, a float radix above), the boundary search and the VBE
features by a broadcast compare or (past ``COMPARE_LIMIT``) by gathers / segment ids, the counts'
cached zeros, ``my_size`` as a cached scalar.  Each limit is lowered by ``monkeypatch`` so that
small inputs take the other route; results are compared with upstream's CPU kernel or the
independent Python reference (``fbgemm_npu/testing/bucketize_references.py``), never with ours.
Also: bad lengths keep every row id, and so every gather and the counts' ``index_add``, inside
its buffer (a data check may be queued, not yet read).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native.fbgemm.bucketize import _order, _search
from fbgemm_npu.native.fbgemm.bucketize import _utils as ub
from fbgemm_npu.testing import bucketize_references as ref
from fbgemm_npu.testing.bucketize_inputs import assert_same_outputs, on_device
from fbgemm_npu.testing.counters import count

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64


def _case(seed: int, idt: torch.dtype, ldt: torch.dtype, p: int, **over: Any) -> dict[str, Any]:
    """A block call: 3 features x 4 rows, lengths 0..6, indices inside and past the blocks,
    negative and extreme ones included."""
    rng = random.Random(seed)
    lengths = [rng.randint(0, 6) for _ in range(12)]
    info = torch.iinfo(idt)
    x = [
        rng.choice([info.min, info.max, -1, rng.randint(-99, 400)])
        if rng.random() < 0.2
        else rng.randint(0, 60 * p)
        for _ in range(sum(lengths))
    ]
    kw: dict[str, Any] = {
        "lengths": torch.tensor(lengths, dtype=ldt),
        "indices": torch.tensor(x, dtype=idt),
        "bucketize_pos": True,
        "sequence": True,
        "block_sizes": torch.tensor([7, 0, 25], dtype=idt),
        "my_size": p,
        "weights": torch.rand(len(x)),
    }
    kw.update(over)
    return kw


def _boundaries(seed: int, idt: torch.dtype) -> list[torch.Tensor]:
    """Sorted boundaries from 0 below 300, one feature each: 1, 4 and 11 of them (the table
    pads the short ones with their last boundary)."""
    rng = random.Random(seed)
    return [torch.tensor([0, *sorted(rng.sample(range(1, 300), k))], dtype=idt) for k in (0, 3, 10)]


def _upstream(kw: dict[str, Any]) -> tuple[Any, ...]:
    return F.block_bucketize_sparse_features(**kw)


def _ours(kw: dict[str, Any]) -> tuple[Any, ...]:
    return F.block_bucketize_sparse_features(**{k: on_device(v, NPU) for k, v in kw.items()})


def test_offsets_dtype_is_decided_from_the_size() -> None:
    assert _order.offsets_dtype(0) == I32
    assert _order.offsets_dtype(2**31 - 1) == I32
    assert _order.offsets_dtype(2**31) == I64


@pytest.mark.parametrize("ldt", [I32, I64])
def test_int64_offsets_past_the_limit(monkeypatch: pytest.MonkeyPatch, ldt: torch.dtype) -> None:
    """Below the limit the call stays off the AI CPU; past it (lowered to 8 indices here) the
    offsets and counts are int64, on the AI CPU, and the outputs do not change."""
    for limit, on_ai_cpu in ((2**31, False), (8, True)):
        monkeypatch.setattr(_order, "INT32_LIMIT", limit)
        for seed in range(3):
            kw = _case(seed, I64, ldt, 4)
            with count() as c:
                got = _ours(kw)
            assert_same_outputs(got, _upstream(kw))
            assert (c.ai_cpu > 0) == on_ai_cpu, c.summary()
            lengths, x = kw["lengths"].to(I64), kw["indices"]
            with count() as c:
                got = F.bucketize_sparse_features(lengths.to(NPU), x.to(NPU), True, 3)
            assert_same_outputs(got, F.bucketize_sparse_features(lengths, x, True, 3))
            assert (c.ai_cpu > 0) == on_ai_cpu, c.summary()


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_float_radix_order_past_the_key_bits(monkeypatch: pytest.MonkeyPatch, p: int) -> None:
    """Float keys of 1 bit (patched from 24): one stable float sort per bit of the bucket,
    least significant first, give upstream's order."""
    monkeypatch.setattr(_order, "FLOAT_KEY_BITS", 1)
    for seed in range(3):
        kw = _case(seed, I32, I32, p)
        assert_same_outputs(_ours(kw), _upstream(kw))
        lengths, x = kw["lengths"], kw["indices"]
        got = F.bucketize_sparse_features(lengths.to(NPU), x.to(NPU), True, p)
        assert_same_outputs(got, F.bucketize_sparse_features(lengths, x, True, p))


def test_float_radix_order_of_wide_buckets() -> None:
    """Buckets up to 2**40 (three 24-bit digits... two here) sort as a stable integer sort does."""
    gen = torch.Generator().manual_seed(0)
    for top in (2**24 + 1, 2**40, 2**62):
        bucket = torch.randint(0, top, (500,), generator=gen)
        bucket[::7] = bucket[0]  # ties: the order among them is the input order
        want = torch.sort(bucket, stable=True).indices
        assert torch.equal(_order.stable_bucket_order(bucket, top), want), top


@pytest.mark.parametrize("idt", [I32, I64])
@pytest.mark.parametrize("limit", [2**24, 0], ids=["compare", "binary"])
def test_boundary_search_routes(
    monkeypatch: pytest.MonkeyPatch, idt: torch.dtype, limit: int
) -> None:
    """Boundaries of 1, 4 and 11 entries per feature (padded in the table), indices across
    them and past them, my_size below and above the counts (every lb inside), block sizes 0
    (the scaled search) and not, with and without total_num_blocks: the compare and the binary
    search (COMPARE_LIMIT 0) both give the reference's outputs."""
    monkeypatch.setattr(_order, "COMPARE_LIMIT", limit)
    for seed, p in ((0, 2), (1, 3), (2, 12), (3, 16)):
        for total in (None, torch.tensor([p, 2 * p, 3 * p + 1], dtype=idt)):
            kw = _case(seed, idt, I64, p, block_bucketize_pos=_boundaries(seed, idt))
            kw["indices"] = torch.where(kw["indices"] < 0, kw["indices"], kw["indices"] * 5 % 331)
            if total is not None:
                kw["total_num_blocks"] = total
            want = ref.block_bucketize_training(**kw)
            assert_same_outputs(_ours(kw), want)


def test_boundary_table_layout() -> None:
    """Slot 0 repeats the first boundary, the row pads with its last one (sign-flipped), the
    binary layout is a power of two wide; n_t and the last boundaries beside it."""
    pos = [torch.tensor([0, 5, 9]), torch.tensor([3])]
    t = _search.prepare_boundaries([p.to(NPU) for p in pos], I64, 10)
    flip = -(2**63)
    assert (t.table.cpu() ^ flip).tolist() == [[0, 0, 5, 9], [3, 3, 3, 3]]
    assert t.last.tolist() == [9, 3] and t.count.tolist() == [3, 1] and not t.binary
    big = _search.prepare_boundaries([p.to(NPU) for p in pos], I64, 2**23)
    assert big.binary and big.width == 4
    wide = _search.prepare_boundaries([torch.arange(5).to(NPU)], I64, 2**23)
    assert wide.binary and (wide.table.cpu() ^ flip).tolist() == [[0, 0, 1, 2, 3, 4, 4, 4]]


@pytest.mark.parametrize("limit", [2**24, 0], ids=["compare", "segment_ids"])
def test_vbe_feature_routes(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(_order, "COMPARE_LIMIT", limit)
    for seed in range(3):
        batch = [0, 5, 7]
        kw = _case(seed, I64, I32, 4, batch_size_per_feature=torch.tensor(batch, dtype=I32))
        kw["max_B"] = max(batch)
        assert_same_outputs(_ours(kw), _upstream(kw))


def test_counts_past_the_cache_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts larger than COUNTS_CACHE_LIMIT (0 here) come from fresh zeros, not the cache."""
    monkeypatch.setattr(_order, "COUNTS_CACHE_LIMIT", 0)
    kw = _case(0, I64, I64, 4)
    assert_same_outputs(_ours(kw), _upstream(kw))


@pytest.mark.parametrize("p", [2**16, 2**16 + 1])
def test_my_size_past_the_cached_scalar(p: int) -> None:
    """``my_size`` at or past SCALAR_LIMIT is a Python number in the divisor's ``where``."""
    assert p >= ub.SCALAR_LIMIT
    kw = _case(0, I64, I32, p, block_sizes=torch.tensor([7, 0, 2**20], dtype=I64))
    kw["lengths"] = kw["lengths"][:3]
    kw["indices"] = kw["indices"][: int(kw["lengths"].sum())]
    kw["weights"] = kw["weights"][: kw["indices"].numel()]
    assert_same_outputs(_ours(kw), _upstream(kw))


def test_bad_lengths_keep_row_ids_in_bounds() -> None:
    """Negative, short or long lengths: every row id stays in [0, N - 1] and every feature id
    in [0, T - 1], so the gathers and the counts' index_add read and write inside their buffers
    while the lengths' data check is still queued."""
    n_idx = 20
    for lengths in ([3, -4, 30, 2], [0, 0, 0, 1], [25, 0, 0, 0], [-5, -5, -5, -5], [2**31 - 1] * 4):
        rows = torch.tensor(lengths, dtype=I64, device=NPU)
        _, row = _order.element_rows(rows, n_idx)
        assert 0 <= int(row.min()) and int(row.max()) <= 3, lengths
        batch = torch.tensor([1, -3, 9], dtype=I32, device=NPU)
        feature = _order.element_features(row, 4, 3, batch)
        assert 0 <= int(feature.min()) and int(feature.max()) <= 2, lengths
    kw = _case(0, I64, I32, 4)
    kw["lengths"] = torch.tensor([9] * 12, dtype=I32)  # 108 elements, not 27
    with pytest.raises(RuntimeError, match=r"'lengths' must be non-negative and sum to"):
        _ours(kw)
        fbgemm_npu.check()  # a deferred check is raised here


@pytest.mark.parametrize("dtype", [I32, I64])
@pytest.mark.parametrize("p", [1, 2, 3, 8])
def test_uniform_buckets_lie_in_range(dtype: torch.dtype, p: int) -> None:
    """With block sizes in [0, max // P] (the data check's clamp) every index, negative and
    extreme ones included, gets a bucket in [0, P): the counts' index_add stays in bounds."""
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max, 12345], dtype=dtype)
    for b in (0, 1, 7, info.max // p):
        block = torch.full_like(x, b)
        bucket, _ = ub.uniform_buckets(x.to(NPU), block.to(NPU), p)
        assert 0 <= int(bucket.min()) and int(bucket.max()) < p, (p, b)
