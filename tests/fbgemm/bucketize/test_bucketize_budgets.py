"""The bucketize family's budgets (``fbgemm_npu/native/fbgemm/bucketize/budgets.py``): every path
of every op, measured exactly at two sizes, the data checks on and off, with their AI-CPU
launches (0: the budgets state it); int64 lengths for the block ops and int32 for the cyclic one
(the named paths measure the other); and the path each conformance spec picks for a drawn call,
exact on a named path, within its form's ceiling else.  Each call is measured after a warm-up
call (the first one fills the shared index caches, ``native/_index.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.harness import BudgetUse, materialize
from conformance.specs.fbgemm.bucketize import block, cyclic
from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.testing.bucketize_inputs import (
    BLOCK,
    BLOCK_2D,
    BLOCK_INFERENCE,
    CYCLIC,
    block_call,
    cyclic_call,
    path_options,
)
from fbgemm_npu.testing.budgets import assert_op_budget, budget_of, family_ops
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.op_samples_bucketize_more import BUILDERS

F = torch.ops.fbgemm
NPU = "npu"
SIZES = ((3, 4), (26, 256))  # (features, batch): the count must not depend on them
BLOCK_OPS = (BLOCK, BLOCK_INFERENCE, BLOCK_2D)
BLOCK_PATHS = [(op, path) for op in BLOCK_OPS for path in (None, *budget_of(op).paths)]
CYCLIC_PATHS = [None, *budget_of(CYCLIC).paths]


@pytest.fixture(autouse=True)
def default_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data checks at their default (``FBGEMM_NPU_VALIDATE=1``), whatever the environment
    running the suite says: the ``checks`` counts are the default's.  ``no_validation`` switches
    them off after this."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "1")


def _id(value: Any) -> str:
    return "main" if value is None else str(value).removeprefix("fbgemm::")


def _warm(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` after one uncounted call: the shared index caches hold what it needs."""
    fn()
    return fn


def test_every_op_of_the_family_has_a_budget() -> None:
    ops = family_ops("bucketize")
    # the family's smaller ops are measured by test_bucketize_more_budgets.py
    assert ops - {*BUILDERS} == {*BLOCK_OPS, CYCLIC}
    assert ops <= set(REGISTRY.budgets)


@pytest.mark.parametrize(("op", "path"), BLOCK_PATHS, ids=_id)
def test_block_kernel_budget(no_validation: None, op: str, path: str | None) -> None:
    for n_feat, batch in SIZES:
        assert_op_budget(_warm(block_call(op, path, n_feat, batch)), op, path=path, exact=True)


@pytest.mark.parametrize(("op", "path"), BLOCK_PATHS, ids=_id)
def test_block_checks_cost(op: str, path: str | None) -> None:
    """The data check (lengths >= 0 summing to indices.numel(), VBE sizes likewise,
    total_num_blocks multiples of my_size): one _assert_async after its reductions."""
    for n_feat, batch in SIZES:
        assert_op_budget(_warm(block_call(op, path, n_feat, batch)), op, path=path, exact=True)


@pytest.mark.parametrize("path", CYCLIC_PATHS, ids=_id)
@pytest.mark.parametrize("validate", ["0", "1"])
def test_cyclic_budget(monkeypatch: pytest.MonkeyPatch, validate: str, path: str | None) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", validate)
    for n_feat, batch in SIZES:
        assert_op_budget(_warm(cyclic_call(path, n_feat, batch)), CYCLIC, path=path, exact=True)


@pytest.mark.parametrize("op", BLOCK_OPS, ids=_id)
def test_keep_orig_idx_is_free_with_uniform_blocks(no_validation: None, op: str) -> None:
    for n_feat, batch in SIZES:
        call = block_call(op, None, n_feat, batch, keep_orig_idx=True)
        assert_op_budget(_warm(call), op, exact=True)


def test_bucket_mapping_is_free_with_int64_indices(no_validation: None) -> None:
    """The mapping is the bucket tensor itself: the sequence path's count."""
    for n_feat, batch in SIZES:
        call = block_call(BLOCK_INFERENCE, "sequence", n_feat, batch, return_bucket_mapping=True)
        assert_op_budget(_warm(call), BLOCK_INFERENCE, path="sequence", exact=True)


@pytest.mark.parametrize(("op", "path"), BLOCK_PATHS, ids=_id)
def test_block_int64_lengths_stay_off_the_ai_cpu(
    no_validation: None, op: str, path: str | None
) -> None:
    """int64 lengths (and VBE batch sizes): the same program, the counts widened once (one
    launch more on a named path, the ceilings measure them already), AI CPU 0 (budgets.py)."""
    for n_feat, batch in SIZES:
        call = _warm(block_call(op, path, n_feat, batch, lengths_dtype=torch.int64))
        with count() as c:
            call()
        extra = 0 if path_options(path)[1] else 1
        assert c.launches == budget_of(op).launch_limit(False, path=path) + extra, c.summary()
        assert c.ai_cpu == 0 == budget_of(op).ai_cpu_limit(path), c.summary()
        assert c.stalls == 0, c.summary()


@pytest.mark.parametrize("path", CYCLIC_PATHS, ids=_id)
def test_cyclic_int32_stays_off_the_ai_cpu(no_validation: None, path: str | None) -> None:
    """int32 lengths and indices: the counts need no widening (one launch less, the ceiling
    too), AI CPU 0."""
    for n_feat, batch in SIZES:
        call = _warm(cyclic_call(path, n_feat, batch, dtype=torch.int32))
        with count() as c:
            call()
        extra = -1
        assert c.launches == budget_of(CYCLIC).launch_limit(False, path=path) + extra, c.summary()
        assert c.ai_cpu == 0 == budget_of(CYCLIC).ai_cpu_limit(path), c.summary()
        assert c.stalls == 0, c.summary()


SPECS = {s.name: s for s in (*block.SPECS, *cyclic.SPECS)}


@settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), name=st.sampled_from(sorted(SPECS)))
def test_spec_budget_paths(data: st.DataObject, name: str) -> None:
    """The path a spec picks for a drawn call: exact where it names the call's options, a
    ceiling (within it) where no measured path does."""
    spec = SPECS[name]
    inputs = data.draw(spec.inputs)
    try:
        getattr(F, name)(**{k: _contig(v) for k, v in materialize(inputs, "cpu").items()})
    except (RuntimeError, TypeError):
        return  # an input upstream rejects: no budget
    use = spec.budget(**inputs)
    assert isinstance(use, BudgetUse) and use.op is not None
    dev = materialize(inputs, NPU)
    ceiling = path_options(use.path)[1]
    call = _warm(lambda: getattr(F, name)(**dev))
    assert_op_budget(call, use.op, path=use.path, exact=not ceiling)


def _contig(v: Any) -> Any:
    if isinstance(v, list):
        return [t.contiguous() for t in v]
    return v.contiguous() if isinstance(v, torch.Tensor) else v
