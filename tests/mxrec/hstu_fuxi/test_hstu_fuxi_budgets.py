"""The FuXi family's launch / sync budgets (``budgets.py``, per query tile) and its memory.

Each op and path (``biases``: timestampBias and positionBias given) is measured for mask types 0,
2 and 3, float16 and float32, the jagged and (forward) the normal layout, with the data checks off
and on (there are none: ``seqOffset`` is a host list), at two batch sizes and head counts for one
tile count (custom masks: the launches must not change), over 1, 2, 4 and 8 tiles (``n`` tiles
cost at most ``setup + n * launches``); the worst setup and per-tile counts are the budget
exactly.  0 syncs, 0 AI-CPU.
Memory: the simulator's peak over a call, less what the contract returns (and the float32
accumulator of the bias gradients, ``[B, S, 2, S]``), stays below half of one ``[B, N, S, S]``
float32 buffer (B = 2, N = 4, S = 512, D = 4, 8-row tiles).
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native.mxrec.hstu import _attention
from fbgemm_npu.native.mxrec.hstu_fuxi import _program
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of

FWD, BWD = "mxrec::hstu_fuxi", "mxrec::hstu_dense_backward_fuxi"
S, D = 64, 16
F16 = torch.float16
CASES = [(op, path) for op in (FWD, BWD) for path in (None, "biases")]


def _call(
    op: str,
    path: str | None,
    layout: str,
    mask_type: int,
    batch: int,
    heads: int,
    dtype: torch.dtype,
    s: int = S,
    d: int = D,
):  # type: ignore[no-untyped-def]
    """``(fn, C)``: a call of ``op`` on fresh npu inputs and its channel count."""
    g = torch.Generator().manual_seed(batch * heads + mask_type)
    c = 3 if path == "biases" else 1
    shape = (batch * s, heads, d) if layout == "jagged" else (batch, s, heads, d)
    q, k, v = (torch.randn(*shape, generator=g).to("npu", dtype) for _ in range(3))
    ts, pos = (torch.randn(n, s, s, generator=g).to("npu", dtype) for n in (batch, 1))
    ts, pos = (ts, pos) if c == 3 else (None, None)
    mask = (torch.rand(batch, heads, s, s, generator=g) > 0.5).to("npu", dtype)
    mask = mask if mask_type == 3 else None
    off = [i * s for i in range(batch + 1)] if layout == "jagged" else None
    if op == FWD:
        return lambda: torch.ops.mxrec.hstu_fuxi(
            q, k, v, ts, pos, mask, mask_type, s, 0.0, layout, off
        ), c
    grad = torch.randn(batch * s, heads, c * d, generator=g).to("npu", dtype)
    return lambda: torch.ops.mxrec.hstu_dense_backward_fuxi(
        grad, q, k, v, mask, pos, ts, "jagged", mask_type, s, 0.0, off
    ), c


def _measure(
    op: str,
    path: str | None,
    tiles: tuple[int, ...],
    monkeypatch: pytest.MonkeyPatch,
    masks: tuple[int, ...] = (0, 2, 3),
    dtypes: tuple[torch.dtype, ...] = (F16, torch.float32),
) -> tuple[int, int]:
    """``(setup, per tile)``, the most over the mask types, layouts and dtypes of ``op`` /
    ``path`` (from the first two tile counts), each call held to the budget at every tile
    count; custom masks (the costliest) at a second B and N too, with the same counts."""
    setup = per = 0
    layouts = ("jagged", "normal") if op == FWD else ("jagged",)
    for layout in layouts:
        for mask_type in masks:
            for dtype in dtypes:
                for batch, heads in ((2, 4), (5, 6))[: 2 if mask_type == 3 else 1]:
                    fn, c = _call(op, path, layout, mask_type, batch, heads, dtype)
                    counts = []
                    for n in tiles:
                        rows = S // n
                        monkeypatch.setattr(
                            _attention, "TILE_ELEMENTS", batch * c * heads * S * rows
                        )
                        fn()  # warm: the index caches grow on a first call
                        cnt = assert_op_budget(fn, op, path=path, units=n)
                        assert cnt.ai_cpu == 0 and cnt.syncs == 0 and cnt.stalls == 0
                        counts.append(cnt.launches)
                    if len(tiles) > 1:
                        step = (counts[1] - counts[0]) // (tiles[1] - tiles[0])
                        per, setup = max(per, step), max(setup, counts[0] - tiles[0] * step)
    return setup, per


@pytest.mark.parametrize(("op", "path"), CASES, ids=str)
def test_budget_with_the_checks_off(op, path, no_validation, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    setup, per = _measure(op, path, (1, 2), monkeypatch)
    entry = budget_of(op)  # the table holds the measured worst case, not a loose ceiling
    want = (
        (entry.setup, entry.launches)
        if path is None
        else (entry.path_setup.get(path, entry.setup), entry.paths[path])
    )
    assert (setup, per) == want, (setup, per)


@pytest.mark.parametrize(("op", "path"), CASES, ids=str)
def test_budget_over_several_tiles(op, path, no_validation, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _measure(op, path, (4, 8), monkeypatch, masks=(0, 3), dtypes=(F16,))


@pytest.mark.parametrize(("op", "path"), CASES, ids=str)
def test_budget_with_the_checks_on(op, path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _measure(op, path, (1,), monkeypatch, masks=(3,), dtypes=(F16,))


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("hstu_fuxi", CASES)


def test_tiles_follow_the_channels() -> None:
    """A tile holds C channels of scores: with the biases it has a third of the rows."""
    q = torch.zeros(2, 300, 4, D)
    p = _attention.Problem(q, q, q, None)
    one = _program.tiles(_program.Fuxi(p, None, None))
    three = _program.tiles(_program.Fuxi(p, torch.zeros(2, 300, 300), torch.zeros(1, 300, 300)))
    assert one[0] == (0, min(300, _attention.tile_rows(2, 4, 300)))
    assert three[0] == (0, min(300, _attention.tile_rows(2, 12, 300)))
    assert one[-1][1] == three[-1][1] == 300


@pytest.mark.parametrize("path", [None, "biases"])
@pytest.mark.parametrize("op", [FWD, BWD])
def test_peak_memory_stays_far_below_one_score_matrix(op, path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    batch, heads, s = 2, 4, 512
    fn, c = _call(op, path, "jagged", 0, batch, heads, torch.float32, s, d=4)
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", batch * c * heads * s * 8)  # 8 rows
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    out = fn()
    peak = torch.npu.max_memory_allocated() - base
    outs = out if isinstance(out, tuple) else (out,)
    contract = sum(t.numel() * t.element_size() for t in outs)
    if op == BWD and path == "biases":
        contract += batch * s * 2 * s * 4  # the float32 accumulator of the bias gradients
    scores = batch * heads * s * s * 4  # one float32 [B, N, S, S]: 8 MiB
    print(f"{op} {path}: peak {peak / 2**20:.2f} MiB, contract {contract / 2**20:.2f} MiB")
    assert peak - contract < scores / 2, (peak, contract, scores)
