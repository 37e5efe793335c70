"""``python -m bench inference`` (bench/fbgemm/inference.py) at its ``--quick`` size, so that it
cannot rot.

One row per weight type (INT8, INT4, FP16); each row's counted columns equal a count of the same
npu forward made here (0 AI-CPU, 0 syncs + stalls: the module seeds its layout), the table shows
them as :mod:`fbgemm_npu.testing.cost_910b` prices them, and the bench's npu module holds
upstream's CPU module's rows (its forward equals upstream's on the CPU).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.cost_910b import Cost

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO))

from bench.__main__ import main as bench_main  # noqa: E402
from bench.fbgemm import inference  # noqa: E402

pytestmark = pytest.mark.skipif(
    fbgemm_npu.device_kind() == "none", reason="no npu device (tests/conftest.py switches it on)"
)


@pytest.fixture(autouse=True)
def _keep_threads():  # type: ignore[no-untyped-def]
    """``python -m bench`` sets torch's thread count (``--threads``); later tests keep theirs."""
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_rows_are_the_counted_npu_forward_of_each_weight_type() -> None:
    shape = inference.QUICK
    rows = inference.run(shape, repeats=1)
    assert [r["case"] for r in rows] == ["INT8", "INT4", "FP16"]
    indices, offsets = inference._inputs(shape)
    for row, ty in zip(rows, inference.TYPES, strict=True):
        cpu, npu = inference.modules(shape, ty)
        args = (indices.to("npu"), offsets.to("npu"))
        npu(*args)
        with counters.count() as c:
            got = npu(*args)
        torch.testing.assert_close(got.cpu(), cpu(indices, offsets), rtol=1e-5, atol=1e-4)
        cost: Cost = row["cost"]
        assert cost == Cost.of(c.events)
        assert (row["launches"], row["syncs"]) == (c.launches, c.syncs) == (cost.launches, 0)
        assert cost.ai_cpu == 0 and cost.stalls == 0 and cost.nbytes > 0
        assert row["unsupported"] == []

    header, rule, *lines = inference.table(rows, shape, 1, "simulated").splitlines()[2:]
    head = _cells(header)
    at = head.index("launches")
    assert head[at : at + 5] == ["launches", "AI-CPU", "syncs + stalls", "MB", "910B us"]
    assert len(_cells(rule)) == len(head)
    for row, line in zip(rows, lines, strict=True):
        c = row["cost"]
        shown = _cells(line)[at : at + 5]
        cells = [str(c.launches), str(c.ai_cpu), f"{c.syncs} + {c.stalls}", f"{c.megabytes:.2f}"]
        assert shown == [*cells, f"{c.us:.1f}"]


def test_quick_command_prints_and_writes_nothing(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "inference.md"
    assert bench_main(["inference", "--quick", "--repeats", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "T=3 E=60 D=32 B=4 L=3" in text
    assert sum(line.startswith("|") for line in text.splitlines()) == 5  # head, rule, 3 rows
    assert not out.exists()  # --quick never overwrites bench/results/inference.md
