"""The paged HSTU family's launch / sync budgets (``budgets.py``: a setup plus a count per query
tile), measured with the data checks off and on, at two batch sizes and two head counts (the
launches must not change: every batch and head of a tile run at once), in float16 and float32,
over 1, 2 and 3 tiles, on both paths (``targets``: num_target given) and the mask types; sized
calls 0 syncs, unsized (``max_seq_len`` / ``max_seq_len_k`` 0) 1; 0 AI-CPU.  The ceiling is
reached: some measured call launches exactly what the budget allows (a stale table shows)."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu_paged.inputs import paged_case
from fbgemm_npu.native.mxrec.hstu import _attention
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of

OP = "mxrec::hstu_paged"
S_Q = 6  # q rows per sequence (4 new history rows + 2 targets on the targets path)
MASKS = {
    "causal": {},
    "none": {"mask_type": 2},
    "custom_bias": {"mask_type": 3, "mask": True, "attn_bias": True, "alpha": 0.5},
    "bias": {"attn_bias": True, "alpha": 0.5},
}


def _kw(batch: int, heads: int, dtype: torch.dtype, path: str | None, mask: str) -> dict:
    targets = [2] * batch if path == "targets" else None
    new = S_Q - 2 if targets else S_Q  # the longest q sequence is S_Q (sizes read back agree)
    kw = paged_case([40] * batch, [new] * batch, targets, heads=(heads, heads // 2), dtype=dtype)
    shape = (batch, heads, S_Q, kw["max_seq_len_k"])
    for name, value in MASKS[mask].items():
        kw[name] = torch.ones(shape, dtype=dtype) if value is True else value
    return {n: (t.npu() if isinstance(t, torch.Tensor) else t) for n, t in kw.items()}


CONFIGS = ((2, 4, torch.float16), (5, 8, torch.float16), (2, 4, torch.float32))


def _measure(path, mask, tiles, sized, monkeypatch, configs=CONFIGS) -> list[int]:  # type: ignore[no-untyped-def]
    counts = []
    for batch, heads, dtype in configs:
        kw = _kw(batch, heads, dtype, path, mask)
        s_k = kw["max_seq_len_k"]
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * heads * s_k * (S_Q // tiles))
        if not sized:
            kw.update(max_seq_len=0, max_seq_len_k=0)
        torch.ops.mxrec.hstu_paged(**kw)  # warm: the index caches grow on a first call
        c = assert_op_budget(
            lambda k=kw: torch.ops.mxrec.hstu_paged(**k), OP, path=path, units=tiles, sized=sized
        )
        assert c.ai_cpu == 0 and c.syncs == (0 if sized else 1)
        counts.append(c.launches)
    if len(counts) == 3:
        assert counts[0] == counts[1], f"{OP}: launches depend on B or N: {counts}"
        assert counts[2] <= counts[0]  # float32 skips the casts
    return counts


@pytest.mark.parametrize("path", [None, "targets"])
def test_the_budget_is_tight(path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every call within the budget, and no slack: with the checks off the most a call
    launches in one tile is ``setup + launches`` and the most any grows from one tile to three
    is two tiles' count; the most the checks add is ``checks``."""
    b, half = budget_of(OP), CONFIGS[:1]  # float16 costs the most (test_budget_per_tile)
    one, growth, checks = 0, 0, 0
    for mask in ("bias", "custom_bias"):  # the costliest (test_budget_per_tile: every mask)
        for sized in (True, False):
            monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
            first = _measure(path, mask, 1, sized, monkeypatch, half)[0]
            third = _measure(path, mask, 3, sized, monkeypatch, half)[0]
            monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")
            checked = _measure(path, mask, 1, sized, monkeypatch, half)[0]
            one, growth = max(one, first), max(growth, third - first)
            checks = max(checks, checked - first)
    per_tile = b.launch_limit(False, 2, path) - b.launch_limit(False, 1, path)
    assert (one, growth) == (b.launch_limit(False, 1, path), 2 * per_tile), path
    assert checks == b.launch_limit(True, 1, path) - b.launch_limit(False, 1, path), path


PER_TILE = [(p, m, True) for p in (None, "targets") for m in MASKS] + [
    (p, "bias", False) for p in (None, "targets")
]


@pytest.mark.parametrize(("path", "mask", "sized"), PER_TILE, ids=str)
def test_budget_per_tile(path, mask, sized, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Two tiles, every B / N / dtype: within the budget, the same launches for any B and N."""
    _measure(path, mask, 2, sized, monkeypatch)


def test_every_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("hstu_paged", [(OP, None), (OP, "targets")])
