"""Run one conformance example: upstream fbgemm on CPU is the oracle, fbgemm_npu on npu the subject.

An :class:`~conformance.spec.OpSpec` (``conformance/spec.py``; its names are re-exported here)
says how to call an op, which inputs are valid, how to compare and which budget holds a call.
:func:`run_example` runs one drawn input on both sides and returns a :class:`CaseResult`; it never
compares ours against our own implementation (docs/design.md rule 4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from conformance.spec import BudgetUse, CaseResult, Compare, OpSpec, TensorView, Tol
from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.native._index import warm_caches
from fbgemm_npu.native._pending import check as read_checks
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.budgets import drain_checks

__all__ = [
    "USER_ERRORS",
    "BudgetUse",
    "CaseResult",
    "Compare",
    "Mismatch",
    "OpSpec",
    "TensorView",
    "Tol",
    "compare_outputs",
    "describe",
    "materialize",
    "run_example",
]

# If upstream raises one of these for an input, ours may raise any of them: docs/design.md rule 9
# asks for a ValueError naming op and argument where upstream's C++ check raises a RuntimeError.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, RuntimeError, TypeError, IndexError)


def describe(inputs: Any) -> str:
    """``t_in=int32(3, 4) non-contiguous`` style text for reports."""

    def one(v: Any) -> str:
        if isinstance(v, TensorView):
            return f"{one(v.view(v.base))} {v.label}"
        if isinstance(v, torch.Tensor):
            return f"{str(v.dtype).removeprefix('torch.')}{tuple(v.shape)}"
        return repr(v)

    if isinstance(inputs, Mapping):
        return ", ".join(f"{k}={one(v)}" for k, v in inputs.items())
    return ", ".join(one(v) for v in inputs)


def materialize(inputs: Any, device: str | torch.device) -> Any:
    """A fresh copy of ``inputs`` with every tensor (and :class:`TensorView`) on ``device``."""

    def move(v: Any) -> Any:
        if isinstance(v, TensorView):
            return v.view(v.base.clone().to(device))
        if isinstance(v, torch.Tensor):
            return v.clone().to(device)
        return v

    return tree_map(move, inputs, is_leaf=lambda v: isinstance(v, TensorView))


def _call(fn: Callable[..., Any], inputs: Any) -> Any:
    return fn(**inputs) if isinstance(inputs, Mapping) else fn(*inputs)


def _counted_device_type(device: str | torch.device) -> str:
    dev = torch.device(device).type
    return "cpu" if dev == "cpu" else "privateuseone"


class Mismatch(AssertionError):
    """Ours differs from the oracle; the message says where."""


def compare_outputs(
    actual: Any,
    expected: Any,
    spec: OpSpec,
    scale: Any = None,
    slack: Any = None,
    *,
    check: str = "all",
) -> tuple[float, float]:
    """Raise :class:`Mismatch` unless ``actual`` matches; return (max abs err, max rel err).

    ``actual`` is on the CPU already.  ``check``: ``"all"``; ``"meta"`` (structure, shapes and
    dtypes, no values: used against upstream when a reference gives the values); ``"values"``
    (structure, shapes and values, compared in float64: ``expected`` is a float64 reference).
    """
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        raise Mismatch(f"output structure differs: ours {a_spec}, expected {e_spec}")
    s_leaves = tree_flatten(scale)[0] if scale is not None else [None] * len(e_leaves)
    k_leaves = tree_flatten(slack)[0] if slack is not None else [None] * len(e_leaves)
    max_abs = max_rel = 0.0
    for i, (a, e, s, k) in enumerate(zip(a_leaves, e_leaves, s_leaves, k_leaves, strict=True)):
        where = f"output {i}" if len(a_leaves) > 1 else "output"
        if not isinstance(e, torch.Tensor):
            if check != "meta" and a != e:
                raise Mismatch(f"{where}: ours {a!r}, expected {e!r}")
            continue
        if not isinstance(a, torch.Tensor):
            raise Mismatch(f"{where}: ours is {type(a).__name__}, expected a tensor")
        if a.shape != e.shape:
            raise Mismatch(f"{where}: shape {tuple(a.shape)}, expected {tuple(e.shape)}")
        if check != "values" and a.dtype != e.dtype:
            raise Mismatch(f"{where}: dtype {a.dtype}, expected {e.dtype}")
        if check == "meta":
            continue
        if not (a.is_floating_point() or a.is_complex()):
            if check == "all":
                a_cmp, e_cmp = a, e
            elif not (e.is_floating_point() or e.is_complex()):
                # integer reference: compare exactly (float64 loses integers above 2**53)
                a_cmp, e_cmp = a.to(torch.int64), e.to(torch.int64)
            else:
                a_cmp, e_cmp = a.double(), e.double()
            if not torch.equal(a_cmp, e_cmp):
                bad = tuple((a_cmp != e_cmp).nonzero()[0].tolist())
                raise Mismatch(
                    f"{where} at {list(bad)}: ours {a[bad].item()}, expected {e[bad].item()}; "
                    f"{int((a_cmp != e_cmp).sum())} of {a.numel()} elements differ"
                )
            continue
        tol = spec.compare.tolerances.get(a.dtype)
        if tol is None:
            raise Mismatch(f"{where}: spec {spec.name} states no tolerance for {a.dtype}")
        err_abs, err_rel = _check_close(where, a, e, s, k, tol)
        max_abs, max_rel = max(max_abs, err_abs), max(max_rel, err_rel)
    return max_abs, max_rel


def _check_close(
    where: str,
    a: torch.Tensor,
    e: torch.Tensor,
    s: torch.Tensor | None,
    k: torch.Tensor | None,
    tol: Tol,
) -> tuple[float, float]:
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    if a64.numel() == 0:
        return 0.0, 0.0
    same_special = (a64 == e64) | (a64.isnan() & e64.isnan())  # inf == inf, nan "==" nan
    diff = torch.where(same_special, torch.zeros_like(a64), (a64 - e64).abs())
    scale = e64.abs() if s is None else s.to(torch.float64).abs()
    # Non-finite values must match exactly: an inf scale would otherwise accept anything.
    nonfinite = ~a64.isfinite() | ~e64.isfinite()
    bound = tol.atol + tol.rtol * scale
    if k is not None:
        bound = bound + k.to(torch.float64).abs()
    bad = ~same_special & (nonfinite | ~(diff <= bound))
    rel = torch.where(scale > 0, diff / scale, torch.where(diff > 0, math.inf, 0.0))
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise Mismatch(
            f"{where} at {list(i)}: ours {a64[i].item()!r}, expected {e64[i].item()!r} "
            f"(|diff| {diff[i].item():.3g} > atol {tol.atol:g} + rtol {tol.rtol:g} x "
            f"scale {scale[i].item():.3g}{_slack_text(k, i)}); "
            f"{int(bad.sum())} of {bad.numel()} elements off"
        )
    return diff.max().item(), rel.max().item()


def _slack_text(k: torch.Tensor | None, i: tuple[int, ...]) -> str:
    return "" if k is None else f" + slack {k[i].abs().item():.3g}"


def budget_use(spec: OpSpec, inputs: Any) -> BudgetUse:
    """The :class:`BudgetUse` of this call (the spec's, or its callable's for these inputs)."""
    use = spec.budget
    return use if isinstance(use, BudgetUse) else _call(use, inputs)


def budget_op(spec: OpSpec, use: BudgetUse) -> str:
    """The qualified name whose budget holds the call."""
    return use.op or "fbgemm::" + re.split(r"[.\[]", spec.name, maxsplit=1)[0]


def _limits(spec: OpSpec, inputs: Any) -> tuple[int, int, int | None]:
    """The (launches, syncs, AI-CPU launches) this call may take, read from the op's ``BUDGETS``
    entry (AI CPU ``None``: the entry does not state it)."""
    use = budget_use(spec, inputs)
    entry = use.budget if use.budget is not None else REGISTRY.budgets.get(budget_op(spec, use))
    if entry is None:
        raise LookupError(
            f"conformance: {budget_op(spec, use)} has no entry in its family's BUDGETS table"
        )
    return (
        entry.launch_limit(validation_enabled(), use.units, use.path),
        entry.sync_limit(use.sized),
        entry.ai_cpu_limit(use.path),
    )


def run_example(spec: OpSpec, inputs: Any, device: str | torch.device = "npu:0") -> CaseResult:
    """Run upstream on CPU and ours on ``device``; compare; count our call (the shared index
    caches warm: ``fbgemm_npu.native._index.warm_caches``)."""
    result = CaseResult(spec=spec.name, inputs=describe(inputs), oracle="upstream")
    try:
        expected = _call(spec.op, materialize(inputs, "cpu"))
        upstream_error: BaseException | None = None
    except Exception as exc:  # noqa: BLE001 - any upstream error is the expected behaviour
        upstream_error = exc
    ours_in = materialize(inputs, device)
    warm_caches(device)
    drain_checks()
    ours_error: BaseException | None = None
    with counters.count(_counted_device_type(device)) as count:
        try:
            actual = _call(spec.op, ours_in)
        except Exception as exc:  # noqa: BLE001 - compared with upstream's below
            ours_error = exc
    if ours_error is None:
        try:  # where a caller reads the result: the call's deferred data checks (not counted)
            read_checks()
        except RuntimeError as exc:
            ours_error = exc
    result.launches, result.syncs = count.launches, count.syncs
    result.ai_cpu, result.stalls = count.ai_cpu, count.stalls
    result.unsupported = count.unsupported
    try:
        if upstream_error is not None:
            result.oracle = "raises"
            _check_raised(upstream_error, ours_error)
        else:
            if ours_error is not None:
                raise Mismatch(f"ours raised {type(ours_error).__name__}: {ours_error}")
            _check_ours_ran_on_device(count, actual, device)
            actual_cpu = tree_map(lambda v: v.cpu() if isinstance(v, torch.Tensor) else v, actual)
            _compare(spec, inputs, actual_cpu, expected, result)
    except Mismatch as exc:
        result.ok, result.message = False, str(exc)
    launch_limit, sync_limit, ai_cpu_limit = _limits(spec, inputs)
    over = result.launches > launch_limit or result.syncs > sync_limit
    over |= ai_cpu_limit is not None and result.ai_cpu > ai_cpu_limit
    if upstream_error is None and over:  # error paths have no budget
        result.over_budget = True
        result.message = result.message or (
            f"over budget: {result.launches} launches (budget {launch_limit}), {result.syncs} "
            f"syncs (budget {sync_limit}), {result.ai_cpu} AI-CPU launches (budget "
            f"{ai_cpu_limit}): {', '.join(count.launch_ops + count.sync_ops)}"
        )
    if spec.backward and result.ok and upstream_error is None:
        try:
            _check_backward(spec, inputs, device, result)
        except Mismatch as exc:
            result.ok, result.message = False, f"backward: {exc}"
    return result


def _compare(spec: OpSpec, inputs: Any, actual: Any, expected: Any, result: CaseResult) -> None:
    cpu_in = materialize(inputs, "cpu")
    use_ref = spec.reference is not None and (
        spec.use_reference is None or _call(spec.use_reference, cpu_in)
    )
    scale = _call(spec.compare.scale, cpu_in) if spec.compare.scale is not None else None
    slack = _call(spec.compare.slack, cpu_in) if spec.compare.slack is not None else None
    if use_ref:
        assert spec.reference is not None
        result.oracle = "reference"
        # Structure, shapes and dtypes still come from upstream; values from the reference.
        compare_outputs(actual, expected, spec, check="meta")
        reference = _call(spec.reference, cpu_in)
        result.max_abs, result.max_rel = compare_outputs(
            actual, reference, spec, scale, slack, check="values"
        )
    else:
        result.max_abs, result.max_rel = compare_outputs(actual, expected, spec, scale, slack)


def _check_raised(upstream: BaseException, ours: BaseException | None) -> None:
    up = f"{type(upstream).__name__}: {str(upstream).splitlines()[0] if str(upstream) else ''}"
    if ours is None:
        raise Mismatch(f"upstream raised ({up}) but ours returned")
    if isinstance(ours, type(upstream)):
        return
    if isinstance(upstream, USER_ERRORS) and isinstance(ours, USER_ERRORS):
        return
    raise Mismatch(f"upstream raised {up}; ours raised {type(ours).__name__}: {ours}")


def _check_ours_ran_on_device(count: counters.Counter, actual: Any, device: Any) -> None:
    if count.missing_kernels:
        raise Mismatch(
            f"no kernel of ours ran: {', '.join(count.missing_kernels)}; the backend fallback "
            "would run upstream's CPU kernel, so nothing would be tested"
        )
    want = torch.device(device).type
    for v in tree_flatten(actual)[0]:
        if isinstance(v, torch.Tensor) and v.device.type != want:
            raise Mismatch(f"an output of ours is on {v.device}, expected {want}")


def _grad_leaves(spec: OpSpec, inputs: Any, dtype: torch.dtype | None) -> list[torch.Tensor]:
    """Make the ``grad_inputs`` of (materialized) ``inputs`` require grad; return them in order."""
    leaves = []
    for key in spec.grad_inputs:
        t = inputs[key]
        if dtype is not None:  # the float64 reference differentiates float64 leaves
            t = t.detach().to(dtype)
            inputs[key] = t
        leaves.append(t.requires_grad_())
    return leaves


def _grads(
    spec: OpSpec,
    inputs: Any,
    dtype: torch.dtype | None,
    fn: Callable[..., Any],
    grad_out: list[torch.Tensor],
    device: Any,
) -> list[torch.Tensor | None]:
    inputs = dict(inputs) if isinstance(inputs, Mapping) else list(inputs)
    leaves = _grad_leaves(spec, inputs, dtype)
    outs = [
        o
        for o in tree_flatten(_call(fn, inputs))[0]
        if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    if len(outs) != len(grad_out):
        raise Mismatch(f"{len(outs)} differentiable outputs, expected {len(grad_out)}")
    gos = [g.to(device=o.device, dtype=o.dtype) for g, o in zip(grad_out, outs, strict=True)]
    grads = torch.autograd.grad(outs, leaves, gos, allow_unused=True)
    return [None if g is None else g.detach().cpu() for g in grads]


def _check_backward(spec: OpSpec, inputs: Any, device: Any, result: CaseResult) -> None:
    """Same random grad_output on both sides; compare the gradients of ``grad_inputs``."""
    cpu_in = materialize(inputs, "cpu")
    probe = [
        o
        for o in tree_flatten(_call(spec.op, _with_grad(spec, cpu_in)))[0]
        if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    gen = torch.Generator().manual_seed(0)
    grad_out = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in probe]
    ours = _grads(spec, materialize(inputs, device), None, spec.op, grad_out, device)
    if result.oracle == "reference":
        assert spec.reference is not None
        expected = _grads(spec, cpu_in, torch.float64, spec.reference, grad_out, "cpu")
        check = "values"
    else:
        expected = _grads(spec, cpu_in, None, spec.op, grad_out, "cpu")
        check = "all"
    for i, (a, e) in enumerate(zip(ours, expected, strict=True)):
        if (a is None) != (e is None):
            raise Mismatch(f"grad of {spec.grad_inputs[i]!r}: ours {a}, expected {e}")
        if a is not None:
            compare_outputs(a, e, spec, check=check)


def _with_grad(spec: OpSpec, inputs: Any) -> Any:
    inputs = dict(inputs) if isinstance(inputs, Mapping) else list(inputs)
    _grad_leaves(spec, inputs, None)
    return inputs
