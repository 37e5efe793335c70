"""The paged-cache gather (``native/mxrec/hstu/_paged.py: gather_pages``) against a per-sequence
loop written from the layout (pages concatenated, the last one cut to ``last_page_len``): page
sizes 1 / 32 / 128, full and partial last pages, sequences without pages, pages shared and out of
order, int32 / int64 metadata, every float dtype, npu and CPU; bad page data (queued checks)
raises naming the argument and stays memory-safe; the launch count does not grow with B or the
page count, and is sync-free with ``s_max_cache`` given."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._checks import DataChecks, validation_enabled
from fbgemm_npu.native._pending import check
from fbgemm_npu.native.mxrec.hstu._paged import gather_pages
from fbgemm_npu.testing.counters import count

N_K, D = 2, 4


def _loop_reference(cache, po, ids, last, s_c):  # type: ignore[no-untyped-def]
    """Per sequence: its pages' K / V rows concatenated, the last page cut, padded to ``s_c``."""
    b = last.numel()
    k = torch.zeros(b, s_c, N_K, D, dtype=cache.dtype)
    v = torch.zeros_like(k)
    lengths = []
    for i in range(b):
        pages = [int(p) for p in ids[int(po[i]) : int(po[i + 1])]]
        rows_k = [cache[p, 0] for p in pages]
        rows_v = [cache[p, 1] for p in pages]
        if pages:
            rows_k[-1], rows_v[-1] = rows_k[-1][: int(last[i])], rows_v[-1][: int(last[i])]
            kk, vv = torch.cat(rows_k), torch.cat(rows_v)
        else:
            kk = vv = torch.zeros(0, N_K, D, dtype=cache.dtype)
        k[i, : kk.size(0)], v[i, : vv.size(0)] = kk, vv
        lengths.append(kk.size(0))
    return k, v, torch.tensor(lengths, dtype=torch.int32)


def _case(page_size: int, dtype: torch.dtype, idx: torch.dtype, seed: int = 0):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    counts = [3, 0, 1, 2]  # a sequence without pages
    last = [page_size, 0, 1, max(1, page_size // 2)]  # a full last page, one row, a half page
    pool = 9
    ids = torch.randperm(pool, generator=g)[: sum(counts)]  # pages out of order
    ids[-1] = ids[0]  # a page shared by two sequences
    po = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()])
    cache = torch.randn(pool, 2, page_size, N_K, D, generator=g).to(dtype)
    s_c = max((c - 1) * page_size + lp for c, lp in zip(counts, last, strict=True)) + 3
    return cache, po.to(idx), ids.to(idx), torch.tensor(last).to(idx), s_c


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("idx", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("page_size", [1, 32, 128])
def test_matches_the_loop(page_size: int, dtype, idx, device: str) -> None:  # type: ignore[no-untyped-def]
    cache, po, ids, last, s_c = _case(page_size, dtype, idx)
    want = _loop_reference(cache, po, ids, last, s_c)
    got = gather_pages(cache.to(device), po.to(device), ids.to(device), last.to(device), s_c)
    check()
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)
    # sizes unknown: the longest cache is read back (its own padded length)
    placed = (t.to(device) for t in (cache, po, ids, last))
    k, _, lengths = gather_pages(*placed, None)
    assert k.size(1) == int(want[2].max())
    torch.testing.assert_close(lengths.cpu(), want[2])


def test_a_pool_without_pages_and_an_empty_batch() -> None:
    cache = torch.randn(0, 2, 4, N_K, D).npu()
    po, ids = torch.zeros(3, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
    last = torch.zeros(2)
    k, v, n = gather_pages(cache, po.npu(), ids.npu(), last.long().npu(), 5)
    check()
    assert k.shape == (2, 5, N_K, D) and k.abs().sum() == 0 and n.tolist() == [0, 0]
    k, v, n = gather_pages(cache, po[:1].npu(), ids.npu(), last[:0].long().npu(), 5)
    assert k.shape == (0, 5, N_K, D)


BAD = {
    "page_ids out of range": ({"ids": 99}, "'page_ids' must hold values in"),
    "negative page id": ({"ids": -1}, "'page_ids' must hold values in"),
    "last_page_len 0": ({"last": 0}, r"'last_page_len' must be in \[1, page_size = 32\]; got 0"),
    "last_page_len > page_size": ({"last": 33}, r"'last_page_len' must be in .*; got 33"),
    "last_page_len wrapping int32": ({"last": 2**32 + 1}, r"'last_page_len' must be in"),
    "page_offsets not monotone": ({"po": [0, 3, 2, 3, 6]}, "'page_offsets' must be non-decr"),
    "page_offsets past page_ids": ({"po": [0, 3, 3, 4, 7]}, "'page_offsets' must end at"),
    "page_offsets not from 0": ({"po": [1, 3, 3, 4, 6]}, "'page_offsets' must start at 0"),
    # int32 differences of these wrap to 2**31 - 1, 1, 2**31 - 1, 7: all >= 0, summing to 6
    "page_offsets wrapping int32": (
        {"po": [0, 2**31 - 1, -(2**31), -1, 6]},
        "'page_offsets' must be non-decreasing, from",
    ),
    "page_offsets past int32": ({"po": [0, 3, 2**32 + 3, 4, 6]}, "'page_offsets' must be non-d"),
    "more pages than s_max_cache": ({"s_c": 40}, "cache lengths must be <= 40"),
    "longer than s_max_cache": ({"s_c": 90}, "cache lengths must be <= 90"),
}


def _bad(name: str) -> tuple:
    over, what = BAD[name]
    cache, po, ids, last, s_c = _case(32, torch.float32, torch.int64)
    if "ids" in over:
        ids[1] = over["ids"]
    if "last" in over:
        last[0] = over["last"]
    if "po" in over:
        po = torch.tensor(over["po"])
    return (cache.npu(), po.npu(), ids.npu(), last.npu(), over.get("s_c", s_c)), what


@pytest.mark.parametrize("name", list(BAD))
def test_bad_page_data_names_its_condition(name: str) -> None:
    """Read at once (``DataChecks.read_with``): the first failed condition by name."""
    args, what = _bad(name)
    checks = DataChecks("paged_x")
    gather_pages(*args, op="paged_x", checks=checks)
    with pytest.raises(ValueError, match=rf"paged_x: .*{what}"):
        checks.read_with([])


@pytest.mark.skipif(not validation_enabled(), reason="FBGEMM_NPU_VALIDATE=0: no data checks")
@pytest.mark.parametrize("name", list(BAD))
def test_bad_page_data_is_queued_and_stays_memory_safe(name: str) -> None:
    """The default: no sync, the call runs inside its buffers, the queue raises at check()."""
    args, _ = _bad(name)
    with count() as c:
        k, _, lengths = gather_pages(*args, op="paged_x")
    assert c.syncs == 0
    assert k.shape == (4, args[-1], N_K, D) and bool(torch.isfinite(k).all())
    assert 0 <= int(lengths.min()) and int(lengths.max()) <= args[-1]
    with pytest.raises(RuntimeError, match=r"paged_x"):
        check()


@pytest.mark.parametrize(
    ("kw", "arg"),
    [
        ({"kv_cache": torch.zeros(4, 2, 8, N_K)}, "kv_cache"),  # rank 4
        ({"kv_cache": torch.zeros(4, 3, 8, N_K, D)}, "kv_cache"),  # not K and V
        ({"kv_cache": torch.zeros(4, 2, 8, N_K, D, dtype=torch.int32)}, "kv_cache"),
        ({"page_ids": torch.zeros(2, 1, dtype=torch.int64)}, "page_ids"),
        ({"last_page_len": torch.ones(2)}, "last_page_len"),  # float
        ({"page_offsets": torch.zeros(4, dtype=torch.int64)}, "page_offsets"),  # not B + 1
        ({"page_offsets": "x"}, "page_offsets"),
    ],
)
def test_argument_errors_name_the_argument(kw: dict, arg: str) -> None:
    args = {
        "kv_cache": torch.zeros(4, 2, 8, N_K, D),
        "page_offsets": torch.tensor([0, 1, 2]),
        "page_ids": torch.tensor([0, 1]),
        "last_page_len": torch.tensor([1, 8]),
    }
    args.update(kw)
    with pytest.raises(ValueError, match=rf"paged_x.*'{arg}'"):
        placed = {n: (t.npu() if isinstance(t, torch.Tensor) else t) for n, t in args.items()}
        gather_pages(**placed, s_max_cache=8, op="paged_x")


def test_launches_do_not_grow_with_batches_or_pages(no_validation) -> None:  # type: ignore[no-untyped-def]
    counts = []
    for seed, reps in ((0, 1), (1, 8)):
        cache, po, ids, last, s_c = _case(32, torch.float16, torch.int64, seed)
        shifted = po[1:].view(1, -1) + po[-1] * torch.arange(reps).view(-1, 1)
        po = torch.cat([po[:1], shifted.view(-1)])
        ids, last = ids.repeat(reps), last.repeat(reps)
        args = (cache.npu(), po.npu(), ids.npu(), last.npu(), s_c * reps)
        gather_pages(*args)  # warm the index caches
        with count() as c:
            gather_pages(*args)
        assert c.syncs == 0 and c.ai_cpu == 0
        counts.append(c.launches)
    assert counts[0] == counts[1] <= 16, counts  # the docstring's count
