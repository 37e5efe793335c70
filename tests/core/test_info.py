"""``python -m fbgemm_npu info`` is the first thing a user runs: it must work on a bare install
(no npu, no simulator) and report versions and coverage from the registrar's table."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
CUMSUM_OPS = tuple(
    f"fbgemm::asynchronous_{name}_cumsum" for name in ("complete", "exclusive", "inclusive")
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FBGEMM_NPU_SIMULATE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "fbgemm_npu", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def info_output() -> str:
    proc = _run("info")
    assert proc.returncode == 0, f"python -m fbgemm_npu info failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_versions(info_output: str) -> None:
    import fbgemm_gpu

    import fbgemm_npu

    lines = {line.split()[0]: line for line in info_output.splitlines() if line.strip()}
    assert torch.__version__ in lines["torch"]
    assert fbgemm_gpu.__version__ in lines["fbgemm_gpu"]
    assert fbgemm_npu.__version__ in lines["fbgemm_npu"]
    for name in ("torch_npu", "torchrec", "device"):
        assert name in lines, f"no {name} line in:\n{info_output}"
    # The child runs without FBGEMM_NPU_SIMULATE: no torch_npu means no device at all.
    expected = "real" if importlib.util.find_spec("torch_npu") else "none"
    assert lines["device"].split()[1] == expected, lines["device"]


def test_coverage_table(info_output: str) -> None:
    for op in CUMSUM_OPS:
        row = next((line for line in info_output.splitlines() if op in line), None)
        assert row is not None, f"{op} missing from:\n{info_output}"
        assert "x" in row.split(op, 1)[1], f"{op} not marked as registered: {row!r}"
    assert "PrivateUse1" in info_output and "AutogradPrivateUse1" in info_output
    assert "total:" in info_output


def test_info_is_the_default_command() -> None:
    proc = _run()
    assert proc.returncode == 0, proc.stderr
    assert all(op in proc.stdout for op in CUMSUM_OPS)


def test_unknown_command_is_refused() -> None:
    proc = _run("frobnicate")
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr
