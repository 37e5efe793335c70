"""docs/ops.md is generated from the registrar's tables: it must be current and agree with them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fbgemm_npu import catalogue
from fbgemm_npu.__main__ import main
from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.catalogue import OPS_MD, render


def test_ops_md_is_current() -> None:
    assert OPS_MD.exists(), "docs/ops.md is missing: run `python -m fbgemm_npu docs`"
    assert OPS_MD.read_text() == render(), "docs/ops.md is stale: run `python -m fbgemm_npu docs`"


def test_every_registered_op_has_a_row_with_its_budget() -> None:
    text = OPS_MD.read_text()
    for op in REGISTRY.kernels:
        rows = [line for line in text.splitlines() if line.startswith(f"| `{op}` |")]
        assert len(rows) == 1, f"{op}: {len(rows)} rows in docs/ops.md"
        budget = REGISTRY.budgets.get(op)
        cells = [c.strip() for c in rows[0].strip("|").split(" | ")]
        want = "?" if budget is None else str(budget.launches)
        if budget is not None and budget.setup:  # a per-unit budget with a once-per-call part
            want = f"{budget.setup} + {want}"
        assert cells[2] == want, (op, cells)


def test_docs_check_fails_when_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "ops.md"
    monkeypatch.setattr(catalogue, "OPS_MD", target)
    assert main(["docs", "--check"]) == 1  # missing
    assert main(["docs"]) == 0 and target.read_text() == render()
    assert main(["docs", "--check"]) == 0
    target.write_text(target.read_text() + "\nstale line\n")
    assert main(["docs", "--check"]) == 1
    assert "stale" in capsys.readouterr().err


def test_docs_command_is_documented() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fbgemm_npu", "docs", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "--check" in proc.stdout


def test_every_budget_states_its_ai_cpu_launches_and_explains_any() -> None:
    """Issue 10: every entry says how many launches a 910B runs on its AI CPU (None = unstated),
    and one above 0 (on any path) says why in its note."""
    unstated = sorted(q for q, b in REGISTRY.budgets.items() if b.ai_cpu is None)
    assert not unstated, unstated
    unexplained = sorted(
        q
        for q, b in REGISTRY.budgets.items()
        if (b.ai_cpu or any(b.path_ai_cpu.values())) and not b.note.strip()
    )
    assert not unexplained, unexplained
