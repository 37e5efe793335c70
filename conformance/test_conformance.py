"""One hypothesis test per spec: ours on npu matches upstream on CPU, within the op's budget.

Examples per spec: ``CONFORMANCE_EXAMPLES`` (default 25).  With ``CI=true`` the examples are
derandomized (the same inputs every run) and hypothesis keeps no example database.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.harness import OpSpec, run_example
from conformance.specs import SPECS

_CI = os.environ.get("CI", "").lower() == "true"
SETTINGS = settings(
    max_examples=int(os.environ.get("CONFORMANCE_EXAMPLES", "25")),
    deadline=None,
    derandomize=_CI,
    database=None if _CI else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@SETTINGS
@given(data=st.data())
def test_conformance(spec: OpSpec, data: st.DataObject) -> None:
    inputs = data.draw(spec.inputs, label="inputs")
    result = run_example(spec, inputs, device="npu:0")
    assert result.ok, f"{spec.name}({result.inputs}) vs {result.oracle}: {result.message}"
    assert not result.over_budget, f"{spec.name}({result.inputs}): {result.message}"


@pytest.mark.parametrize(
    "spec, index",
    [(s, i) for s in SPECS for i in range(len(s.examples))],
    ids=lambda v: v.name if isinstance(v, OpSpec) else f"example{v}",
)
def test_conformance_examples(spec: OpSpec, index: int) -> None:
    result = run_example(spec, spec.examples[index], device="npu:0")
    assert result.ok, f"{spec.name}({result.inputs}) vs {result.oracle}: {result.message}"
    assert not result.over_budget, f"{spec.name}({result.inputs}): {result.message}"


def test_every_spec_has_a_budget_and_tolerances() -> None:
    for spec in SPECS:
        assert spec.budget is not None, spec.name
        assert spec.compare.tolerances or spec.reference is None, spec.name
