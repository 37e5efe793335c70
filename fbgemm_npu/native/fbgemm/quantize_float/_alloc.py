"""Allocation failures named: every npu kernel of the family re-raises an allocator's error as
``RuntimeError("<op>: the output of '<arg>' cannot be allocated: ...")``.

A size that passes every check can still exceed the memory: a stride-0 input of ``2**40`` rows
(its output is dense), or ``PaddedFP8RowwiseQuantizedToFloat``'s ``output_last_dim`` of
``2**40``.  The allocator's own words name neither the op nor the argument (docs/design.md rule
9; found by tests/fuzz/test_fuzz_quantize_float.py).  No launch, no sync: a ``try`` around the
kernel (:func:`fbgemm_npu.native._checks.allocation_of`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fbgemm_npu.native._checks import allocation_of

__all__ = ["name_allocations"]

# the arguments whose sizes the output takes
SIZED_BY = {
    "fbgemm::FloatToFP8RowwiseQuantized": "'t'",
    "fbgemm::FloatToPaddedFP8RowwiseQuantized": "'t'",
    "fbgemm::PaddedFP8RowwiseQuantizedToFloat": "'input' / 'output_last_dim'",
}


def _named(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    what = f"the output of {SIZED_BY.get(op, repr('input'))}"

    @functools.wraps(fn)
    def kernel(*args: Any, **kwargs: Any) -> Any:
        with allocation_of(op, what):
            return fn(*args, **kwargs)

    return kernel


def name_allocations(kernels: dict[str, dict[str, Callable[..., Any]]]) -> dict[str, Any]:
    """``kernels`` with every ``PrivateUse1`` kernel wrapped (Meta kernels allocate nothing)."""
    return {
        op: {key: _named(op, fn) if key == "PrivateUse1" else fn for key, fn in table.items()}
        for op, table in kernels.items()
    }
