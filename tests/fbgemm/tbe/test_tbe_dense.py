"""``DenseTableBatchedEmbeddingBagsCodegen`` on npu: it builds on the device (it has no device
argument) and trains with a torch optimizer like its CPU twin, upstream's CPU kernels."""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    DenseTableBatchedEmbeddingBagsCodegen,
)

from fbgemm_npu.split_table import device as tbe_device
from fbgemm_npu.split_table import register_tbe_layout
from fbgemm_npu.testing.tbe_inputs import MIXED, NPU, assert_close, fixed_batch, make_batches


def test_dense_tbe_builds_on_npu() -> None:
    """``DenseTableBatchedEmbeddingBagsCodegen(use_cpu=False)`` has no device argument: npu."""
    m = DenseTableBatchedEmbeddingBagsCodegen([(10, 4), (20, 8)])
    assert m.weights.device.type == "npu" and m.D_offsets.device.type == "npu"
    assert torch.cuda.current_device is not tbe_device._current_npu_device  # restored after
    on_cpu = DenseTableBatchedEmbeddingBagsCodegen([(10, 4)], use_cpu=True)
    assert on_cpu.weights.device.type == "cpu"


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
        idx, off = fixed_batch(2, 20, 3, 2, step, "cpu")
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
        weights = npu.weights.detach().cpu()
        torch.testing.assert_close(weights, cpu.weights.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("pooling", "weighted"),
    [(PoolingMode.SUM, False), (PoolingMode.MEAN, False), (PoolingMode.SUM, True)],
)
def test_dense_tbe_trains_with_a_torch_optimizer_like_upstream_cpu(
    pooling: PoolingMode, weighted: bool
) -> None:
    cpu = DenseTableBatchedEmbeddingBagsCodegen(MIXED, pooling_mode=pooling, use_cpu=True)
    npu = DenseTableBatchedEmbeddingBagsCodegen(MIXED, pooling_mode=pooling, use_cpu=True)
    with torch.no_grad():
        npu.weights.copy_(cpu.weights)
    npu = npu.to(NPU)
    register_tbe_layout(npu)
    opts = [torch.optim.Adagrad(m.parameters(), lr=0.1) for m in (cpu, npu)]
    for i, batch in enumerate(make_batches(MIXED, 5, 2, seed=6, weighted=weighted)):
        outs = []
        for tbe, opt, dev in ((cpu, opts[0], "cpu"), (npu, opts[1], "npu")):
            opt.zero_grad()
            psw = batch.per_sample_weights
            out = tbe(
                batch.indices.to(dev),
                batch.offsets.to(dev),
                per_sample_weights=None if psw is None else psw.to(dev),
            )
            out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(i)).to(dev))
            opt.step()
            outs.append(out)
        assert_close(outs[1], outs[0], 1e-5, f"output, step {i}")
        assert_close(npu.weights.grad, cpu.weights.grad, 1e-5, f"weights gradient, step {i}")
        assert_close(npu.weights, cpu.weights, 1e-4, f"weights, step {i}")
