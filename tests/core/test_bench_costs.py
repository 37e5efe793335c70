"""The benchmarks' device-cost columns (``python -m bench ops`` / ``bench tbe``): counted, priced.

Each table row of ``bench/harness.py`` and ``bench/fbgemm/tbe.py`` ends in the columns of
``fbgemm_npu.testing.cost_910b``: launches, AI-CPU launches, syncs + stalls, MB moved and the
projected 910B time of one call.  A case made of known ops (a ``searchsorted``: one launch on the
AI CPU; a blocking upload: a stall; an ``item()``: a sync) must show those numbers and the time
summed by hand; the TBE table must show the counters' launches and syncs of its own rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing import cost_910b
from fbgemm_npu.testing.cost_910b import Cost

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.fbgemm import tbe  # noqa: E402

pytestmark = pytest.mark.skipif(
    fbgemm_npu.device_kind() == "none", reason="no npu device (tests/conftest.py switches it on)"
)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _search(x: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return torch.searchsorted(*x)


def _make(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([0.0, 1.0, 2.0], device=device), torch.tensor([0.5, 1.5], device=device)


def _upload_and_read(x: tuple[torch.Tensor, torch.Tensor]) -> float:
    return torch.tensor([1.0, 2.0], device=x[0].device).sum().item()


def test_ops_table_shows_the_counted_and_priced_columns() -> None:
    search = harness.Case("fake", "searchsorted", _make, _search, _search, shape="3 / 2")
    waits = harness.Case("fake", "waits", _make, _search, _search, _upload_and_read, "2")
    rows = [harness.run_case(c, repeats=1, warmup=0) for c in (search, waits)]
    # searchsorted reads 3 + 2 floats and writes 2 int64: 36 bytes on the AI CPU
    assert rows[0].cost == Cost(launches=1, ai_cpu=1, ai_cpu_nbytes=36)
    # the upload (2 floats, argument and result) is a launch and a stall; the sum a launch
    # (8 bytes in, 4 out); item() a sync
    assert rows[1].cost == Cost(launches=2, syncs=1, stalls=1, nbytes=16 + 12)
    assert (rows[0].launches, rows[0].syncs, rows[1].launches, rows[1].syncs) == (1, 0, 2, 1)

    header, rule, *lines = harness.table(rows).splitlines()
    head = _cells(header)
    assert head[6:11] == ["launches", "AI-CPU", "syncs + stalls", "MB", "910B us"]
    assert len(_cells(rule)) == len(head) == len(_cells(lines[0])) == len(_cells(lines[1]))
    launch, aicpu, sync = cost_910b.LAUNCH_US, cost_910b.AI_CPU_US, cost_910b.SYNC_US
    search_us = launch + aicpu + 36 / cost_910b.AI_CPU_BYTES_PER_S * 1e6
    waits_us = 2 * launch + 2 * sync + 28 / cost_910b.HBM_BYTES_PER_S * 1e6
    assert _cells(lines[0])[6:11] == ["1", "1", "0 + 0", "0.00", f"{search_us:.1f}"]
    assert _cells(lines[1])[6:11] == ["2", "0", "1 + 1", "0.00", f"{waits_us:.1f}"]
    assert "cores" in harness.machine()


def test_tbe_table_shows_its_rows_costs() -> None:
    shape = tbe.Shape(T=2, E=50, D=8, B=4, L=2)
    rows = tbe.run(shape, repeats=1)
    fwd, step = rows
    assert fwd["cost"].launches == fwd["launches"] and fwd["cost"].syncs == fwd["syncs"]
    assert step["cost"].launches == step["launches"] > fwd["launches"]
    assert step["cost"].nbytes > fwd["cost"].nbytes > 0
    header, rule, *lines = tbe.table(rows, shape, 1, "simulated").splitlines()[2:]
    head = _cells(header)
    at = head.index("launches")
    assert head[at : at + 5] == ["launches", "AI-CPU", "syncs + stalls", "MB", "910B us"]
    for row, line in zip(rows, lines, strict=True):
        c: Cost = row["cost"]
        shown = _cells(line)[at : at + 5]
        cells = [str(c.launches), str(c.ai_cpu), f"{c.syncs} + {c.stalls}", f"{c.megabytes:.2f}"]
        assert shown == [*cells, f"{c.us:.1f}"]
