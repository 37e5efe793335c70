"""The pt2 lookups held to their BUDGETS entries (fbgemm_npu/native/fbgemm/tbe/budgets.py).

Each lookup is counted inside upstream's module, on the second training step of a TBE whose
layout was registered up front (so even the first step must not sync): the lookup op's forward
alone, and the backward with its fused optimizer step.  A budget is per distinct D and must not
grow with the number of tables; every path of a lookup's entry is measured here, with one and
with two table classes, and the entry must be the ceiling of the per-class counts -- so a table
that has grown stale fails as surely as a kernel over budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    GlobalWeightDecayDefinition,
    WeightDecayMode,
)

from fbgemm_npu.split_table import register_tbe_layout
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.budgets import assert_op_budget, budget_of
from fbgemm_npu.testing.tbe_counts import assert_budget_is_the_ceiling, intercept_lookups
from fbgemm_npu.testing.tbe_inputs import (
    COUNTER_CASES,
    NPU,
    counter_regularization,
    host_layout,
    make_batches,
    rmsprop_ar_kwargs,
    rmsprop_ar_lookup,
    total_unique_indices,
    training_tbe,
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
VBE_OPTIMIZERS = (O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD, O.ADAM)  # upstream's Python allows VBE
ONE_CLASS = [(30, 8)]
TWO_CLASSES = [(30, 4), (30, 8)]  # table 1 starts at row 120 of the flat buffer: 0 mod 8


def lookup_op(optimizer: str) -> str:
    return f"fbgemm::split_embedding_codegen_lookup_{optimizer}_function_pt2"


@dataclass(frozen=True)
class Path:
    """A way of calling the lookup and the budget paths its forward and backward are held to."""

    label: str
    forward: str | None = None  # None: the main path
    backward: str = "backward"
    pooling: PoolingMode = PoolingMode.SUM
    weighted: bool = False
    vbe: bool = False
    one_class_only: bool = False  # pooling NONE: one D for all features, upstream's rule
    kwargs: dict[str, Any] = field(default_factory=dict)  # the module's constructor's


POOLED = [
    Path("sum"),
    Path("weighted_sum", weighted=True),
    Path("mean", backward="mean_backward", pooling=PoolingMode.MEAN),
    Path("weighted_mean", "weighted_mean", "mean_backward", PoolingMode.MEAN, weighted=True),
    Path("sequence", "sequence", "sequence_backward", PoolingMode.NONE, one_class_only=True),
]
VBE = [
    Path(f"vbe_{p.label}", "vbe", "vbe_backward", p.pooling, p.weighted, vbe=True)
    for p in POOLED
    if p.pooling != PoolingMode.NONE
]
GLOBAL_WEIGHT_DECAY = Path(
    "global_weight_decay",
    "global_weight_decay",
    "global_weight_decay_backward",
    kwargs={
        "weight_decay": 0.01,
        "weight_decay_mode": WeightDecayMode.DECOUPLE_GLOBAL,
        "global_weight_decay": GlobalWeightDecayDefinition(start_iter=0, lower_bound=0.0),
    },
)


def counted_lookup_step(
    opt: O,
    specs: list[tuple[int, int]],
    B: int,
    path: Path,
    op: str,
    units: int,
) -> tuple[counters.Counter, counters.Counter]:
    """Train two steps; hold the second step's lookup forward and backward to ``op``'s budget
    (``units`` classes) and return their counters.  The first step must not sync either."""
    tbe = training_tbe(opt, specs, "npu", "cuda_user", pooling_mode=path.pooling, **path.kwargs)
    register_tbe_layout(tbe)
    seen: dict[str, counters.Counter] = {}
    step = 0

    def hold(qualname: str, call: Any) -> torch.Tensor:
        assert qualname == op, f"the module called {qualname}, expected {op}"
        if step == 0:
            with counters.count() as c:
                out = call()
            assert c.syncs <= budget_of(op).sync_limit(), c.summary()
            return out
        seen["forward"] = assert_op_budget(call, op, path=path.forward, units=units)
        return seen["forward"].result

    vbe = [[2, 3], [1, 4]][: len(specs)] if path.vbe else None
    batches = make_batches(specs, B, 2, seed=5, weighted=path.weighted, vbe=vbe)
    with intercept_lookups(hold):
        for step, batch in enumerate(batches):
            psw = batch.per_sample_weights
            call_kwargs = {}
            if opt == O.NONE:
                call_kwargs["total_unique_indices"] = total_unique_indices(batch, len(specs))
            out = tbe(
                batch.indices.to(NPU),
                batch.offsets.to(NPU),
                per_sample_weights=None if psw is None else psw.to(NPU),
                batch_size_per_feature_per_rank=batch.batch_size_per_feature_per_rank,
                **call_kwargs,
            )
            grad = torch.ones_like(out)
            if step == 0:
                with counters.count() as c:
                    out.backward(grad)
                assert c.syncs <= budget_of(op).sync_limit(), c.summary()
            else:
                seen["backward"] = assert_op_budget(
                    lambda: out.backward(grad),  # noqa: B023 - run at once
                    op,
                    path=path.backward,
                    units=units,
                )
    return seen["forward"], seen["backward"]


def measure_paths(opt: O, op: str, paths: list[Path]) -> dict[str | None, list[tuple[int, int]]]:
    measured: dict[str | None, list[tuple[int, int]]] = {}
    for path in paths:
        for specs in [ONE_CLASS] if path.one_class_only else [ONE_CLASS, TWO_CLASSES]:
            fwd, bwd = counted_lookup_step(opt, specs, 3, path, op, units=len(specs))
            measured.setdefault(path.forward, []).append((fwd.launches, len(specs)))
            measured.setdefault(path.backward, []).append((bwd.launches, len(specs)))
    return measured


@pytest.mark.parametrize("opt", list(OPTIMIZERS), ids=lambda o: OPTIMIZERS[o])
def test_lookup_budget_is_per_distinct_dim_and_independent_of_table_count(opt: O) -> None:
    op = lookup_op(OPTIMIZERS[opt])
    sum_path = POOLED[0]
    one = counted_lookup_step(opt, [(50, 8)], 3, sum_path, op, units=1)
    many = counted_lookup_step(opt, [(20 + t, 8) for t in range(32)], 7, sum_path, op, units=1)
    for a, b in zip(one, many, strict=True):
        assert (a.launches, a.syncs) == (b.launches, b.syncs), (a.summary(), b.summary())
    # two distinct dims; every table of one dim starts at the same residue modulo that dim (see
    # fbgemm_npu.native.fbgemm.tbe._utils: the launch count is per (dim, residue) class)
    two_dims = [(30, 8), (30, 16), (26, 8), (40, 16)]
    counted_lookup_step(opt, two_dims, 3, sum_path, op, units=2)


@pytest.mark.parametrize("opt", list(OPTIMIZERS), ids=lambda o: OPTIMIZERS[o])
def test_lookup_paths_budget(opt: O) -> None:
    """Every forward and backward path of the lookup, with one and two classes."""
    op = lookup_op(OPTIMIZERS[opt])
    paths = POOLED + (VBE if opt in VBE_OPTIMIZERS else [])
    if opt == O.EXACT_ROWWISE_ADAGRAD:
        paths.append(GLOBAL_WEIGHT_DECAY)
    assert_budget_is_the_ceiling(op, measure_paths(opt, op, paths))


def test_rowwise_adagrad_with_counter_budget() -> None:
    """Every counter / CowClip mode runs the one ``rowwise_adagrad_with_counter`` lookup."""
    op = lookup_op("rowwise_adagrad_with_counter")
    paths = [Path(case, kwargs=counter_regularization(case)) for case in COUNTER_CASES]
    assert_budget_is_the_ceiling(op, measure_paths(O.EXACT_ROWWISE_ADAGRAD, op, paths))
    one = counted_lookup_step(O.EXACT_ROWWISE_ADAGRAD, [(50, 8)], 3, paths[0], op, units=1)
    many = counted_lookup_step(
        O.EXACT_ROWWISE_ADAGRAD, [(20 + t, 8) for t in range(32)], 7, paths[0], op, units=1
    )
    for a, b in zip(one, many, strict=True):
        assert (a.launches, a.syncs) == (b.launches, b.syncs), (a.summary(), b.summary())


def assert_same_counts(
    one: tuple[counters.Counter, ...], many: tuple[counters.Counter, ...]
) -> None:
    for a, b in zip(one, many, strict=True):
        assert (a.launches, a.syncs) == (b.launches, b.syncs), (a.summary(), b.summary())


def test_none_optimizer_budget() -> None:
    """OptimType.NONE (one D: upstream refuses mixed dims): the forward, and the backward that
    returns the weights' sparse gradient instead of stepping."""
    op = lookup_op("none")
    sum_path = POOLED[0]
    one = counted_lookup_step(O.NONE, [(50, 8)], 3, sum_path, op, units=1)
    many = counted_lookup_step(O.NONE, [(20 + t, 8) for t in range(32)], 7, sum_path, op, units=1)
    assert_same_counts(one, many)
    assert_budget_is_the_ceiling(
        op, {None: [(one[0].launches, 1)], "backward": [(one[1].launches, 1)]}
    )


def rmsprop_ar_step(specs: list[tuple[int, int]], units: int) -> tuple[counters.Counter, ...]:
    """The third step of the raw ``rowwise_rmsprop_ar`` lookup (no module builds it), its layout
    registered up front, held to its budget; the first steps must not sync."""
    op = lookup_op("rowwise_rmsprop_ar")
    layout = host_layout(specs, NPU)
    g = torch.Generator().manual_seed(0)
    weights = torch.rand(layout.total_weights, generator=g).to(NPU)
    states = [torch.zeros(layout.total_rows, device=NPU) for _ in range(2)]
    counted: tuple[counters.Counter, ...] = ()
    for i, batch in enumerate(make_batches(specs, 4, 3, seed=2)):
        idx, off = batch.indices.to(NPU), batch.offsets.to(NPU)
        kwargs = rmsprop_ar_kwargs(layout, weights, states, idx, off, i + 1)
        if i < 2:
            with counters.count() as c:
                out = rmsprop_ar_lookup(**kwargs)
                out.backward(torch.ones_like(out))
            assert c.syncs <= budget_of(op).sync_limit(), c.summary()
            continue
        fwd = assert_op_budget(lambda: rmsprop_ar_lookup(**kwargs), op, units=units)  # noqa: B023
        grad = torch.ones_like(fwd.result)
        bwd = assert_op_budget(
            lambda: fwd.result.backward(grad),  # noqa: B023 - run at once
            op,
            path="backward",
            units=units,
        )
        counted = (fwd, bwd)
    return counted


def test_rowwise_rmsprop_ar_budget() -> None:
    one = rmsprop_ar_step([(40, 8)], units=1)
    many = rmsprop_ar_step([(20 + t, 8) for t in range(32)], units=1)
    assert_same_counts(one, many)
    two = rmsprop_ar_step([(40, 8), (25, 16), (30, 8)], units=2)
    measured = {
        None: [(one[0].launches, 1), (two[0].launches, 2)],
        "backward": [(one[1].launches, 1), (two[1].launches, 2)],
    }
    assert_budget_is_the_ceiling(lookup_op("rowwise_rmsprop_ar"), measured)
