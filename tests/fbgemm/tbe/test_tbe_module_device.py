"""Upstream's TBE modules built for npu: the narrow patches of ``fbgemm_npu.split_table.device``
are active, written for the installed fbgemm_gpu, and inert on CPU; a CUDA user's construction
without a device lands on the current npu, UVM placements get a clear error, ``prefetch`` runs,
and without an npu device upstream's CUDA errors stay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import fbgemm_gpu
import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)

from fbgemm_npu.split_table import device as tbe_device
from fbgemm_npu.testing.tbe_inputs import build_tbe, fixed_batch

REPO = Path(__file__).resolve().parents[3]


def test_patches_written_for_the_installed_fbgemm_gpu() -> None:
    """The patches assume fbgemm_gpu 1.8.0's Python line by line: a new version must be re-read
    (the table at the top of fbgemm_npu/split_table/device.py) before this guard is moved."""
    assert fbgemm_gpu.__version__ == tbe_device.PATCHED_FOR, (
        f"fbgemm_gpu {fbgemm_gpu.__version__} is installed; fbgemm_npu.split_table.device was "
        f"written for {tbe_device.PATCHED_FOR}: re-check every patch in its table"
    )
    assert tbe_device.is_applied()


def test_device_none_picks_the_current_npu_device() -> None:
    """CUDA-style specs without a device (upstream asks torch.cuda) land on the current npu."""
    m = build_tbe([(10, 4)], "cuda_user", device=None)
    assert m.current_device == torch.device("npu", torch.npu.current_device())
    assert m.weights_dev.device.type == "npu"
    with torch.npu.device(1):
        m1 = build_tbe([(10, 4)], "cuda_user", device=None)
    assert m1.current_device == torch.device("npu:1")
    assert m1.weights_dev.device == torch.device("npu:1")
    # torchrec-style specs without a device stay on the CPU, as upstream decides.
    assert build_tbe([(10, 4)], "torchrec", device=None).current_device == torch.device("cpu")


def test_managed_locations_name_the_table_on_npu() -> None:
    """UVM placements need CUDA's unified memory and cache: a clear error, not a deep failure."""
    for loc in (EmbeddingLocation.MANAGED, EmbeddingLocation.MANAGED_CACHING):
        specs = [
            (10, 4, EmbeddingLocation.DEVICE, ComputeDevice.CUDA),
            (10, 4, loc, ComputeDevice.CUDA),
        ]
        with pytest.raises(NotImplementedError, match=f"table 1 has EmbeddingLocation.{loc.name}"):
            SplitTableBatchedEmbeddingBagsCodegen(specs, device=torch.device("npu"))


def test_prefetch_on_npu() -> None:
    """``prefetch`` asks torch.cuda for a stream; on npu it runs (no cache: inputs and timestep)."""
    m = build_tbe([(10, 4)], "cuda_user", optimizer=O.EXACT_SGD)
    idx, off = fixed_batch(1, 10, 2, 3, 0)
    m.prefetch(idx, off)
    assert m(idx, off).shape == (2, 4)
    side = torch.npu.Stream()
    if side != torch.npu.current_stream():  # the simulator's streams all compare equal
        m.prefetch(idx, off, forward_stream=side)
        assert m(idx, off).shape == (2, 4)


def test_patches_are_inert_on_cpu() -> None:
    """A CPU TBE trains to the same bits with the patches applied and reverted."""

    def train() -> list[torch.Tensor]:
        torch.manual_seed(0)
        m = build_tbe(
            [(20, 8), (30, 4)], "torchrec", device="cpu", optimizer=O.EXACT_ROWWISE_ADAGRAD
        )
        for s in range(2):
            idx, off = fixed_batch(2, 20, 3, 2, s, "cpu")
            out = m(idx, off)
            out.backward(torch.ones_like(out))
        return [w.clone() for w in m.split_embedding_weights()]

    patched = train()
    tbe_device.revert()
    try:
        assert not tbe_device.is_applied()
        plain = train()
    finally:
        tbe_device.apply()
    assert all(torch.equal(a, b) for a, b in zip(patched, plain, strict=True))


def test_patches_do_not_rescue_cuda_calls_without_npu() -> None:
    """Without an npu device (no simulator, no torch_npu) upstream's CUDA errors stay."""
    script = textwrap.dedent(
        """
        import json
        import fbgemm_npu
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice, DenseTableBatchedEmbeddingBagsCodegen as D,
            SplitTableBatchedEmbeddingBagsCodegen as S)
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation as L
        errors = []
        for build in (lambda: D([(10, 4)]),
                      lambda: S([(10, 4, L.DEVICE, ComputeDevice.CUDA)])):
            try:
                build()
                errors.append(None)
            except Exception as exc:
                errors.append(type(exc).__name__ + ": " + str(exc))
        print(json.dumps(errors))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "FBGEMM_NPU_SIMULATE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(e is not None and "CUDA" in e for e in errors), errors
