"""What the index-select specs share: dtypes, comparisons and small strategy helpers.

Budgets of every spec here: the op's ``BUDGETS`` entry
(``fbgemm_npu/native/fbgemm/index_select/budgets.py``); a spec's budget function names the path
of the drawn call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Compare, TensorView, Tol

__all__ = ["EXACT", "FLOATS", "INDEX_DTYPES", "SUMS", "VALUE_DTYPES", "by_name", "seed", "stored"]

VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)
EXACT = Compare({d: Tol(0.0, 0.0) for d in (*FLOATS, torch.float64)})
# Sums of a few terms in [-10, 10] (repeated segments), rounded per add in the dtype:
# a few units in the last place of partial sums up to ~40.
SUMS = Compare(
    {
        torch.float32: Tol(rtol=1e-6, atol=2e-5),
        torch.float16: Tol(rtol=4e-3, atol=4e-2),
        torch.bfloat16: Tol(rtol=3e-2, atol=0.25),
        torch.float64: Tol(rtol=1e-12, atol=1e-12),
    }
)


def seed(draw: st.DrawFn) -> int:
    """A seed for a host generator, drawn (so hypothesis shrinks it)."""
    return draw(st.integers(0, 2**31 - 1))


def stored(t: Any) -> Any:
    """A drawn argument's tensor as stored: a :class:`TensorView`'s base (dtype, numel)."""
    return t.base if isinstance(t, TensorView) else t


def by_name(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with the drawn inputs as keyword arguments."""
    return lambda **kw: fn(**kw)
