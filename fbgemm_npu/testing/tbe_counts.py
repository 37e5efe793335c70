"""Counting the tbe family's ops where upstream's modules call them: the lookup apart from the
module around it, and per-unit budgets held to the ceiling of what was measured."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.testing.budgets import budget_of

__all__ = ["LOOKUP_PREFIX", "assert_budget_is_the_ceiling", "intercept_lookups"]

LOOKUP_PREFIX = "split_embedding_codegen_lookup_"


class _HeldOp:
    """An op packet whose calls go through ``hold``; anything else (``.default``, its schema)
    is the real packet's, so code that inspects the op still works."""

    def __init__(self, qualname: str, packet: Any, hold: Callable[..., torch.Tensor]) -> None:
        self._qualname, self._packet, self._hold = qualname, packet, hold

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self._hold(self._qualname, lambda: self._packet(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._packet, name)


@contextmanager
def intercept_lookups(
    hold: Callable[[str, Callable[[], torch.Tensor]], torch.Tensor],
) -> Iterator[None]:
    """Route every ``torch.ops.fbgemm.split_embedding_codegen_lookup_*`` call that upstream's
    modules make through ``hold(qualname, call)`` (upstream's invokers look the op up on
    ``torch.ops.fbgemm`` at call time), e.g. to count the lookup apart from the module."""
    ns = torch.ops.fbgemm
    # every registered op (dir(ns) lists only those already looked up)
    names = [
        q.removeprefix("fbgemm::")
        for q in torch._C._dispatch_get_all_op_names()
        if q.startswith(f"fbgemm::{LOOKUP_PREFIX}") and q.endswith("_function_pt2")
    ]
    real = {n: getattr(ns, n) for n in names}

    for n in names:
        setattr(ns, n, _HeldOp(f"fbgemm::{n}", real[n], hold))
    try:
        yield
    finally:
        for n in names:
            setattr(ns, n, real[n])


def assert_budget_is_the_ceiling(
    op: str, measured: dict[str | None, list[tuple[int, int]]]
) -> None:
    """Every path of ``op``'s entry was measured, and each per-unit budget (per distinct D) is
    the ceiling of the per-unit counts ``(launches, units)`` measured on it: a per-unit count
    is affine in the units, so the budget holds the largest share, and a budget that has grown
    stale fails like a kernel over it."""
    entry = budget_of(op)
    assert set(measured) == {None, *entry.paths}, (
        f"{op}: paths measured {sorted(map(str, measured))}, budgeted {sorted(entry.paths)}"
    )
    for path, counts in measured.items():
        budget = entry.launch_limit(False, 1, path)
        checks = entry.launch_limit(validation_enabled(), 1, path) - budget  # not per unit
        ceiling = max(-(-(launches - checks) // units) for launches, units in counts)
        assert ceiling == budget, (
            f"{op} [{path or 'main'}]: measured {counts} (launches, units), a ceiling of "
            f"{ceiling} per unit; budgets.py says {budget}: update it (never loosen it silently)"
        )
