"""TBE training steps under ``torch.compile(fullgraph=True, backend="aot_eager")`` on npu, with
static and dynamic shapes, equal to the same steps run eagerly.

The module's forward is compiled (dynamo traces upstream's Python down to the pt2 lookup op,
AOTAutograd traces our lookup kernels: the layout-free program of
``fbgemm_npu/native/fbgemm/tbe/traced.py``); the backward runs the compiled backward graph, whose
fused optimizer step updates the module's tables and states in place.  Built as users build it:
upstream's class with ``device=torch.device("npu")`` and our mirror's class (npu by default),
and the dense TBE with a torch optimizer.  Eager is the reference (itself held to upstream's CPU
kernels by the rest of tests/fbgemm/tbe): outputs, tables and optimizer states must agree to
fp32 rounding (the compiled step computes ``w - lr * g`` with a tensor learning rate, eager
``w + (-lr) * g`` with a host float).  Each case compiles once (~0.6 s static, ~3 s dynamic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from fbgemm_gpu import split_table_batched_embeddings_ops_training as upstream
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
    BoundsCheckMode,
    EmbeddingLocation,
    PoolingMode,
)
from fbgemm_gpu.split_table_batched_embeddings_ops_training import ComputeDevice

from fbgemm_npu.testing.tbe_inputs import MIXED, NPU, make_batches

STEPS = 3
LR = 0.05


def _specs() -> list[tuple[int, int, EmbeddingLocation, ComputeDevice]]:
    return [(e, d, EmbeddingLocation.DEVICE, ComputeDevice.CUDA) for e, d in MIXED]


def _upstream(opt: O) -> torch.nn.Module:
    return upstream.SplitTableBatchedEmbeddingBagsCodegen(
        _specs(), optimizer=opt, learning_rate=LR, device=torch.device(NPU)
    )


def _mirror(opt: O) -> torch.nn.Module:
    from fbgemm_npu.split_table_batched_embeddings_ops_training import (
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    return SplitTableBatchedEmbeddingBagsCodegen(_specs(), optimizer=opt, learning_rate=LR)


BUILDERS: dict[str, Callable[[O], torch.nn.Module]] = {"upstream": _upstream, "mirror": _mirror}


def _twins(build: Callable[[], torch.nn.Module]) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Two modules with the same random tables (upstream builds a device TBE's tables as
    zeros), their other parameters and buffers copied too."""
    eager, compiled = build(), build()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        tables = getattr(eager, "split_embedding_weights", lambda: [eager.weights])()
        for w in tables:
            w.copy_(torch.rand(w.shape, generator=g) - 0.5)
        for a, b in zip(eager.parameters(), compiled.parameters(), strict=True):
            b.copy_(a)
        for a, b in zip(eager.buffers(), compiled.buffers(), strict=True):
            b.copy_(a)
    return eager, compiled


def _batches(dynamic: bool, weighted: bool = False) -> list[Any]:
    """Dynamic: batches of different sizes (one graph must serve them all); static: the same
    shapes every step (one graph, no recompile)."""
    batches = make_batches(MIXED, 4, STEPS, seed=5, weighted=weighted)
    if dynamic:
        return batches
    first = batches[0]
    return [first] + [
        type(first)(
            first.indices.roll(s), first.offsets, first.per_sample_weights, None
        )  # same shapes, other rows
        for s in range(1, STEPS)
    ]


def _state_of(tbe: torch.nn.Module) -> list[torch.Tensor]:
    tables = [w.detach().cpu().clone() for w in tbe.split_embedding_weights()]
    states = [s.detach().cpu().clone() for st in tbe.split_optimizer_states() for s in st]
    return tables + states


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(
        actual.detach().cpu(),
        expected.detach().cpu(),
        rtol=2e-6,
        atol=2e-6,
        msg=lambda m: f"{what}: {m}",
    )


def _graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


# Upstream's class in all four (optimizer, shapes) pairs; the mirror's class (a thin subclass:
# the same traced code) in two of them, so that each style meets both optimizers and both
# shape modes.
CASES = [
    *[("upstream", o, d) for o in (O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD) for d in (False, True)],
    ("mirror", O.EXACT_SGD, False),
    ("mirror", O.EXACT_ROWWISE_ADAGRAD, True),
]


@pytest.mark.parametrize(
    ("style", "opt", "dynamic"),
    CASES,
    ids=[f"{s}-{o.name}-{'dynamic' if d else 'static'}" for s, o, d in CASES],
)
def test_compiled_training_step_equals_eager(style: str, opt: O, dynamic: bool) -> None:
    """Forward + fused-optimizer backward, several steps; the learning rate changed between
    steps reaches the compiled graph (a graph input, not a baked constant)."""
    torch._dynamo.reset()
    eager, target = _twins(lambda: BUILDERS[style](opt))
    assert next(target.buffers()).device.type == "npu"
    step = torch.compile(target, fullgraph=True, backend="aot_eager", dynamic=dynamic)
    initial = _state_of(target)
    before = _graphs()
    for k, batch in enumerate(_batches(dynamic)):
        if k == STEPS - 1:
            for m in (eager, target):
                m.set_learning_rate(LR * 3)
        idx, off = batch.indices.to(NPU), batch.offsets.to(NPU)
        want = eager(idx, off)
        grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(k)).to(NPU)
        want.backward(grad)
        got = step(idx, off)
        got.backward(grad)
        _close(got, want, f"output of step {k}")
        for i, (a, e) in enumerate(zip(_state_of(target), _state_of(eager), strict=True)):
            _close(a, e, f"table / state {i} after step {k}")
    assert _graphs() - before == 1, "one graph for every step"
    moved = [not torch.equal(a, e) for a, e in zip(_state_of(target), initial, strict=True)]
    assert all(moved), "every table and state was trained"


# (pooling, tables, VBE batch sizes per table and rank, weighted): the other argument paths
OTHER_PATHS = {
    "vbe": (PoolingMode.SUM, MIXED, [[2, 3], [1, 4], [2, 2]], True),
    "sequence": (PoolingMode.NONE, [(40, 8), (25, 8), (30, 8)], None, False),
    "weighted_mean": (PoolingMode.MEAN, MIXED, None, True),
}


@pytest.mark.parametrize("path", sorted(OTHER_PATHS))
def test_compiled_vbe_sequence_and_weighted_mean_steps_equal_eager(path: str) -> None:
    """Variable batch sizes (the output size is data-dependent under dynamo), pooling NONE and
    weighted MEAN, rowwise AdaGrad, static shapes."""
    torch._dynamo.reset()
    pooling, specs, vbe, weighted = OTHER_PATHS[path]

    def build() -> torch.nn.Module:
        return upstream.SplitTableBatchedEmbeddingBagsCodegen(
            [(e, d, EmbeddingLocation.DEVICE, ComputeDevice.CUDA) for e, d in specs],
            optimizer=O.EXACT_ROWWISE_ADAGRAD,
            learning_rate=LR,
            device=torch.device(NPU),
            pooling_mode=pooling,
        )

    eager, target = _twins(build)
    step = torch.compile(target, fullgraph=True, backend="aot_eager")
    for k, batch in enumerate(make_batches(specs, 3, 2, seed=1, weighted=weighted, vbe=vbe)):
        psw = None if batch.per_sample_weights is None else batch.per_sample_weights.to(NPU)
        args = (batch.indices.to(NPU), batch.offsets.to(NPU))
        kw = {"per_sample_weights": psw, "batch_size_per_feature_per_rank": vbe}
        want = eager(*args, **kw)
        grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(k)).to(NPU)
        want.backward(grad)
        got = step(*args, **kw)
        got.backward(grad)
        _close(got, want, f"{path} output of step {k}")
        for i, (a, e) in enumerate(zip(_state_of(target), _state_of(eager), strict=True)):
            _close(a, e, f"{path} table / state {i} after step {k}")


def _dense(weighted: bool) -> torch.nn.Module:
    from fbgemm_npu.split_table_batched_embeddings_ops_training import (
        DenseTableBatchedEmbeddingBagsCodegen,
    )

    torch.manual_seed(0)
    return DenseTableBatchedEmbeddingBagsCodegen([(e, d) for e, d in MIXED])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compiled_dense_tbe_with_a_torch_optimizer_equals_eager(dynamic: bool) -> None:
    """The dense TBE's lookup returns the weights' dense gradient; torch.optim.Adagrad steps."""
    torch._dynamo.reset()
    eager, target = _twins(lambda: _dense(True))
    assert target.weights.device.type == "npu"
    opts = [torch.optim.Adagrad(m.parameters(), lr=0.1) for m in (eager, target)]
    fwd = torch.compile(target, fullgraph=True, backend="aot_eager", dynamic=dynamic)
    for k, batch in enumerate(_batches(dynamic, weighted=True)):
        idx, off = batch.indices.to(NPU), batch.offsets.to(NPU)
        psw = batch.per_sample_weights.to(NPU)
        outs = []
        for module, opt in zip((eager, fwd), opts, strict=True):
            opt.zero_grad()
            out = module(idx, off, psw)
            (out * out).sum().backward()
            opt.step()
            outs.append(out)
        _close(outs[1], outs[0], f"output of step {k}")
        _close(target.weights, eager.weights, f"weights after step {k}")


def test_compiled_lookup_backpropagates_twice_through_a_retained_graph() -> None:
    """As upstream's autograd function on its CPU kernels (and our eager one): with
    ``retain_graph=True`` the lookup is differentiated twice, ``torch.autograd.grad`` giving the
    per-sample weights' gradient both times, and the fused step applied twice."""
    torch._dynamo.reset()
    eager, target = _twins(lambda: _upstream(O.EXACT_SGD))
    step = torch.compile(target, fullgraph=True, backend="aot_eager")
    batch = _batches(False, weighted=True)[0]
    idx, off = batch.indices.to(NPU), batch.offsets.to(NPU)
    seen = {}
    for name, fn in (("eager", eager), ("compiled", step)):
        psw = batch.per_sample_weights.to(NPU).requires_grad_()
        y = fn(idx, off, per_sample_weights=psw)
        loss = (y * y).sum() / 100
        grads = [torch.autograd.grad(loss, psw, retain_graph=True)[0] for _ in range(2)]
        seen[name] = grads
    for i, (a, e) in enumerate(zip(seen["compiled"], seen["eager"], strict=True)):
        _close(a, e, f"per-sample weights' gradient of backward {i + 1}")
    assert not torch.equal(seen["eager"][0], seen["eager"][1]), "the first step moved the rows"
    for i, (a, e) in enumerate(zip(_state_of(target), _state_of(eager), strict=True)):
        _close(a, e, f"table / state {i} after two backwards")


def test_compiled_dense_lookup_gives_the_same_gradient_twice() -> None:
    """The dense TBE (no fused step): ``torch.autograd.grad`` twice through a retained compiled
    graph gives upstream CPU's gradient both times."""
    torch._dynamo.reset()
    cpu = upstream.DenseTableBatchedEmbeddingBagsCodegen([(e, d) for e, d in MIXED], use_cpu=True)
    target = _dense(False)
    with torch.no_grad():
        target.weights.copy_(cpu.weights)
    batch = _batches(False)[0]
    fwd = torch.compile(target, fullgraph=True, backend="aot_eager")
    grads = {}
    for name, fn, w, dev in (("cpu", cpu, cpu.weights, "cpu"), ("npu", fwd, target.weights, NPU)):
        y = fn(batch.indices.to(dev), batch.offsets.to(dev))
        loss = (y * y).sum()
        grads[name] = [torch.autograd.grad(loss, w, retain_graph=True)[0] for _ in range(2)]
    for g in grads["npu"]:
        _close(g, grads["cpu"][0], "dense TBE gradient")


@pytest.mark.xfail(
    strict=True,
    reason="torch 2.13 AOTAutograd: an input that requires grad and that a custom op's schema "
    "declares mutable (bounds_check_indices' 'weights', i.e. the per-sample weights), in a "
    "graph that also returns an input (upstream's 'self.iter_cpu = self.iter_cpu.cpu()' of the "
    "optimizers with an iteration counter), gives an output that does not require grad; "
    "reproduced without fbgemm by a two-line custom op",
)
def test_compiled_rowwise_adagrad_keeps_the_per_sample_weights_graph() -> None:
    torch._dynamo.reset()
    target = _upstream(O.EXACT_ROWWISE_ADAGRAD)
    step = torch.compile(target, fullgraph=True, backend="aot_eager")
    batch = _batches(False, weighted=True)[0]
    psw = batch.per_sample_weights.to(NPU).requires_grad_()
    y = step(batch.indices.to(NPU), batch.offsets.to(NPU), per_sample_weights=psw)
    assert y.requires_grad


@pytest.mark.parametrize("opt", [O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD], ids=lambda o: o.name)
def test_compiled_training_step_has_no_ai_cpu_launch(opt: O) -> None:
    """The traced program (bags, features and the layout's table rows without searchsorted or
    an integer sort; the eager de-duplication) launches nothing a 910B runs on its AI CPU: the
    compiled forward and backward graphs run under the counters (aot_eager's graphs, each
    wrapped by a counting compiler: a dispatch mode around the compiled module itself is
    refused by dynamo)."""
    from torch._dynamo.backends.common import aot_autograd

    from fbgemm_npu.testing import counters

    seen: list[counters.Counter] = []

    def counting(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
        def run(args: list[Any]) -> Any:
            with counters.count() as c:
                out = gm(*args)
            seen.append(c)
            return out

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=counting, bw_compiler=counting)
    # bounds checks off: the counters take no higher-order op (the check's in-place op is
    # auto-functionalized in the graph); the eager bounds check is test_tbe_routes.py's
    tbe = upstream.SplitTableBatchedEmbeddingBagsCodegen(
        _specs(), optimizer=opt, learning_rate=LR, device=torch.device(NPU),
        bounds_check_mode=BoundsCheckMode.NONE,
    )  # fmt: skip
    step = torch.compile(tbe, fullgraph=True, backend=backend, dynamic=True)
    for batch in make_batches(MIXED, 4, 2, seed=9):
        out = step(batch.indices.to(NPU), batch.offsets.to(NPU))
        out.backward(torch.ones_like(out))
    assert len(seen) == 4 and all(c.launches > 0 for c in seen)  # 2 x (forward, backward)
    assert [e.name for c in seen for e in c.events if e.ai_cpu] == []


def test_compiled_step_writes_a_preallocated_vbe_output_like_upstream_cpu() -> None:
    """Upstream's ``vbe_output`` / ``vbe_output_offsets`` under ``torch.compile``: the traced
    program ignored the buffer (a fresh tensor came back, the buffer untouched).  Now the rows of
    rank ``r`` and feature ``t`` land at ``vbe_output_offsets[r, t]`` of the given buffer (the rest
    of it kept: a graph mutation of its input), the output holds the buffer's values, and the SGD
    step through it equals upstream's CPU module (whose compact VBE output is placed by hand: its
    CPU build refuses a pre-allocated output)."""
    from fbgemm_npu.testing.tbe_inputs import training_tbe

    torch._dynamo.reset()
    specs, vbe = [(40, 8), (25, 16), (30, 8)], [[2, 3], [1, 4], [3, 1]]
    ours = training_tbe(O.EXACT_SGD, specs, NPU, style="cuda_user")
    ref = training_tbe(O.EXACT_SGD, specs, "cpu")
    with torch.no_grad():
        for x, y in zip(ref.split_embedding_weights(), ours.split_embedding_weights(), strict=True):
            x.copy_(torch.rand(x.shape, generator=torch.Generator().manual_seed(x.numel())) - 0.5)
            y.copy_(x.to(NPU))
    b = make_batches(specs, 4, 1, seed=3, vbe=vbe)[0]
    starts, pos = [], 5  # rank-major merged layout, a gap of 5 before and 3 after this lookup
    for r in range(2):
        starts.append([pos + sum(vbe[u][r] * specs[u][1] for u in range(t)) for t in range(3)])
        pos += sum(vbe[t][r] * d for t, (_, d) in enumerate(specs))
    buf = torch.full((pos + 3,), -7.0, device=NPU)
    step = torch.compile(ours, fullgraph=True, backend="aot_eager")
    out = step(
        b.indices.to(NPU),
        b.offsets.to(NPU),
        batch_size_per_feature_per_rank=vbe,
        vbe_output=buf,
        vbe_output_offsets=torch.tensor(starts, device=NPU),
    )
    expect = ref(b.indices, b.offsets, batch_size_per_feature_per_rank=vbe)
    got = buf.cpu()
    assert torch.equal(got[:5], torch.full((5,), -7.0)), "the buffer before this lookup kept"
    assert torch.equal(got[pos:], torch.full((3,), -7.0)), "the buffer after this lookup kept"
    _close(got[5:pos], expect.view(-1), "vbe_output written by the compiled forward")
    _close(out, got, "the compiled forward's result: the buffer's values")
    w = torch.linspace(-1.0, 1.0, pos - 5)
    (out[5:pos] * w.to(NPU)).sum().backward()
    (expect.view(-1) * w).sum().backward()
    for x, y in zip(ref.split_embedding_weights(), ours.split_embedding_weights(), strict=True):
        _close(y, x, "weights after the compiled SGD step")
