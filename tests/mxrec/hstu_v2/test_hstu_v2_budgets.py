"""The HSTU v2 family's budgets (``budgets.py``: a setup plus launches per query tile).

Each op and path (main: causal, sliding, none; ``context_targets``; ``arbitrary`` with 2 pairs)
is measured with the data checks off (1, 8 and 7 tiles, the last shorter) and on (4 tiles), at
two batch sizes and head counts (the launches must not change: a tile runs every batch and head
at once), in float16 (the most: casts) and float32; 0 syncs and 0 AI-CPU launches always (both
max lengths are required).  The peak memory of a call stays far below one ``[B, N, S, S]`` buffer.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native.mxrec.hstu import _attention
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

FWD, BWD = "mxrec::hstu_forward_v2", "mxrec::hstu_backward_v2"
S, D = 32, 16
F16 = torch.float16
WINDOWS = {"causal": (-1, 0), "sliding": (3, 0), "none": (-1, -1)}


def _call(op: str, path: str | None, window: str, batch: int, heads: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(batch * heads)
    t = batch * S
    q, k, v, grad = (
        torch.randn(t, h, D, generator=g).to("npu", dtype)
        for h in (heads, heads // 2, heads // 2, heads)
    )
    off = (torch.arange(batch + 1) * S).npu()  # int64 offsets and counts: the most (casts)
    kw: dict = {"rab": torch.randn(batch, heads, S, S, generator=g).to("npu", dtype), "alpha": 0.5}
    if path == "context_targets":
        ones = torch.ones(batch, dtype=torch.int64).npu()
        kw.update(num_context=ones, num_target=ones, target_group_size=1, window_size_right=0)
    elif path == "arbitrary":
        af = torch.randint(0, S + 1, (batch, 1, S, 4), generator=g, dtype=torch.int32)
        kw["arbitrary_func"] = af.sort(-1).values.npu()
    else:
        kw["window_size_left"], kw["window_size_right"] = WINDOWS[window]
    if op == FWD:
        return lambda: torch.ops.mxrec.hstu_forward_v2(q, k, v, max_seq_len=S, seq_offset=off, **kw)
    return lambda: torch.ops.mxrec.hstu_backward_v2(grad, q, k, v, S, S, off, off, **kw)


CONFIGS = ((2, 4, F16), (3, 8, F16), (2, 4, torch.float32))


def _measure(op: str, path: str | None, window: str, rows: int, monkeypatch, n: int = 3) -> None:  # type: ignore[no-untyped-def]
    """``rows`` query rows a tile: ``ceil(S / rows)`` tiles, the last shorter where it does not
    divide ``S``."""
    counts, tiles = [], -(-S // rows)
    for batch, heads, dtype in CONFIGS[:n]:
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * S * rows)
        fn = _call(op, path, window, batch, heads, dtype)
        fn()  # warm: the index caches grow on a first call
        c = assert_op_budget(fn, op, path=path, units=tiles)
        assert c.ai_cpu == 0 and c.syncs == 0
        counts.append(c.launches)
    if n > 1:
        assert counts[0] == counts[1], f"{op}: launches depend on B or N: {counts}"
    if n > 2:
        assert counts[2] <= counts[0]  # float32 skips the casts


CASES = [
    (op, path, window)
    for op in (FWD, BWD)
    for path, window in ((None, "causal"), (None, "sliding"), (None, "none"),
                         ("context_targets", "causal"), ("arbitrary", "none"))
]  # fmt: skip


@pytest.mark.parametrize("rows", [S, 4, 5], ids=["1_tile", "8_tiles", "7_tiles_last_short"])
@pytest.mark.parametrize(("op", "path", "window"), CASES, ids=str)
def test_budget_with_the_checks_off(op, path, window, rows, no_validation, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _measure(op, path, window, rows, monkeypatch, 3 if rows == S else 1)


@pytest.mark.parametrize(("op", "path", "window"), CASES, ids=str)
def test_budget_with_the_checks_on(op, path, window, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _measure(op, path, window, S // 4, monkeypatch, 2)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("hstu_v2", [(op, path) for op, path, _ in CASES])


@pytest.mark.parametrize("op", [FWD, BWD])
def test_peak_memory_stays_far_below_one_score_matrix(op: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    batch, heads, s = 4, 4, 512
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * s * 16)  # 16 rows a tile
    g = torch.Generator().manual_seed(0)
    # D 8: the padded copies of q / k / v / grad (O(B S N D)) stay small beside the scores
    q, k, v, grad = (torch.randn(batch * s, heads, 8, generator=g).npu() for _ in range(4))
    off = (torch.arange(batch + 1, dtype=torch.int32) * s).npu()
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    if op == FWD:
        out = torch.ops.mxrec.hstu_forward_v2(q, k, v, max_seq_len=s, seq_offset=off)
    else:
        out = torch.ops.mxrec.hstu_backward_v2(grad, q, k, v, s, s, off, off, window_size_right=0)
    peak = torch.npu.max_memory_allocated() - base
    scores = batch * heads * s * s * 4  # one float32 [B, N, S, S]: 16 MiB
    print(f"{op}: peak {peak / 2**20:.2f} MiB over the inputs; one score matrix 16 MiB")
    assert peak < scores / 2, (peak, scores)
    del out
