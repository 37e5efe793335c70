"""The harness itself: it must catch every kind of mismatch it claims to catch.

Ours and upstream are the same callable here; a test op misbehaves only when the counter's
dispatch mode is active (i.e. on "our" side) or only on the npu device, so a wrong result is
reproducible without a wrong kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import strategies as st
from torch.utils._python_dispatch import _get_current_dispatch_mode

from conformance.harness import (
    BudgetUse,
    Compare,
    Mismatch,
    OpSpec,
    TensorView,
    Tol,
    compare_outputs,
    materialize,
    run_example,
)
from fbgemm_npu.native.family import Budget

F32 = {torch.float32: Tol(rtol=1e-6, atol=1e-6)}


def _ours() -> bool:
    """True while the harness counts our call."""
    return _get_current_dispatch_mode() is not None


def _spec(op: Callable, *, budget: Budget | None = None, **kw: object) -> OpSpec:
    use = BudgetUse(budget=budget or Budget(launches=10))
    return OpSpec(name="t", op=op, inputs=st.nothing(), compare=Compare(F32), budget=use, **kw)


def _run(spec: OpSpec, **inputs: object) -> object:
    return run_example(spec, inputs, device="cpu")


def test_match_records_counts() -> None:
    r = _run(_spec(lambda x: (x + 1, x.sum())), x=torch.arange(4.0))
    assert (r.ok, r.oracle, r.launches, r.syncs, r.max_abs) == (True, "upstream", 2, 0, 0.0)


def test_integer_mismatch_is_exact() -> None:
    r = _run(_spec(lambda x: x + (1 if _ours() else 0)), x=torch.arange(4))
    assert not r.ok and "at [0]: ours 1, expected 0; 4 of 4 elements differ" in r.message


def test_float_tolerance() -> None:
    x = torch.ones(3)
    assert _run(_spec(lambda x: x + (1e-7 if _ours() else 0)), x=x).ok
    r = _run(_spec(lambda x: x + (1e-3 if _ours() else 0)), x=x)
    assert not r.ok and "atol 1e-06 + rtol 1e-06" in r.message


@pytest.mark.parametrize(
    "wrong, text",
    [
        (lambda x: x.double(), "dtype torch.float64, expected torch.float32"),
        (lambda x: x[:2], "shape (2,), expected (3,)"),
        (lambda x: (x, x), "output structure differs"),
    ],
)
def test_meta_mismatches(wrong: Callable, text: str) -> None:
    r = _run(_spec(lambda x: wrong(x) if _ours() else x), x=torch.ones(3))
    assert not r.ok and text in r.message, r.message


def test_float_dtype_without_tolerance_fails() -> None:
    r = _run(_spec(lambda x: x.half()), x=torch.ones(3))
    assert not r.ok and "states no tolerance for torch.float16" in r.message


def test_raise_parity() -> None:
    def op(x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 1:
            if _ours():
                raise ValueError("ours: x must be 1-D")
            raise RuntimeError("upstream: bad rank")
        return x

    assert _run(_spec(op), x=torch.ones(2, 2)).oracle == "raises"
    assert _run(_spec(op), x=torch.ones(2, 2)).ok  # ValueError for RuntimeError is allowed
    r = _run(_spec(lambda x: x if _ours() else x[5]), x=torch.ones(2))
    assert not r.ok and "upstream raised (IndexError" in r.message
    r = _run(_spec(lambda x: x[5] if _ours() else x), x=torch.ones(2))
    assert not r.ok and r.message.startswith("ours raised IndexError")


def test_budget() -> None:
    r = _run(_spec(lambda x: (x + 1).sum().item(), budget=Budget(launches=1)), x=torch.ones(2))
    assert r.ok and r.over_budget
    assert "2 launches (budget 1), 1 syncs (budget 0)" in r.message
    assert "aten.add.Tensor, aten.sum.default" in r.message


def test_ai_cpu_budget_and_columns() -> None:
    # an int64 cumsum runs on a 910B's AI CPU
    x = torch.arange(3)
    r = _run(_spec(lambda x: x.cumsum(0), budget=Budget(launches=5, ai_cpu=0)), x=x)
    assert r.ok and r.over_budget and r.ai_cpu == 1
    assert "1 AI-CPU launches (budget 0)" in r.message
    r = _run(_spec(lambda x: x.cumsum(0), budget=Budget(launches=5, ai_cpu=1)), x=x)
    assert r.ok and not r.over_budget


def test_reference_oracle_and_scale() -> None:
    # Upstream is "wrong" (returns zeros); the float64 reference is the oracle for values, while
    # upstream still fixes shape and dtype.
    spec = _spec(
        lambda x: x * 3 if _ours() else torch.zeros_like(x),
        reference=lambda x: x.double() * 3,
        use_reference=lambda x: x.dtype == torch.float32,
    )
    r = _run(spec, x=torch.arange(3.0))
    assert r.ok and r.oracle == "reference", r.message
    spec.compare = Compare(F32, scale=lambda x: torch.full(x.shape, 1e9, dtype=torch.float64))
    spec.reference = lambda x: x.double() * 3 + 100  # within 1e-6 * 1e9: the scale is used
    assert _run(spec, x=torch.arange(3.0)).ok


def test_compare_outputs_scalars_and_nan() -> None:
    spec = _spec(lambda: None)
    nan = torch.tensor([float("nan"), float("inf"), 1.0])
    assert compare_outputs((nan, 3), (nan.clone(), 3), spec) == (0.0, 0.0)
    with pytest.raises(Mismatch, match="ours 4, expected 3"):
        compare_outputs((nan, 4), (nan, 3), spec)
    for ours, expected in [(-math.inf, math.inf), (1.0, math.inf), (math.nan, 1.0)]:
        with pytest.raises(Mismatch):
            compare_outputs(torch.tensor([ours]), torch.tensor([expected]), spec)


def test_views_stay_views_on_the_device() -> None:
    v = TensorView(torch.arange(12).reshape(3, 4), lambda t: t.t()[:, ::2], "t sliced")
    ours = materialize({"x": v}, "npu:0")["x"]
    assert ours.device.type == "npu" and not ours.is_contiguous() and ours.stride() == (1, 8)
    assert torch.equal(ours.cpu(), materialize({"x": v}, "cpu")["x"])


def test_backward_mismatch_is_caught() -> None:
    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
            return g * 3

    def op(x: torch.Tensor) -> torch.Tensor:
        return WrongGrad.apply(x) if x.device.type == "npu" else x * 2

    spec = _spec(op, backward=True, grad_inputs=("x",))
    r = run_example(spec, {"x": torch.arange(3.0)}, device="npu:0")
    assert not r.ok and r.message.startswith("backward: "), r.message
    spec.op = lambda x: x * 2
    assert run_example(spec, {"x": torch.arange(3.0)}, device="npu:0").ok


def test_fallback_is_not_a_kernel_of_ours() -> None:
    # fbgemm::asynchronous_complete_cumsum has our kernel; an op with no PrivateUse1 kernel at
    # all would silently run upstream's CPU kernel through the simulator's fallback.
    lib = torch.library.Library("fbgemm_npu_test_harness", "FRAGMENT")  # noqa: TOR901
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    op = torch.ops.fbgemm_npu_test_harness.twice
    r = run_example(_spec(lambda x: op(x)), {"x": torch.ones(2)}, device="npu:0")
    assert not r.ok and "no kernel of ours ran" in r.message or "raised" in r.message


def test_integer_reference_values_compare_exactly_beyond_float64_precision() -> None:
    spec = OpSpec(
        name="int_ref",
        op=lambda x: x,
        inputs=st.just({"x": torch.zeros(1)}),
        compare=Compare(),
        budget=BudgetUse(budget=Budget(launches=1)),
    )
    with pytest.raises(Mismatch):
        compare_outputs(torch.tensor([2**60]), torch.tensor([2**60 + 1]), spec, check="values")
