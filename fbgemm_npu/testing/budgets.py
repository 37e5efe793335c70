"""Hold a call to its op's budget as written in the family's ``budgets.py`` (the one place).

``assert_op_budget(fn, "fbgemm::dense_to_jagged")`` runs ``fn`` under the counters and fails,
listing every op, when it launches more than the budget allows (the data checks' launches
included when ``FBGEMM_NPU_VALIDATE`` is on) or syncs more.  ``exact=True`` also fails when it
launches fewer: the budget is then the measured count of that path, so a table that has grown
stale shows up as well.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.native.family import Budget
from fbgemm_npu.testing.counters import Counter, assert_budget

__all__ = [
    "assert_every_path_measured",
    "assert_triton_budget",
    "drain_checks",
    "assert_op_budget",
    "budget_of",
    "family_ops",
]


def budget_of(qualname: str) -> Budget:
    """The registered budget of ``qualname`` (``"fbgemm::jagged_to_padded_dense"``)."""
    from fbgemm_npu._registry import REGISTRY

    entry = REGISTRY.budgets.get(qualname)
    if entry is None:
        raise LookupError(f"{qualname} has no entry in its family's BUDGETS table")
    return entry


def assert_op_budget(
    fn: Callable[[], Any],
    qualname: str,
    *,
    path: str | None = None,
    units: int = 1,
    sized: bool = True,
    exact: bool = False,
) -> Counter:
    """Run ``fn`` and hold it to ``qualname``'s budget (``path``, ``units``, ``sized`` as in
    :meth:`Budget.launch_limit` / :meth:`Budget.sync_limit`); returns the counter."""
    entry = budget_of(qualname)
    drain_checks()  # deferred checks of earlier calls: their chunking is not this call's cost
    launches = entry.launch_limit(validation_enabled(), units, path)
    syncs = entry.sync_limit(sized)
    c = assert_budget(fn, launches=launches, syncs=syncs, stalls_are_syncs=True)
    _report(qualname, path, c)
    ai_cpu = entry.ai_cpu_limit(path)
    if ai_cpu is not None and c.ai_cpu > ai_cpu:
        raise AssertionError(
            f"{qualname}{'' if path is None else f' [{path}]'}: {c.ai_cpu} launches a 910B runs on "
            f"its AI CPU, the budget allows {ai_cpu}: "
            f"{', '.join(n for r in c.calls[:1] for n in r.ai_cpu) or '-'}\n{c.summary()}"
        )
    if exact and (c.launches, c.syncs + c.stalls) != (launches, syncs):
        raise AssertionError(
            f"{qualname}{'' if path is None else f' [{path}]'}: measured {c.launches} launches and "
            f"{c.syncs} syncs + {c.stalls} stalls, the budget says exactly {launches} and {syncs}: "
            "update budgets.py "
            f"(never loosen it silently)\n{c.summary()}"
        )
    return c


def assert_triton_budget(fn: Callable[[], Any], qualname: str, label: str = "call") -> Counter:
    """Run ``fn`` with the kernel mode ``triton`` and hold it exactly to ``qualname``'s Triton
    budget ``label`` (``Budget.triton``): launches (at least one a Triton kernel), no syncs, no
    stalls, no AI-CPU launch; returns the counter."""
    from fbgemm_npu.native._triton import kernel_mode

    entry = budget_of(qualname)
    drain_checks()
    launches = entry.triton_limit(validation_enabled(), label)
    with kernel_mode("triton"):
        c = assert_budget(fn, launches=launches, syncs=0, stalls_are_syncs=True)
    _report(qualname, f"triton:{label}", c)
    fused = [n for n in c.launch_ops if n.startswith("triton.")]
    if not fused or c.launches != launches or c.ai_cpu:
        raise AssertionError(
            f"{qualname} [triton:{label}]: measured {c.launches} launches ({len(fused)} Triton, "
            f"{c.ai_cpu} AI CPU), the budget says exactly {launches} with >= 1 Triton and 0 AI "
            f"CPU: update budgets.py (never loosen it silently)\n{c.summary()}"
        )
    return c


def drain_checks() -> None:
    """Read (and forget) the data checks queued so far: a counted call then starts with an
    empty queue, whatever ran before it (``fbgemm_npu/native/_pending.py``)."""
    from fbgemm_npu.native._pending import check

    try:
        check()
    except RuntimeError:
        pass


def _report(qualname: str, path: str | None, c: Counter) -> None:
    """Append ``qualname path ai_cpu stalls`` to ``$FBGEMM_NPU_BUDGET_REPORT`` when it is set:
    a census of what the budget tests measure, for re-measuring the tables."""
    target = os.environ.get("FBGEMM_NPU_BUDGET_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.write(f"{qualname}\t{path}\t{c.launches}\t{c.ai_cpu}\t{c.stalls}\n")


def family_ops(family: str) -> set[str]:
    """The qualified names of the ops registered by the family package named ``family``
    (its last part: ``"jagged"``, ``"tbe"``...)."""
    from fbgemm_npu._registry import REGISTRY

    return {q for q, package in REGISTRY.families.items() if package.endswith(f".{family}")}


def assert_every_path_measured(family: str, measured: Iterable[tuple[str, str | None]]) -> None:
    """``measured`` ``(qualname, path)`` pairs cover every op of ``family`` and, per op, its main
    path (``None``) and every named path of its budget: no budget entry goes unmeasured."""
    pairs = set(measured)
    ops = family_ops(family)
    assert {op for op, _ in pairs} == ops, sorted(ops ^ {op for op, _ in pairs})
    for op in ops:
        paths = {path for q, path in pairs if q == op}
        assert paths == {None, *budget_of(op).paths}, (op, sorted(map(str, paths)))
