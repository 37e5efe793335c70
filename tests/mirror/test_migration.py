"""Migration from fbgemm_gpu: the same script, with ``fbgemm_gpu`` replaced by ``fbgemm_npu``.

``fbgemm_gpu_script.py`` (next to this file) is written against fbgemm_gpu's modules: a TBE with
rowwise AdaGrad trained for a few steps, ``jagged_to_padded_dense`` / ``dense_to_jagged``,
``permute_2D_sparse_data``, ``EmbOptimType`` / ``SparseType``, ``import fbgemm_gpu.sparse_ops``.
It runs once as written on the CPU (upstream's kernels), then textually rewritten
(``fbgemm_gpu`` -> ``fbgemm_npu``) with its inputs on npu and no device given to the TBE; each run
is a fresh interpreter with ``FBGEMM_NPU_SIMULATE=1`` and fixed seeds.

Tolerance: fp32 tensors are compared with ``torch.testing.assert_close`` at its float32 defaults
(rtol 1.3e-6, atol 1e-5): the npu kernels reduce in another order than upstream's CPU loops (bag
sums, the rowwise mean of squared gradients), which moves results by a few ulps (measured: at most
5e-7 absolute after 3 steps, on values of order 1); integer outputs must be equal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPT = HERE / "fbgemm_gpu_script.py"


def _run(script: Path, device: str, out: Path) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter (simulator on); return what it saved."""
    env = dict(os.environ, FBGEMM_NPU_SIMULATE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(script), device, str(out)],
        cwd=script.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{script.name} on {device} failed:\n{proc.stderr}"
    return torch.load(out, weights_only=True)


def migrate(text: str) -> str:
    """What a user does: ``fbgemm_gpu`` becomes ``fbgemm_npu``, and nothing else."""
    return text.replace("fbgemm_gpu", "fbgemm_npu")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("migration")
    text = SCRIPT.read_text()
    migrated = tmp / "fbgemm_npu_script.py"
    migrated.write_text(migrate(text))
    assert len(re.findall(r"^(?:import|from) fbgemm_gpu", text, re.M)) >= 5  # a real migration
    assert "fbgemm_gpu" not in migrated.read_text()
    return {
        "cpu": _run(SCRIPT, "cpu", tmp / "cpu.pt"),
        "npu": _run(migrated, "npu", tmp / "npu.pt"),
    }


def test_each_run_used_its_package_and_device(runs: dict[str, dict[str, Any]]) -> None:
    """As written: fbgemm_gpu, all on the CPU. Migrated: fbgemm_npu, TBE and results on npu."""
    cpu, npu = runs["cpu"]["info"], runs["npu"]["info"]
    assert (cpu["package"], cpu["tbe_device"], cpu["devices"]) == ("fbgemm_gpu", "cpu", ["cpu"])
    assert npu["package"] == "fbgemm_npu"
    assert npu["tbe_device"] == "npu:0", "the TBE, given no device, did not build on npu"
    assert npu["devices"] == ["npu:0"]
    assert (npu["optim"], npu["sparse_type"]) == (cpu["optim"], cpu["sparse_type"])


def test_results_match_upstream_cpu(runs: dict[str, dict[str, Any]]) -> None:
    """Every output, the tables and the optimizer state after the steps: as upstream's CPU."""
    cpu, npu = runs["cpu"]["tensors"], runs["npu"]["tensors"]
    assert set(npu) == set(cpu)
    assert {f"weights_{t}" for t in range(2)} <= set(cpu) and "pooled_2" in cpu
    for name, expected in cpu.items():
        torch.testing.assert_close(npu[name], expected, msg=lambda m, n=name: f"{n}: {m}")


def test_training_moved_the_tables(runs: dict[str, dict[str, Any]]) -> None:
    """The comparison is not vacuous: the steps did update weights and AdaGrad state."""
    tensors = runs["cpu"]["tensors"]
    assert all(tensors[f"momentum_{t}"].count_nonzero() > 0 for t in range(2))
