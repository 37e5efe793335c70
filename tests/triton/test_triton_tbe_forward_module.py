"""The fused Triton TBE forward (fbgemm_npu/native/fbgemm/tbe/_triton_forward.py) where
upstream's modules call it, in Triton's interpreter on the simulated npu: every lookup's budget
(exact, per label, training and inference), upstream's SplitTableBatchedEmbeddingBagsCodegen on
npu (fbgemm_npu's split_table) under ``kernel_mode("triton")`` against ``kernel_mode("tensor")``
and upstream's CPU module (forward, and a training step on the kernel's state), and
DenseTableBatchedEmbeddingBagsCodegen likewise.
"""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    DenseTableBatchedEmbeddingBagsCodegen,
)

import fbgemm_npu
from fbgemm_npu.native._triton import kernel_mode
from fbgemm_npu.split_table import register_tbe_layout
from fbgemm_npu.testing.budgets import assert_triton_budget
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.tbe_counts import intercept_lookups
from fbgemm_npu.testing.tbe_inputs import MIXED, make_batches, same_weights, training_tbe

pytest.importorskip("triton", reason="triton is in requirements/lock.txt; absent here")

DENSE = "fbgemm::dense_embedding_codegen_lookup_function"


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> None:
    torch.testing.assert_close(actual.cpu().double(), expected.cpu().double(), rtol=tol, atol=tol)


def _module_lookups(opt: O, pooling: PoolingMode, weighted: bool, vbe: bool = False):
    specs = MIXED if pooling != PoolingMode.NONE else [(40, 8), (30, 8)]
    tbe = training_tbe(opt, specs, "npu", "cuda_user", pooling_mode=pooling)
    register_tbe_layout(tbe)
    per_rank = [[2, 3], [1, 4], [3, 0]] if vbe else None
    batch = make_batches(specs, 3, 1, seed=4, weighted=weighted, vbe=per_rank)[0]
    psw = None if batch.per_sample_weights is None else batch.per_sample_weights.to("npu")
    kwargs = {"per_sample_weights": psw, "batch_size_per_feature_per_rank": per_rank}
    return tbe, batch, (batch.indices.to("npu"), batch.offsets.to("npu")), kwargs


@pytest.mark.parametrize(
    ("opt", "pooling", "weighted", "label"),
    [
        (O.EXACT_SGD, PoolingMode.SUM, False, "call"),
        (O.EXACT_ROWWISE_ADAGRAD, PoolingMode.MEAN, False, "call"),
        (O.ADAM, PoolingMode.SUM, True, "call"),
        (O.EXACT_ADAGRAD, PoolingMode.NONE, False, "sequence"),
        (O.EXACT_ROWWISE_ADAGRAD, PoolingMode.SUM, True, "vbe"),
    ],
)
@pytest.mark.parametrize("train", [True, False])
def test_budget(opt: O, pooling: PoolingMode, weighted: bool, label: str, train: bool) -> None:
    """The lookup inside upstream's module, training (autograd) or not, exactly its budget."""
    tbe, _, args, kwargs = _module_lookups(opt, pooling, weighted, vbe=label == "vbe")
    seen = []

    def hold(qualname: str, call) -> torch.Tensor:
        with kernel_mode("triton"):
            call()  # the layout's device tables, once
        c = assert_triton_budget(call, qualname, label)
        seen.append(qualname)
        return c.result

    with intercept_lookups(hold), torch.set_grad_enabled(train):
        tbe(*args, **kwargs)
    assert len(seen) == 1
    fbgemm_npu.check()


@pytest.mark.parametrize(
    ("pooling", "vbe"),
    [(PoolingMode.SUM, False), (PoolingMode.MEAN, False), (PoolingMode.NONE, False),
     (PoolingMode.SUM, True), (PoolingMode.MEAN, True)],
)  # fmt: skip
def test_module_forward_vs_tensor_and_upstream_cpu(pooling: PoolingMode, vbe: bool) -> None:
    """Upstream's SplitTableBatchedEmbeddingBagsCodegen on npu (fbgemm_npu's split_table), its
    forward under kernel_mode("triton") == kernel_mode("tensor") ~= upstream's CPU module."""
    weighted = pooling == PoolingMode.SUM
    tbe, batch, args, kwargs = _module_lookups(O.EXACT_ROWWISE_ADAGRAD, pooling, weighted, vbe)
    specs = [(e, d) for e, d, *_ in tbe.embedding_specs]
    cpu = training_tbe(O.EXACT_ROWWISE_ADAGRAD, specs, "cpu", pooling_mode=pooling)
    same_weights(tbe, cpu)
    with kernel_mode("triton"), count("npu") as c:
        out = tbe(*args, **kwargs)
    assert "triton.tbe_forward" in c.launch_ops
    with kernel_mode("tensor"):
        tensor_out = tbe(*args, **kwargs)
    cpu_kwargs = {**kwargs, "per_sample_weights": batch.per_sample_weights}
    upstream = cpu(batch.indices, batch.offsets, **cpu_kwargs)
    close(out, tensor_out, 1e-6)
    close(out, upstream, 1e-5)
    fbgemm_npu.check()


def test_training_step_on_the_fused_forward_state() -> None:
    """A VBE training step (SGD, weighted) whose forward is the Triton kernel: the backward
    (the tensor program's: VBE) reads the kernel's state and updates the tables as after the
    tensor program's forward, and as upstream's CPU module does."""
    runs = [_module_lookups(O.EXACT_SGD, PoolingMode.SUM, True, True) for _ in range(2)]
    tbe0, batch, _, kwargs = runs[0]
    cpu = training_tbe(O.EXACT_SGD, [(e, d) for e, d, *_ in tbe0.embedding_specs], "cpu")
    same_weights(tbe0, runs[1][0])
    same_weights(tbe0, cpu)
    per_rank = kwargs["batch_size_per_feature_per_rank"]
    width = sum(d * sum(bs) for (_, d), bs in zip(MIXED, per_rank, strict=True))
    grad = torch.linspace(-1, 1, width)
    outs = []
    for mode, (tbe, _, args, kw) in zip(("triton", "tensor"), runs, strict=True):
        with kernel_mode(mode):
            out = tbe(*args, **kw)
            out.backward(grad.to("npu").view_as(out))
        outs.append(out.detach())
    cpu_kwargs = {**kwargs, "per_sample_weights": batch.per_sample_weights}
    cpu_out = cpu(batch.indices, batch.offsets, **cpu_kwargs)
    cpu_out.backward(grad.view_as(cpu_out))
    close(outs[0], outs[1], 1e-6)
    close(outs[0], cpu_out, 1e-5)
    weights = [t.split_embedding_weights() for t in (runs[0][0], runs[1][0], cpu)]
    for a, b, c in zip(*weights, strict=True):
        close(a, b, 1e-6)
        close(a, c, 1e-5)
    fbgemm_npu.check()


@pytest.mark.parametrize(
    ("pooling", "weighted"), [(PoolingMode.SUM, True), (PoolingMode.MEAN, False)]
)
def test_dense_tbe(pooling: PoolingMode, weighted: bool) -> None:
    """DenseTableBatchedEmbeddingBagsCodegen on npu, its forward on the kernel: exactly the
    budget, equal to upstream's CPU module; its dense weights gradient (from the kernel's
    state) equal to upstream's too."""
    specs = [(20, 4), (30, 8), (25, 4)]
    cpu = DenseTableBatchedEmbeddingBagsCodegen(specs, use_cpu=True, pooling_mode=pooling)
    npu = DenseTableBatchedEmbeddingBagsCodegen(specs, pooling_mode=pooling)
    register_tbe_layout(npu)
    with torch.no_grad():
        npu.weights.copy_(cpu.weights.detach())
    batch = make_batches(specs, 3, 1, seed=6, weighted=weighted)[0]
    psw = batch.per_sample_weights
    on_npu = None if psw is None else psw.to("npu")
    args = (batch.indices.to("npu"), batch.offsets.to("npu"), on_npu)
    with kernel_mode("triton"):
        npu(*args)  # the layout's device tables, once
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            out = assert_triton_budget(lambda: npu(*args), DENSE, "call").result  # noqa: B023
    ref = cpu(batch.indices, batch.offsets, psw)
    close(out, ref, 1e-5)
    go = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1))
    ref.backward(go)
    with kernel_mode("triton"):
        out.backward(go.to("npu"))
    close(npu.weights.grad, cpu.weights.grad, 1e-5)
    fbgemm_npu.check()
