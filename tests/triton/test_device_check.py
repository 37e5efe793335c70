"""bench/device_check.py (the GPU proof of the fused Triton kernels) runs here too, in Triton's
interpreter on CPU tensors, without fbgemm_gpu: a subprocess in which ``import fbgemm_gpu``
fails.  Also: a kernel that is not there is an ``absent`` row, not a crash; ``python -m bench
triton``'s rows (bench/fused.py) count both paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

ROOT = Path(__file__).resolve().parents[2]
# fbgemm_gpu blocked (None in sys.modules: any import of it raises), then the script as __main__
_RUN = (
    "import runpy, sys; sys.modules['fbgemm_gpu'] = None; "
    "sys.argv = ['bench/device_check.py', '--device', 'cpu', '--quick']; "
    "runpy.run_path('bench/device_check.py', run_name='__main__')"
)


def _rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 9 and cells[0] not in ("op", "---"):
            rows[cells[0]] = cells
    return rows


def test_device_check_runs_without_fbgemm_gpu() -> None:
    from bench.device_check import PROBES

    env = {**os.environ, "TRITON_INTERPRET": "1", "FBGEMM_NPU_KERNEL": "auto"}
    env.pop("FBGEMM_NPU_SIMULATE", None)
    done = subprocess.run(
        [sys.executable, "-c", _RUN],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    rows = _rows(done.stdout)
    assert set(rows) == {p.op for p in PROBES}, done.stdout
    for op, cells in rows.items():
        status = cells[2]
        assert "fbgemm_gpu" not in status, f"{op} needs fbgemm_gpu: {status}"
        assert not status.startswith("MISMATCH"), f"{op}: Triton differs from the tensor program"
        assert status.startswith(("ok", "absent", "error", "fallback")), (op, status)
    for op, fused in (("jagged_to_padded_dense", "3"), ("dense_to_jagged", "4")):
        assert rows[op][2] == "ok", rows[op]
        assert rows[op][8].split("/")[1] == fused, rows[op]  # triton path's launches, checks on
    assert float(rows["jagged_to_padded_dense"][4]) > 0  # a time was taken


def test_missing_kernel_is_an_absent_row() -> None:
    from bench.device_check import Probe, run_probe

    def build(dev: torch.device, quick: bool) -> object:
        import fbgemm_npu.native.fbgemm.nowhere._triton_nothing  # noqa: F401

        raise AssertionError("unreachable")

    row = run_probe(Probe("nothing", "-", "-", build), torch.device("cpu"), True, 1)
    assert row["status"].startswith("absent (ModuleNotFoundError"), row
    assert "ms_triton" not in row


def test_bench_triton_rows_count_both_paths() -> None:
    from bench.device_check import PROBES
    from bench.fused import measure

    jagged = {p.op: p for p in PROBES}
    row = measure(jagged["jagged_to_padded_dense"])
    assert row == "| jagged_to_padded_dense | 5 / 11 | 1 / 3 | 1 | 0 / 0 | ok |", row
    row = measure(jagged["dense_to_jagged"])
    assert row == "| dense_to_jagged | 6 / 11 | 2 / 4 | 1 | 0 / 0 | ok |", row


def test_compile_only_mode_compiles_for_a_gpu_target() -> None:
    """``--compile cuda:90``: no device, each kernel compiled for sm_90 instead of run (here:
    the jagged probes; bench/results/triton_compile.md has every kernel's row)."""
    from triton.backends import backends

    if "nvidia" not in backends:
        pytest.skip("triton's nvidia backend (ptxas) is not installed here")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(ROOT / ".pytest_cache" / "triton_aot")
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    run = _RUN.replace("'--device', 'cpu', '--quick'", "'--compile', 'cuda:90', '--only', 'jagged'")
    done = subprocess.run(
        [sys.executable, "-c", run], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "| jagged_to_padded_dense | compiled: jagged_to_dense |" in done.stdout, done.stdout
    assert "| dense_to_jagged | compiled: dense_to_jagged |" in done.stdout, done.stdout
