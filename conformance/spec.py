"""What a conformance spec is made of: :class:`OpSpec` and the pieces it holds.

An :class:`OpSpec` says how to call an op, which inputs are valid (a hypothesis strategy), how to
compare (exact for integer / bool outputs, per-dtype tolerances for floats), when a float64
reference replaces upstream as the oracle, and which entry of the op's ``BUDGETS`` (its family's
``budgets.py``, the one place a budget is written) a call is held to.  :mod:`conformance.harness`
runs them (and re-exports these names).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.native.family import Budget

__all__ = ["BudgetUse", "CaseResult", "Compare", "OpSpec", "TensorView", "Tol"]


@dataclass(frozen=True)
class Tol:
    """``|ours - expected| <= atol + rtol * scale (+ slack)``; scale = ``|expected|`` unless the
    spec gives one, slack = 0 unless the spec gives one (see :class:`Compare`)."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class BudgetUse:
    """Which budget of the op's family ``BUDGETS`` table one call is held to.

    ``op``: the qualified op name (default ``fbgemm::<spec name up to the first '.' or '['>``);
    ``path``: a named argument path of that budget (``None``: the main path); ``units``: jagged
    dims, distinct D or inputs where the budget is per unit; ``sized``: every optional output size
    argument given (else the budget's ``syncs_unsized`` applies).  The data-check launches are
    added when ``FBGEMM_NPU_VALIDATE`` is on.  ``budget``: an explicit budget, only for the
    made-up ops of the harness's own tests (``conformance/test_harness.py``); a spec of a real op
    never writes numbers (``tests/core/test_families.py`` checks).
    """

    op: str | None = None
    path: str | None = None
    units: int = 1
    sized: bool = True
    budget: Budget | None = None


@dataclass(frozen=True)
class Compare:
    """How outputs are compared.  Integer and bool outputs are always compared exactly.

    ``tolerances``: float dtype -> :class:`Tol` (a float output whose dtype is missing fails).
    ``scale``: optional ``scale(**inputs) -> outputs-shaped magnitudes`` replacing ``|expected|``
    as what ``rtol`` is relative to (e.g. a running sum of ``|x|`` for a cumsum, whose partial sums
    can cancel to near zero while the rounding error grows with the terms summed).
    ``slack``: optional ``slack(**inputs) -> outputs-shaped absolute allowances`` (or ``None``)
    added to the bound: e.g. upstream's own measured distance from the exact result, so that a
    kernel more precise than upstream is not failed for upstream's rounding error.
    """

    tolerances: Mapping[torch.dtype, Tol] = field(default_factory=dict)
    scale: Callable[..., Any] | None = None
    slack: Callable[..., Any] | None = None


@dataclass(frozen=True)
class TensorView:
    """A non-contiguous input: ``view(base)``, applied on each side after ``base`` is moved there
    (``.to(device)`` would make most views contiguous)."""

    base: torch.Tensor
    view: Callable[[torch.Tensor], torch.Tensor]
    label: str

    def __repr__(self) -> str:
        return f"{self.label}(base {tuple(self.base.shape)} {self.base.dtype})"


@dataclass
class OpSpec:
    """One op's conformance contract.

    ``op`` is called with the drawn inputs as keyword arguments (a dict) or positionally (a tuple).
    ``reference`` (float64, CPU) is the oracle for the values when ``use_reference(**inputs)``
    holds (default: always, once a reference is given); upstream still runs for the exception
    behaviour, the output structure, shapes and dtypes.  ``backward=True`` checks the gradients of
    ``grad_inputs`` (input names / positions) against the oracle's, with one random grad_output.
    ``examples`` are explicit inputs (edge cases) that every run checks besides the drawn ones.
    """

    name: str
    op: Callable[..., Any]
    inputs: st.SearchStrategy[Any]
    compare: Compare
    budget: BudgetUse | Callable[..., BudgetUse] = BudgetUse()
    reference: Callable[..., Any] | None = None
    use_reference: Callable[..., bool] | None = None
    backward: bool = False
    grad_inputs: tuple[str | int, ...] = ()
    examples: tuple[Any, ...] = ()  # edge cases run on every run, before the drawn ones
    notes: str = ""


@dataclass
class CaseResult:
    """The outcome of one example."""

    spec: str
    inputs: str  # a short description of the drawn inputs
    oracle: str  # "upstream", "reference" or "raises"
    ok: bool = True
    message: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    launches: int = 0
    syncs: int = 0
    ai_cpu: int = 0  # launches a 910B runs on its AI CPU (fbgemm_npu.testing.routes_910b)
    stalls: int = 0  # host waits a 910B adds (host fallbacks, blocking uploads)
    unsupported: list[str] = field(default_factory=list)
    over_budget: bool = False
