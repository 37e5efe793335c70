"""The HSTU family's launch / sync budgets (``budgets.py``, per query tile) and its memory.

Each op and path is measured with the data checks off and on, at two batch sizes and two head
counts for one tile count (the launches must not change: every batch and head of a tile run at
once), in float16 and float32, and over 1, 4 and 8 tiles (``n`` tiles cost at most ``n``
times the budget).  0 syncs with ``max_seq_len`` given, 1 without (the contract's read of the
longest sequence); 0 AI-CPU.
Memory: the simulator's peak over a call stays below half of one ``[B, N, S, S]`` float32
buffer (B = N = 4, S = 512, 16-row tiles: measured 4.3 MiB forward, 7.2 MiB backward, of 16 MiB).
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native.mxrec.hstu import _attention
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

FWD, BWD = "mxrec::hstu_jagged.equal", "mxrec::hstu_jagged_backward.equal"
S, D = 64, 16
F16 = torch.float16


def _args(
    batch: int, heads: int, path: str | None, s: int = S, dtype: torch.dtype = torch.float32
) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(batch * heads)
    t = batch * s
    q, k, v, grad = (
        torch.randn(t, h, D, generator=g).to("npu", dtype)
        for h in (heads, heads // 2, heads // 2, heads)
    )
    kw: dict = {"max_seq_len": s, "seq_offset": (torch.arange(batch + 1) * s).npu()}
    kw["attn_bias"] = torch.randn(batch, heads, s, s, generator=g).to("npu", dtype)
    kw["alpha"] = 0.5
    if path == "context_targets":
        ones = torch.ones(batch, dtype=torch.int64).npu()
        kw.update(num_context=ones, num_target=ones, target_group_size=1)
    return (q, k, v, grad), kw


def _measure(op: str, path: str | None, tiles: int, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = []
    for batch, heads, dtype in ((2, 4, F16), (6, 8, F16), (2, 4, torch.float32)):
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * S * (S // tiles))
        (q, k, v, grad), kw = _args(batch, heads, path, dtype=dtype)
        args = (q, k, v) if op == FWD else (grad, q, k, v)
        fn = torch.ops.mxrec.hstu_jagged if op == FWD else torch.ops.mxrec.hstu_jagged_backward
        fn(*args, **kw)  # warm: the index caches (_index.arange_cached) grow on a first call
        c = assert_op_budget(lambda f=fn, a=args, kw=kw: f(*a, **kw), op, path=path, units=tiles)
        assert c.ai_cpu == 0
        counts.append(c.launches)
    assert counts[0] == counts[1], f"{op}: launches depend on B or N: {counts}"
    assert counts[2] < counts[0]  # float32 skips the casts


CASES = [(op, path) for op in (FWD, BWD) for path in (None, "context_targets")]


@pytest.mark.parametrize("tiles", [1, 4, 8])
@pytest.mark.parametrize(("op", "path"), CASES, ids=str)
def test_budget_with_the_checks_off(op, path, tiles, no_validation, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _measure(op, path, tiles, monkeypatch)


@pytest.mark.parametrize("tiles", [1, 4])
@pytest.mark.parametrize(("op", "path"), CASES, ids=str)
def test_budget_with_the_checks_on(op, path, tiles, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _measure(op, path, tiles, monkeypatch)


@pytest.mark.parametrize("tiles", [1, 4, 8])
@pytest.mark.parametrize("op", ["mxrec::hstu_dense", "mxrec::hstu_dense_backward"])
@pytest.mark.parametrize("dtype", [torch.float32, F16], ids=str)
def test_dense_budget(op: str, tiles: int, dtype: torch.dtype, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    counts = []
    for batch, heads in ((2, 4), (6, 8)):
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * S * (S // tiles))
        g = torch.Generator().manual_seed(0)
        q, k, v, grad = (
            torch.randn(batch, S, h, D, generator=g).to("npu", dtype)
            for h in (heads, heads // 2, heads // 2, heads)
        )
        bias = torch.randn(batch, heads, S, S, generator=g).to("npu", dtype)
        if op == "mxrec::hstu_dense":
            fn, args = torch.ops.mxrec.hstu_dense, (q, k, v, None, bias)
        else:
            fn, args = torch.ops.mxrec.hstu_dense_backward, (grad, q, k, v, None, bias)
        fn(*args)  # warm
        c = assert_op_budget(lambda f=fn, a=args: f(*a), op, units=tiles)
        assert c.ai_cpu == 0 and c.syncs == 0
        counts.append(c.launches)
    assert counts[0] == counts[1], f"{op}: launches depend on B or N: {counts}"


@pytest.mark.parametrize(("op", "path"), CASES, ids=str)
def test_a_shorter_last_tile_stays_in_budget(op, path, no_validation, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """24-row tiles over 64 rows: 24, 24, 16 -- the last tile's output is copied, not written by
    its bmm (the setup's 2 spare launches)."""
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", 2 * 4 * S * 24)
    (q, k, v, grad), kw = _args(2, 4, path, dtype=F16)
    args = (q, k, v) if op == FWD else (grad, q, k, v)
    fn = torch.ops.mxrec.hstu_jagged if op == FWD else torch.ops.mxrec.hstu_jagged_backward
    fn(*args, **kw)
    assert_op_budget(lambda: fn(*args, **kw), op, path=path, units=3)


def test_without_max_seq_len_one_sync() -> None:
    (q, k, v, _), kw = _args(2, 4, None)
    kw.pop("max_seq_len")
    assert_op_budget(lambda: torch.ops.mxrec.hstu_jagged(q, k, v, **kw), FWD, sized=False)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    dense = [("mxrec::hstu_dense", None), ("mxrec::hstu_dense_backward", None)]
    delta = [  # test_hstu_delta.py: test_budget_per_tile
        (f"mxrec::{op}.delta", path)
        for op in ("hstu_jagged", "hstu_jagged_backward")
        for path in (None, "context_targets")
    ]
    assert_every_path_measured("hstu", [*CASES, *dense, *delta])


@pytest.mark.parametrize("op", [FWD, BWD])
def test_peak_memory_stays_far_below_one_score_matrix(op: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    batch, heads, s = 4, 4, 512
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * s * 16)  # 16 rows a tile
    (q, k, v, grad), kw = _args(batch, heads, None, s)
    kw.pop("attn_bias")  # a bias (and its gradient) is [B, N, S, S] by contract
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    if op == FWD:
        out = torch.ops.mxrec.hstu_jagged(q, k, v, **kw)
    else:
        out = torch.ops.mxrec.hstu_jagged_backward(grad, q, k, v, **kw)
    peak = torch.npu.max_memory_allocated() - base
    scores = batch * heads * s * s * 4  # one float32 [B, N, S, S]: 16 MiB
    print(
        f"{op}: peak {peak / 2**20:.2f} MiB over the inputs; one score matrix {scores / 2**20} MiB"
    )
    assert peak < scores / 2, (peak, scores)
    del out
