"""Issue 15 item 3: every Triton kernel on the conformance specs' inputs, against the oracle.

Each conformance spec (``conformance/specs``) whose op has a Triton path (its ``REGISTRY.budgets``
entry has a non-empty ``triton`` mapping) runs through :func:`conformance.harness.run_example`
under ``fbgemm_npu.kernel_mode("triton")``: upstream's CPU kernel (or the spec's float64
reference) is the oracle, ours runs on the simulated npu in Triton's interpreter
(``TRITON_INTERPRET=1``, tests/conftest.py).  Every example must be ``result.ok``; the Triton
launches (``triton.*``, counted by :func:`fbgemm_npu.testing.counters.count` around the call,
gradients included) tell the examples the Triton path served from those its ``supported`` test
sent to the tensor program (or whose grid was empty: ``launch`` skips it); both kinds must be
ok, and each spec must have at least one example that launched a Triton kernel (drawn further,
up to ``_HUNT`` more examples, when the first ones all fell back).  Each test prints its tally.

CI size: the spec's fixed ``examples`` up to ``_SMALL`` tensor elements plus ``_DRAWN`` drawn
ones (``TRITON_CONFORMANCE_EXAMPLES``, default 6; derandomized under ``CI=true`` as
``conformance/test_conformance.py``).  The TBE training matrix (``conformance/specs/fbgemm/tbe``:
3 training steps vs upstream's CPU TBE or the float64 reference) runs its cases of the optimizers
the fused Triton backward serves.  The torchrec-sized fixed examples (tens of thousands of
indices: a minute each in the interpreter) and the whole TBE list run in the slow tests.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_training import WeightDecayMode as W
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from torch.utils._pytree import tree_leaves

import fbgemm_npu
from conformance.harness import CaseResult, OpSpec, TensorView, budget_op, budget_use, run_example
from conformance.specs import SPECS
from conformance.specs.fbgemm.tbe.cases import TbeCase
from conformance.specs.fbgemm.tbe.matrix import CI_CASES
from conformance.specs.fbgemm.tbe.training import run_case
from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.testing import counters

_CI = os.environ.get("CI", "").lower() == "true"
_DRAWN = int(os.environ.get("TRITON_CONFORMANCE_EXAMPLES", "6"))
_HUNT = 24  # more drawn examples when none of the first ones launched a Triton kernel
_SMALL = 4096  # tensor elements of a fixed example the CI run takes (more: the slow test)

TRITON_OPS = frozenset(op for op, b in REGISTRY.budgets.items() if b.triton)


def _ops_by_name(spec: OpSpec) -> set[str]:
    """Qualified names the spec's name may stand for: ``fbgemm::`` / ``mxrec::`` + its name up to
    the first ``[`` (``hstu_jagged.equal``) or up to the first ``.`` / ``[``."""
    names = {spec.name.split("[", 1)[0], re.split(r"[.\[]", spec.name, maxsplit=1)[0]}
    return {f"{ns}::{n}" for ns in ("fbgemm", "mxrec") for n in names}


def _spec_op(spec: OpSpec) -> str | None:
    """The op whose budget holds the spec's calls (read off a fixed example when the budget
    depends on the input), when it has a Triton path; else None."""
    use = spec.budget
    if not callable(use):
        op = budget_op(spec, use)
        return op if op in TRITON_OPS else None
    if spec.examples:
        op = budget_op(spec, budget_use(spec, spec.examples[0]))
        return op if op in TRITON_OPS else None
    hits = _ops_by_name(spec) & TRITON_OPS
    return min(hits) if hits else None


TRITON_SPECS = [s for s in SPECS if _spec_op(s) is not None]


def _size(inputs: Any) -> int:
    leaves = tree_leaves(inputs, is_leaf=lambda v: isinstance(v, TensorView))
    return sum(
        (v.base if isinstance(v, TensorView) else v).numel()
        for v in leaves
        if isinstance(v, TensorView) or hasattr(v, "numel")
    )


def _run(spec: OpSpec, inputs: Any, tally: Counter[str]) -> CaseResult:
    """One example under kernel_mode('triton'); the tally gets 'triton', 'fallback' or 'raises'
    (upstream raised: ours must raise too) and each Triton kernel's launches."""
    with fbgemm_npu.kernel_mode("triton"), counters.count() as c:
        result = run_example(spec, inputs, device="npu:0")
    fused = [n for n in c.launch_ops if n.startswith("triton.")]
    assert result.ok, (
        f"{spec.name}({result.inputs}) vs {result.oracle} under kernel_mode('triton') "
        f"(Triton launches: {fused or 'none'}): {result.message}"
    )
    tally["raises" if result.oracle == "raises" else "triton" if fused else "fallback"] += 1
    tally.update(fused)
    return result


def _settings(examples: int, *phases: Phase) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=_CI,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
        phases=phases or tuple(Phase),
    )


def _draw(spec: OpSpec, examples: int, tally: Counter[str], *phases: Phase) -> None:
    @_settings(examples, *phases)
    @given(data=st.data())
    def each(data: st.DataObject) -> None:
        _run(spec, data.draw(spec.inputs, label="inputs"), tally)

    each()


class _Found(Exception):
    """A drawn example launched a Triton kernel: stop drawing."""


def _one_jagged_dim(inputs: Any) -> bool:
    """No list of several offsets tensors (the jagged Triton kernels take one jagged dim) and
    not empty: the draws a hunt for the Triton path keeps."""
    values = inputs.values() if isinstance(inputs, Mapping) else inputs
    several = any(
        isinstance(v, list | tuple) and len(v) > 1 and all(hasattr(t, "numel") for t in v)
        for v in values
    )
    return not several and _size(inputs) > 0


def _hunt(spec: OpSpec, tally: Counter[str]) -> None:
    """Draw until an example launches a Triton kernel (at most ``_HUNT``, of one jagged dim; no
    shrinking)."""

    @_settings(_HUNT, Phase.generate)
    @given(data=st.data())
    def each(data: st.DataObject) -> None:
        before = tally["triton"]
        inputs = data.draw(spec.inputs, label="inputs")
        assume(_one_jagged_dim(inputs))
        _run(spec, inputs, tally)
        if tally["triton"] > before:
            raise _Found

    try:
        each()
    except _Found:
        pass


def _report(name: str, tally: Mapping[str, int]) -> str:
    kinds = ", ".join(f"{k} {tally.get(k, 0)}" for k in ("triton", "fallback", "raises"))
    kernels = ", ".join(f"{k} {v}" for k, v in sorted(tally.items()) if k.startswith("triton."))
    return f"{name}: {kinds}; launches: {kernels or '-'}"


def _small(spec: OpSpec) -> list[Any]:
    return [e for e in spec.examples if _size(e) <= _SMALL]


@pytest.mark.parametrize("spec", TRITON_SPECS, ids=lambda s: s.name)
def test_triton_conformance(spec: OpSpec) -> None:
    """The spec's small fixed examples and ``_DRAWN`` drawn ones, each equal to the oracle under
    kernel_mode('triton'); at least one served by a Triton kernel."""
    tally: Counter[str] = Counter()
    for inputs in _small(spec):
        _run(spec, inputs, tally)
    _draw(spec, _DRAWN, tally)
    if not tally["triton"]:
        _hunt(spec, tally)
    print(_report(spec.name, tally))
    assert tally["triton"], f"{spec.name}: no example launched a Triton kernel: {dict(tally)}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec", [s for s in TRITON_SPECS if len(_small(s)) < len(s.examples)], ids=lambda s: s.name
)
def test_triton_conformance_large_examples(spec: OpSpec) -> None:
    """The torchrec-sized fixed examples (over ``_SMALL`` elements: ~1 min each here)."""
    tally: Counter[str] = Counter()
    for inputs in spec.examples:
        if _size(inputs) > _SMALL:
            _run(spec, inputs, tally)
    print(_report(spec.name, tally))


@pytest.mark.slow
@pytest.mark.parametrize("spec", TRITON_SPECS, ids=lambda s: s.name)
def test_triton_conformance_more_draws(spec: OpSpec) -> None:
    """Long mode: ``4 * TRITON_CONFORMANCE_EXAMPLES`` drawn examples of every spec."""
    tally: Counter[str] = Counter()
    _draw(spec, 4 * _DRAWN, tally)
    print(_report(spec.name, tally))


def test_every_triton_op_is_covered() -> None:
    """Every op with a Triton path is reached by a spec here or by the TBE training matrix (the
    pt2 lookups), or is a backward whose forward's spec checks gradients."""
    reached = {_spec_op(s) for s in TRITON_SPECS}
    backward_of = {s_op.replace("_fwd_", "_bwd_") for s_op in reached if s_op}
    backward_of |= {f"{op}_backward" for op in reached if op} | {
        op.replace("hstu_jagged", "hstu_jagged_backward") for op in reached if op
    }
    pt2 = {op for op in TRITON_OPS if re.fullmatch(r"fbgemm::(split|dense)_.*_function(_pt2)?", op)}
    missing = TRITON_OPS - reached - backward_of - pt2
    assert not missing, f"ops with a Triton path and no spec here: {sorted(missing)}"
    assert len(TRITON_SPECS) >= 40, [s.name for s in TRITON_SPECS]


# --- the TBE training matrix -------------------------------------------------------------------

TRITON_OPTIMIZERS = {
    O.EXACT_SGD,
    O.EXACT_ADAGRAD,
    O.EXACT_ROWWISE_ADAGRAD,
    O.ADAM,
    O.PARTIAL_ROWWISE_ADAM,
    O.LAMB,
    O.PARTIAL_ROWWISE_LAMB,
    O.LARS_SGD,
}
_MATRIX = [c for c in CI_CASES if c.optimizer in TRITON_OPTIMIZERS]
# The CI subset (positions in _MATRIX): every optimizer and style, weight decay L2 / DECOUPLE,
# pooling MEAN / NONE, weighted with mixed D, fp16 / bf16 weights and outputs, int32 indices,
# bad indices, set_lr with a state_dict round trip; and cases the fused backward leaves to the
# tensor program: the counter lookup, global weight decay, VBE.
_CI_PICK = (0, 3, 5, 7, 8, 11, 15, 16, 17, 18, 19, 20, 21, 26, 28, 31, 32, 35, 36, 41, 48)
_CI_MATRIX = [_MATRIX[i] for i in _CI_PICK]


def _fused_backward(case: TbeCase) -> bool:
    """Whether the fused Triton backward serves the case (backward.triton_backward's rules):
    not VBE, not global weight decay, not the counter / cowclip lookups."""
    mode = dict(case.opt).get("weight_decay_mode")
    return not case.vbe and case.gwd_start_iter is None and mode not in (W.COUNTER, W.COWCLIP)


def _train(case: TbeCase) -> Counter[str]:
    with fbgemm_npu.kernel_mode("triton"), counters.count() as c:
        r = run_case(case)
    fused = Counter(n for n in c.launch_ops if n.startswith("triton."))
    assert r.ok, f"{case.label()} vs {r.oracle} under kernel_mode('triton'): {r.message} {fused}"
    return fused


def _check_training(case: TbeCase) -> None:
    fused = _train(case)
    print(f"{case.label()}: {dict(fused)}")
    steps = case.steps
    if case.gwd_start_iter is not None:  # global weight decay: the tensor program (index scale)
        assert fused["triton.tbe_backward_step"] <= steps, fused
        return
    assert fused["triton.tbe_forward"] == steps, fused  # one fused forward per step
    want = steps if _fused_backward(case) else 0
    assert fused["triton.tbe_backward_step"] == want, fused
    assert fused["triton.tbe_backward_keys"] == want, fused


@pytest.mark.parametrize("case", _CI_MATRIX, ids=lambda c: c.label().replace(" ", "-")[:90])
def test_triton_tbe_training(case: TbeCase) -> None:
    """3 steps under kernel_mode('triton'): outputs, weights and optimizer states equal the
    oracle's after each; the fused forward ran every step, the fused backward where it serves
    the case (else the tensor program's, still equal)."""
    _check_training(case)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [c for c in _MATRIX if c not in _CI_MATRIX], ids=lambda c: c.label().replace(" ", "-")
)
def test_triton_tbe_training_rest(case: TbeCase) -> None:
    """The rest of the matrix's cases of these optimizers."""
    _check_training(case)


def test_ci_matrix_covers_every_optimizer() -> None:
    assert {c.optimizer for c in _CI_MATRIX} == TRITON_OPTIMIZERS
    assert any(c.vbe for c in _CI_MATRIX) and any(c.gwd_start_iter is not None for c in _CI_MATRIX)
