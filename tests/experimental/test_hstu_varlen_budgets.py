"""The varlen HSTU ops' launch / sync budgets (fbgemm_npu/native/fbgemm/hstu_varlen/budgets.py,
per query tile after a setup): every mask variant of the main path (causal, contexts + targets +
rab, a local window + rab, func + rab, seqused) and the paged path, measured with the data checks
off and on, at two batch sizes and head counts (the launches must not change), in float16 and
float32, over 1, 4 and 4 uneven tiles (checks off) and 8 (on); 0 syncs, 0 AI-CPU.  Memory: a call's
peak stays below half of one ``[B, H, S, S]`` float32 score matrix.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native.mxrec.hstu import _attention
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

FWD, BWD = "fbgemm::hstu_varlen_fwd_80", "fbgemm::hstu_varlen_bwd_80"
S, D = 16, 8
F16, I32, I64 = torch.float16, torch.int32, torch.int64
# context_targets_rab and paged with seqused given as well: the main path's and the paged
# path's most launches
VARIANTS = ("causal", "context_targets_rab", "local_rab", "func_rab", "seqused", "paged")


def _call(batch: int, heads: int, variant: str, dtype: torch.dtype) -> tuple[tuple, dict]:
    """Positional arguments of the ops (``dout`` first for the backward) and keywords."""
    g = torch.Generator().manual_seed(batch * heads)
    lq = torch.full((batch,), S // 2 if variant == "paged" else S, dtype=I64)
    lk = torch.full((batch,), S, dtype=I64)
    # int64 metadata (the most launches: a saturating cast each, docs in _args.py)
    cu = lambda n: torch.cat([torch.zeros(1, dtype=I64), n.cumsum(0)]).npu()  # noqa: E731
    rows_q, rows_k = int(lq.sum()), int(lk.sum())
    rows_kv = rows_q if variant == "paged" else rows_k
    q, dout = (torch.randn(rows_q, heads, D, generator=g).to("npu", dtype) for _ in range(2))
    k, v = (torch.randn(rows_kv, heads // 2, D, generator=g).to("npu", dtype) for _ in range(2))
    args = (dout, q, k, v, cu(lq), cu(lk), None, None, S, S)
    kw: dict = {"alpha": 0.5}
    rab = torch.randn(batch, heads // 2, S, S, generator=g).to("npu", dtype)
    ones = torch.ones(batch, dtype=I64).npu()
    if variant in ("causal", "seqused", "paged", "context_targets_rab"):
        kw.update(window_size_left=-1, window_size_right=0)
    if variant in ("context_targets_rab", "paged"):  # the most: seqused too (int64 casts, checks)
        args = (*args[:6], lq.npu(), lk.npu(), S, S)
    if variant == "context_targets_rab":
        kw.update(num_contexts=ones, num_targets=ones * 2, target_group_size=2, rab=rab)
    elif variant == "local_rab":
        kw.update(window_size_left=3, window_size_right=1, rab=rab)
    elif variant == "func_rab":
        kw.update(func=torch.randint(0, S, (1, 3, rows_q), generator=g, dtype=I32).npu(), rab=rab)
    elif variant == "seqused":  # S-row segments, S / 2 queries and S - 1 keys used
        args = (*args[:6], (lq // 2).npu(), (lk - 1).npu(), S, S)
    elif variant == "paged":  # S / 2 queries (2 targets), S keys: S - 2 cached in pages of 8
        kw["num_targets"] = ones * 2
        pages = -(-(S - 2) // 8)
        kw.update(
            kv_cache=torch.randn(batch * pages, 2, 8, heads // 2, D, generator=g).to("npu", dtype),
            page_offsets=(torch.arange(batch + 1) * pages).npu(),
            page_ids=torch.randperm(batch * pages, generator=g).npu(),
            last_page_lens=torch.full((batch,), S - 2 - 8 * (pages - 1)).npu(),
        )
    return args, kw


def _run(op: str, variant: str, rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rows`` query rows a tile (5: the last of 4 tiles is shorter)."""
    counts, tiles = [], -(-S // rows)
    for batch, heads, dtype in ((2, 4, F16), (3, 8, F16), (2, 4, torch.float32)):
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * S * rows)
        args, kw = _call(batch, heads, variant, dtype)
        if op == FWD:
            fn, args = torch.ops.fbgemm.hstu_varlen_fwd_80, args[1:]
        else:
            fn = torch.ops.fbgemm.hstu_varlen_bwd_80
            if "rab" in kw:
                kw["has_drab"] = True
        fn(*args, **kw)  # warm: the index caches grow on a first call
        path = "paged" if variant == "paged" else None
        c = assert_op_budget(lambda f=fn, a=args, kw=kw: f(*a, **kw), op, path=path, units=tiles)
        assert c.ai_cpu == 0 and c.syncs == 0
        counts.append(c.launches)
    assert counts[0] == counts[1], f"{op} {variant}: launches depend on B or H: {counts}"
    assert counts[2] <= counts[0]


CASES = [(FWD, v) for v in VARIANTS] + [(BWD, v) for v in VARIANTS if v != "paged"]


@pytest.mark.parametrize("rows", [S, S // 4, 5])
@pytest.mark.parametrize(("op", "variant"), CASES, ids=str)
def test_budget_with_the_checks_off(op, variant, rows, no_validation, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _run(op, variant, rows, monkeypatch)


@pytest.mark.parametrize("rows", [S // 8])
@pytest.mark.parametrize(("op", "variant"), CASES, ids=str)
def test_budget_with_the_checks_on(op, variant, rows, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _run(op, variant, rows, monkeypatch)


def test_every_op_and_path_is_measured() -> None:
    assert_every_path_measured(
        "hstu_varlen", [(op, "paged" if v == "paged" else None) for op, v in CASES]
    )


@pytest.mark.parametrize("op", [FWD, BWD])
def test_peak_memory_stays_far_below_one_score_matrix(op: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    batch, heads, s = 4, 4, 512
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * s * 16)  # 16 rows a tile
    cu = (torch.arange(batch + 1, dtype=I32) * s).npu()
    g = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(batch * s, heads, 4, generator=g).npu() for _ in range(4))
    args = (q, k, v, cu, cu, None, None, s, s)
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    if op == FWD:
        out = torch.ops.fbgemm.hstu_varlen_fwd_80(*args, window_size_right=0)
    else:
        out = torch.ops.fbgemm.hstu_varlen_bwd_80(dout, *args, window_size_right=0)
    peak = torch.npu.max_memory_allocated() - base
    scores = batch * heads * s * s * 4
    print(f"{op}: peak {peak / 2**20:.2f} MiB; one score matrix {scores / 2**20} MiB")
    assert peak < scores / 2, (peak, scores)
    del out


def test_a_delta_call_without_rab_tiles_its_queries_only(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """2 new queries against 64 keys: without rab the queries keep rows of their own (the mask
    shifted), so 1 tile of 2 rows, where queries at their key positions would take 16 tiles of
    4 rows (the upstream padding, kept with rab: its rows are key positions)."""
    batch, heads, s_k = 2, 2, 64
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * s_k * 4)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(batch * 2, heads, D, generator=g).npu()
    k, v = (torch.randn(batch * s_k, heads, D, generator=g).npu() for _ in range(2))
    args = (q, k, v, (torch.arange(batch + 1) * 2).npu(), (torch.arange(batch + 1) * s_k).npu(),
            None, None, 2, s_k)  # fmt: skip
    fn = torch.ops.fbgemm.hstu_varlen_fwd_80
    fn(*args, window_size_right=0)
    assert_op_budget(lambda: fn(*args, window_size_right=0), FWD, units=1)
