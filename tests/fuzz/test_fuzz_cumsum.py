"""Hostile-input fuzz of the cumsum family (fbgemm_npu/native/fbgemm/cumsum/).

Valid inputs in every layout and dtype equal upstream's CPU kernels (int32 overflow wraps as
upstream's, int64 values use all 64 bits; half types against a float64 reference, as in
conformance); everything else gets a clear error naming the op and ``t_in``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    INT32_MAX,
    in_layout,
    not_a_tensor,
    other_dtype,
    seeded,
)

OPS = ("complete", "exclusive", "inclusive")
DTYPES = (torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32)
HALF = (torch.float16, torch.bfloat16)


def _values(data: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    gen = seeded(data)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    ranges = {"small": (-50, 50), "near 2**31": (INT32_MAX - 1000, INT32_MAX)}
    if dtype == torch.int64:  # int64 is scanned word by word: carries, borrows, 2**63 wraps
        ranges |= {"low words": (0, 2**32), "all 64 bits": (-(2**63), 2**63 - 1)}
    low, high = ranges[data.draw(st.sampled_from(sorted(ranges)), label="values")]
    return torch.randint(low, high, shape, generator=gen, dtype=torch.int64).to(dtype)


def _case(which: str, t_in: Any, **kw: Any) -> Case:
    return Case(f"fbgemm::asynchronous_{which}_cumsum", (t_in,), **kw)


@fuzz_test("cumsum")
def test_fuzz_cumsum_valid(data: Any) -> Case:
    """Every op, dtype, rank (1-D/2-D for complete, any for the others), layout and size."""
    which = data.draw(st.sampled_from(OPS))
    dtype = data.draw(st.sampled_from(DTYPES))
    ndim = data.draw(st.sampled_from((1, 2) if which == "complete" else (0, 1, 2, 3)))
    shape = tuple(data.draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    t = in_layout(data, _values(data, dtype, shape))
    oracle = "fbgemm_npu.testing.fuzz_references:cumsum_" + which if dtype in HALF else None
    tol = {}
    if dtype == torch.float32 and t.numel():
        # a float32 scan summed in another order than upstream's sequential loop differs by up
        # to ~n * eps * max|x| where partial sums cancel: an absolute bound, not a relative one
        eps = torch.finfo(torch.float32).eps
        tol = {"rtol": 1.3e-6, "atol": 2 * eps * t.numel() * float(t.abs().max()) + 1e-6}
    return _case(which, t, oracle=oracle, label=f"valid {dtype}", **tol)


@fuzz_test("cumsum")
def test_fuzz_cumsum_invalid(data: Any) -> Case:
    """A non-tensor, a dtype outside the five, a wrong rank, the input on another device."""
    which = data.draw(st.sampled_from(OPS))
    how = data.draw(st.sampled_from(("object", "dtype", "rank", "device")))
    if how == "object":
        return _case(which, not_a_tensor(data), expect="error", names=("t_in",), label=how)
    shape = tuple(data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=2), label="shape"))
    if how == "dtype":
        t = in_layout(data, _values(data, torch.int64, shape).to(other_dtype(data, DTYPES)))
        return _case(which, t, expect="error", names=("t_in",), label=how)
    if how == "rank" and which == "complete":
        rank = data.draw(st.sampled_from((0, 3, 4)), label="rank")
        t = _values(data, data.draw(st.sampled_from(DTYPES)), (shape * 4)[:rank])
        return _case(which, t, expect="error", names=("t_in",), label=how)
    # an input on the CPU or on npu:1: valid, equal to upstream's CPU kernel
    t = in_layout(
        data, _values(data, data.draw(st.sampled_from((torch.int32, torch.int64))), shape)
    )
    where = data.draw(st.sampled_from(("cpu", "npu:1")), label="device")
    return _case(which, On(t, where), label="device")
