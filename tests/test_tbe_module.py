"""Upstream's TBE modules on npu: construction, device handling, training, budgets and memory.

``SplitTableBatchedEmbeddingBagsCodegen`` is built the two ways users build it -- torchrec's for a
non-CUDA device (``EmbeddingLocation.HOST``, ``ComputeDevice.CPU``, ``device=npu``) and a CUDA
user's (``EmbeddingLocation.DEVICE``, ``ComputeDevice.CUDA``) with only the device changed -- and
trained on a toy problem; ``DenseTableBatchedEmbeddingBagsCodegen`` trains with torch optimizers
like its CPU twin.  ``fbgemm_npu.split_table.device`` (the patches upstream's Python needs for an
npu device) is checked to be active, written for the installed fbgemm_gpu, and inert on CPU.
Value-level conformance of every optimizer and mode is ``conformance/test_tbe.py``.
"""

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
from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
    BoundsCheckMode,
    EmbeddingLocation,
    PoolingMode,
)
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    DenseTableBatchedEmbeddingBagsCodegen,
    GlobalWeightDecayDefinition,
    SplitTableBatchedEmbeddingBagsCodegen,
    WeightDecayMode,
)

from fbgemm_npu.split_table import device as tbe_device
from fbgemm_npu.testing import counters

REPO = Path(__file__).resolve().parents[1]
STYLES = {
    "torchrec": (EmbeddingLocation.HOST, ComputeDevice.CPU),
    "cuda_user": (EmbeddingLocation.DEVICE, ComputeDevice.CUDA),
}


def _tbe(style: str, specs: list[tuple[int, int]], **kwargs: object):
    loc, cd = STYLES[style]
    kwargs.setdefault("device", torch.device("npu"))
    return SplitTableBatchedEmbeddingBagsCodegen([(e, d, loc, cd) for e, d in specs], **kwargs)


def _batch(T: int, E: int, B: int, L: int, seed: int, device: str = "npu"):
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, E, (T * B * L,), generator=gen)
    off = torch.arange(0, T * B * L + 1, L)
    return idx.to(device), off.to(device)


# --- the patches ---------------------------------------------------------------------------
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
    m = _tbe("cuda_user", [(10, 4)], device=None)
    assert m.current_device == torch.device("npu", torch.npu.current_device())
    assert m.weights_dev.device.type == "npu"
    with torch.npu.device(1):
        m1 = _tbe("cuda_user", [(10, 4)], device=None)
    assert m1.current_device == torch.device("npu:1")
    assert m1.weights_dev.device == torch.device("npu:1")
    # torchrec-style specs without a device stay on the CPU, as upstream decides.
    assert _tbe("torchrec", [(10, 4)], device=None).current_device == torch.device("cpu")


def test_managed_locations_name_the_table_on_npu() -> None:
    """UVM placements need CUDA's unified memory and cache: a clear error, not a deep failure."""
    for loc in (EmbeddingLocation.MANAGED, EmbeddingLocation.MANAGED_CACHING):
        specs = [(10, 4, EmbeddingLocation.DEVICE, ComputeDevice.CUDA),
                 (10, 4, loc, ComputeDevice.CUDA)]  # fmt: skip
        with pytest.raises(NotImplementedError, match=f"table 1 has EmbeddingLocation.{loc.name}"):
            SplitTableBatchedEmbeddingBagsCodegen(specs, device=torch.device("npu"))


def test_dense_tbe_builds_on_npu() -> None:
    """``DenseTableBatchedEmbeddingBagsCodegen(use_cpu=False)`` has no device argument: npu."""
    m = DenseTableBatchedEmbeddingBagsCodegen([(10, 4), (20, 8)])
    assert m.weights.device.type == "npu" and m.D_offsets.device.type == "npu"
    assert torch.cuda.current_device is not tbe_device._current_npu_device  # restored after
    assert DenseTableBatchedEmbeddingBagsCodegen([(10, 4)], use_cpu=True).weights.device.type == (
        "cpu"
    )


def test_prefetch_on_npu() -> None:
    """``prefetch`` asks torch.cuda for a stream; on npu it runs (no cache: inputs and timestep)."""
    m = _tbe("cuda_user", [(10, 4)], optimizer=O.EXACT_SGD)
    idx, off = _batch(1, 10, 2, 3, 0)
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
        m = _tbe("torchrec", [(20, 8), (30, 4)], device="cpu", optimizer=O.EXACT_ROWWISE_ADAGRAD)
        for s in range(2):
            idx, off = _batch(2, 20, 3, 2, s, "cpu")
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
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(e is not None and "CUDA" in e for e in errors), errors


# --- training -------------------------------------------------------------------------------
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("optimizer", [O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD, O.EXACT_ADAGRAD])
def test_toy_problem_trains(style: str, optimizer: O) -> None:
    """Pooled embeddings regress onto a fixed target: the loss falls, and each step moves only
    the rows the batch touched."""
    T, E, B, L = 2, 50, 4, 3
    m = _tbe(style, [(E, 8)] * T, optimizer=optimizer, learning_rate=0.2)
    gen = torch.Generator().manual_seed(1)
    target = torch.randn(B, 8 * T, generator=gen).to("npu")
    idx, off = _batch(T, E, B, L, 2)
    touched = [torch.zeros(E, dtype=torch.bool) for _ in range(T)]
    for t in range(T):
        touched[t][idx[t * B * L : (t + 1) * B * L].cpu()] = True
    losses = []
    for _ in range(30):
        before = [w.detach().cpu().clone() for w in m.split_embedding_weights()]
        loss = torch.nn.functional.mse_loss(m(idx, off), target)
        loss.backward()
        losses.append(float(loss))
        after = [w.detach().cpu() for w in m.split_embedding_weights()]
        for t in range(T):
            assert torch.equal(after[t][~touched[t]], before[t][~touched[t]])
            assert not torch.equal(after[t][touched[t]], before[t][touched[t]])
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("optim", ["SGD", "Adagrad"])
@pytest.mark.parametrize("pooling, weighted", [(PoolingMode.SUM, True), (PoolingMode.MEAN, False)])
def test_dense_tbe_trains_like_cpu(optim: str, pooling: PoolingMode, weighted: bool) -> None:
    """DenseTBE + a torch optimizer: npu and CPU twins stay equal over 3 steps (mixed dims)."""
    specs = [(20, 4), (30, 8)]
    cpu = DenseTableBatchedEmbeddingBagsCodegen(specs, use_cpu=True, pooling_mode=pooling)
    npu = DenseTableBatchedEmbeddingBagsCodegen(specs, pooling_mode=pooling)
    with torch.no_grad():
        npu.weights.copy_(cpu.weights.detach())
    opts = [getattr(torch.optim, optim)([m.weights], lr=0.1) for m in (cpu, npu)]
    for step in range(3):
        idx, off = _batch(2, 20, 3, 2, step, "cpu")
        psw = torch.rand(idx.numel(), generator=torch.Generator().manual_seed(step))
        go = torch.randn(3, 12, generator=torch.Generator().manual_seed(10 + step))
        outs = []
        for m, opt in zip((cpu, npu), opts, strict=True):
            dev = m.weights.device
            opt.zero_grad()
            out = m(idx.to(dev), off.to(dev), psw.to(dev) if weighted else None)
            out.backward(go.to(dev))
            opt.step()
            outs.append(out.detach().cpu())
        torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(npu.weights.detach().cpu(), cpu.weights.detach(),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip


# --- budgets and memory ----------------------------------------------------------------------
def _counted_step(style: str, T: int, dims: list[int], optimizer: O, **kwargs: object):
    m = _tbe(style, [(100, dims[t % len(dims)]) for t in range(T)], optimizer=optimizer,
             bounds_check_mode=BoundsCheckMode.NONE, **kwargs)  # fmt: skip
    idx, off = _batch(T, 100, 4, 3, 0)
    for _ in range(2):  # the first call builds and caches the per-TBE plan
        out = m(idx, off)
        out.backward(torch.ones_like(out))
    with counters.count() as fwd:
        out = m(idx, off)
    grad = torch.ones_like(out)
    with counters.count() as bwd:
        out.backward(grad)
    return fwd, bwd


_CPU_STYLE = (O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD)


def _budget_params() -> list[object]:
    params = []
    optimizers = (O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD, O.ADAM,
                  O.PARTIAL_ROWWISE_ADAM, O.LAMB, O.PARTIAL_ROWWISE_LAMB, O.LARS_SGD)  # fmt: skip
    for optimizer in optimizers:
        for dims in ([8], [4, 8]):
            # upstream's Python refuses other optimizers with ComputeDevice.CPU
            for style in STYLES if optimizer in _CPU_STYLE else ["cuda_user"]:
                params.append(
                    pytest.param(style, optimizer, dims, id=f"{style}-{optimizer.name}-D{dims}")
                )
    return params


@pytest.mark.parametrize("style, optimizer, dims", _budget_params())
def test_training_step_budget(style: str, optimizer: O, dims: list[int]) -> None:
    """OPS.md section 2: forward <= 10 launches and backward + optimizer <= 40 per distinct
    embedding dim, 0 syncs, the same count for 1 table and for 32 tables."""
    counts = []
    for T in (len(dims), 32):
        fwd, bwd = _counted_step(style, T, dims, optimizer)
        assert fwd.launches <= 10 * len(dims) and fwd.syncs == 0, fwd.summary()
        assert bwd.launches <= 40 * len(dims) and bwd.syncs == 0, bwd.summary()
        counts.append((fwd.launches, bwd.launches))
    assert counts[0] == counts[1], f"launches grow with the number of tables: {counts}"


@pytest.mark.parametrize("dims", [[8], [4, 8]])
def test_global_weight_decay_step_budget(dims: list[int]) -> None:
    """Rowwise AdaGrad with global weight decay (DECOUPLE_GLOBAL, applied from iteration 0):
    backward + optimizer <= 40 launches per distinct dim, 0 syncs, independent of the table
    count; the forward pays the pending decay of each looked-up row (<= 20 per dim)."""
    kw = dict(
        weight_decay=0.01,
        weight_decay_mode=WeightDecayMode.DECOUPLE_GLOBAL,
        global_weight_decay=GlobalWeightDecayDefinition(start_iter=0, lower_bound=0.0),
    )
    counts = []
    for T in (len(dims), 32):
        fwd, bwd = _counted_step("cuda_user", T, dims, O.EXACT_ROWWISE_ADAGRAD, **kw)
        assert fwd.launches <= 20 * len(dims) and fwd.syncs == 0, fwd.summary()
        assert bwd.launches <= 40 * len(dims) and bwd.syncs == 0, bwd.summary()
        counts.append((fwd.launches, bwd.launches))
    assert counts[0] == counts[1], f"launches grow with the number of tables: {counts}"


@pytest.mark.parametrize("style", list(STYLES))
def test_backward_memory_is_o_of_indices(style: str) -> None:
    """A 10-million-row table (D=4 fp32: 160 MB) trains one step on 300 indices with peak extra
    device memory O(indices x D): far below one table-sized gradient."""
    E, D, n, L = 10_000_000, 4, 300, 10
    m = _tbe(style, [(E, D)], optimizer=O.EXACT_ROWWISE_ADAGRAD)
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, E, (n,), generator=gen).to("npu")
    off = torch.arange(0, n + 1, L).to("npu")
    grad = torch.ones(n // L, D, device="npu")
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    out = m(idx, off)
    out.backward(grad)
    del out
    torch.npu.synchronize()
    peak = torch.npu.max_memory_allocated() - base
    bound = 64 * n * D * 4 + (1 << 16)
    assert peak < bound, f"peak extra device memory {peak} B > {bound} B (table {E * D * 4} B)"
    assert torch.npu.memory_allocated() - base < (1 << 16)  # nothing table-sized kept either
