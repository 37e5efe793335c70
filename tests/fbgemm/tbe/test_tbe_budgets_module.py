"""A training step of upstream's TBE modules on npu, held to the lookups' budgets.

What a user runs: ``SplitTableBatchedEmbeddingBagsCodegen`` built in either construction style
(torchrec's, a CUDA user's), bounds checks off, after the first call has built and cached the
per-TBE plan.  The lookup op inside the module is held to its forward budget, the backward (the
fused optimizer step) to its ``backward`` path, per distinct embedding dim; the whole step --
upstream's own Python launches around the op included -- must cost the same for 1 table and for
32.  ``DenseTableBatchedEmbeddingBagsCodegen`` likewise, with a torch optimizer.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    DenseTableBatchedEmbeddingBagsCodegen,
    GlobalWeightDecayDefinition,
    WeightDecayMode,
)

import fbgemm_npu
from fbgemm_npu.split_table import register_tbe_layout
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.budgets import assert_op_budget, budget_of
from fbgemm_npu.testing.tbe_counts import assert_budget_is_the_ceiling, intercept_lookups
from fbgemm_npu.testing.tbe_inputs import (
    NPU,
    STYLES,
    build_tbe,
    fixed_batch,
)

OPTIMIZERS = {
    O.EXACT_SGD: "sgd",
    O.EXACT_ADAGRAD: "adagrad",
    O.EXACT_ROWWISE_ADAGRAD: "rowwise_adagrad",
    O.ADAM: "adam",
    O.PARTIAL_ROWWISE_ADAM: "partial_rowwise_adam",
    O.LAMB: "lamb",
    O.PARTIAL_ROWWISE_LAMB: "partial_rowwise_lamb",
    O.LARS_SGD: "lars_sgd",
}
_CPU_STYLE = (O.EXACT_SGD, O.EXACT_ADAGRAD, O.EXACT_ROWWISE_ADAGRAD)
DENSE = "fbgemm::dense_embedding_codegen_lookup_function"


def counted_step(
    style: str,
    T: int,
    dims: list[int],
    optimizer: O,
    forward_path: str | None = None,
    backward_path: str = "backward",
    **kwargs: Any,
) -> tuple[counters.Counter, counters.Counter]:
    """The third training step of a ``T``-table TBE (dims cycling through ``dims``): the lookup
    held to its budget (``len(dims)`` classes); returns the module's forward and backward
    counters."""
    m = build_tbe(
        [(100, dims[t % len(dims)]) for t in range(T)],
        style,
        optimizer=optimizer,
        bounds_check_mode=BoundsCheckMode.NONE,
        **kwargs,
    )
    op = f"fbgemm::split_embedding_codegen_lookup_{OPTIMIZERS[optimizer]}_function_pt2"
    idx, off = fixed_batch(T, 100, 4, 3, 0)
    for _ in range(2):  # the first call builds and caches the per-TBE plan
        out = m(idx, off)
        out.backward(torch.ones_like(out))
    # the warm-up steps' deferred checks, read here: the read (a sync) is not the step's
    fbgemm_npu.check()

    def hold(qualname: str, call: Any) -> torch.Tensor:
        assert qualname == op, f"the module called {qualname}, expected {op}"
        return assert_op_budget(call, op, path=forward_path, units=len(dims)).result

    with intercept_lookups(hold), counters.count() as fwd:
        out = m(idx, off)
    grad = torch.ones_like(out)
    with counters.count() as bwd:
        assert_op_budget(lambda: out.backward(grad), op, path=backward_path, units=len(dims))
    # nothing around the op may sync either
    assert fwd.syncs <= budget_of(op).sync_limit(), fwd.summary()
    return fwd, bwd


def _budget_params() -> list[object]:
    params = []
    for optimizer in OPTIMIZERS:
        for dims in ([8], [4, 8]):
            # upstream's Python refuses other optimizers with ComputeDevice.CPU
            for style in STYLES if optimizer in _CPU_STYLE else ["cuda_user"]:
                params.append(
                    pytest.param(style, optimizer, dims, id=f"{style}-{optimizer.name}-D{dims}")
                )
    return params


@pytest.mark.parametrize("style, optimizer, dims", _budget_params())
def test_training_step_budget(style: str, optimizer: O, dims: list[int]) -> None:
    """Forward and backward + optimizer within the lookup's per-D budget, 0 syncs, the same
    count for 1 table and for 32 tables."""
    counts = []
    for T in (len(dims), 32):
        fwd, bwd = counted_step(style, T, dims, optimizer)
        counts.append((fwd.launches, fwd.syncs, bwd.launches, bwd.syncs))
    assert counts[0] == counts[1], f"the step grows with the number of tables: {counts}"


@pytest.mark.parametrize("dims", [[8], [4, 8]])
def test_global_weight_decay_step_budget(dims: list[int]) -> None:
    """Rowwise AdaGrad with global weight decay (DECOUPLE_GLOBAL, applied from iteration 0): the
    forward pays the pending decay of each looked-up row, the backward decays and stamps the
    rows; both within their paths' per-D budgets, independent of the table count."""
    kw = dict(
        weight_decay=0.01,
        weight_decay_mode=WeightDecayMode.DECOUPLE_GLOBAL,
        global_weight_decay=GlobalWeightDecayDefinition(start_iter=0, lower_bound=0.0),
    )
    counts = []
    for T in (len(dims), 32):
        fwd, bwd = counted_step(
            "cuda_user",
            T,
            dims,
            O.EXACT_ROWWISE_ADAGRAD,
            "global_weight_decay",
            "global_weight_decay_backward",
            **kw,
        )
        counts.append((fwd.launches, fwd.syncs, bwd.launches, bwd.syncs))
    assert counts[0] == counts[1], f"the step grows with the number of tables: {counts}"


def dense_step(
    specs: list[tuple[int, int]],
    pooling: PoolingMode,
    weighted: bool,
    forward: str | None,
    backward: str,
    units: int,
) -> tuple[counters.Counter, counters.Counter]:
    """The second step of a DenseTBE on npu (its layout registered) held to its budget; the
    first, which builds the per-TBE plan, must not sync."""
    m = DenseTableBatchedEmbeddingBagsCodegen(specs, pooling_mode=pooling)
    register_tbe_layout(m)
    T = len(specs)
    for step in range(2):
        idx, off = fixed_batch(T, 20, 3, 2, step)
        psw = torch.rand(idx.numel(), generator=torch.Generator().manual_seed(step))
        psw = psw.to(NPU) if weighted else None
        if step == 0:
            with counters.count() as first:
                out = m(idx, off, psw)
                out.backward(torch.ones_like(out))
            assert first.syncs <= budget_of(DENSE).sync_limit(), first.summary()
            continue
        fwd = assert_op_budget(
            lambda: m(idx, off, psw),  # noqa: B023 - run at once
            DENSE,
            path=forward,
            units=units,
        )
        grad = torch.ones_like(fwd.result)
        bwd = assert_op_budget(
            lambda: fwd.result.backward(grad),  # noqa: B023 - run at once
            DENSE,
            path=backward,
            units=units,
        )
    return fwd, bwd


# (pooling, weighted, forward path, backward path), as the lookups' (test_tbe_budgets.py)
DENSE_PATHS = [
    (PoolingMode.SUM, False, None, "backward"),
    (PoolingMode.SUM, True, None, "backward"),
    (PoolingMode.MEAN, False, None, "mean_backward"),
    (PoolingMode.MEAN, True, "weighted_mean", "mean_backward"),
    (PoolingMode.NONE, False, "sequence", "sequence_backward"),
]


def test_dense_tbe_budget() -> None:
    """Every path, per distinct D, the same for 2 tables and for 32."""
    measured: dict[str | None, list[tuple[int, int]]] = {}
    for pooling, weighted, forward, backward in DENSE_PATHS:
        one_d = dense_step([(20, 4), (30, 4)], pooling, weighted, forward, backward, units=1)
        many = dense_step(
            [(20 + t, 4) for t in range(32)], pooling, weighted, forward, backward, units=1
        )
        for a, b in zip(one_d, many, strict=True):
            assert (a.launches, a.syncs) == (b.launches, b.syncs), (a.summary(), b.summary())
        runs = [(one_d, 1)]
        if pooling != PoolingMode.NONE:  # a sequence TBE has one D
            two_d = dense_step([(20, 4), (30, 8)], pooling, weighted, forward, backward, units=2)
            runs.append((two_d, 2))
        for (fwd, bwd), units in runs:
            measured.setdefault(forward, []).append((fwd.launches, units))
            measured.setdefault(backward, []).append((bwd.launches, units))
    assert_budget_is_the_ceiling(DENSE, measured)
