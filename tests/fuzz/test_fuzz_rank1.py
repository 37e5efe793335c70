"""Hostile-input fuzz of the rank1 family (fbgemm_npu/native/mxrec/rank1/).

Valid inputs in every layout, float dtype and size (empty batches included) equal the
references of ``fbgemm_npu/testing/fuzz_references_rank1.py`` (no upstream CPU kernel exists),
the gather's gradient included; everything else is a clear error naming the op and the
argument: non-tensors, dtypes, ranks, shapes that disagree, indices out of range, negative or
near 2**31 (clamped, then the queued check), inputs on two devices.
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

REF = "fbgemm_npu.testing.fuzz_references_rank1:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TOL = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
    torch.bfloat16: {"rtol": 5e-2, "atol": 5e-2},
}


def _draw(data: Any, backward: bool) -> tuple[torch.Tensor, ...]:
    e, n = data.draw(st.integers(1, 40), label="E"), data.draw(st.integers(0, 30), label="N")
    dtype, gen = data.draw(st.sampled_from(FLOATS)), seeded(data)
    idt = data.draw(st.sampled_from((torch.int32, torch.int64)))
    x = in_layout(data, torch.randn(e, generator=gen).to(dtype))
    index = in_layout(data, torch.randint(0, e, (n,), generator=gen, dtype=idt))
    if not backward:
        return x, index
    g = in_layout(data, torch.randn(n, generator=gen).to(dtype))
    return g, x, index


@fuzz_test("rank1")
def test_fuzz_rank1_valid(data: Any) -> Case:
    """Both ops, every dtype, layout and size; the gather's gradient."""
    backward = data.draw(st.booleans(), label="backward op")
    args = _draw(data, backward)
    name = "index_select_for_rank1_backward" if backward else "gather_for_rank1"
    return Case(
        f"mxrec::{name}",
        args,
        oracle=REF + ("backward" if backward else "gather"),
        grad=() if backward else (0,),
        label=f"valid {name}",
        **TOL[args[0].dtype],
    )


@fuzz_test("rank1")
def test_fuzz_rank1_invalid(data: Any) -> Case:
    """A non-tensor, a dtype, a rank or shape, an index out of range, two devices."""
    how = data.draw(st.sampled_from(("object", "dtype", "shape", "data", "device")))
    backward = data.draw(st.booleans(), label="backward op")
    op = "mxrec::" + ("index_select_for_rank1_backward" if backward else "gather_for_rank1")
    args = list(_draw(data, backward))
    names = ("grad", "x", "index") if backward else ("x", "index")
    i = data.draw(st.integers(0, len(args) - 1), label="argument")
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        floats = (args[1] if backward else args[0]).dtype
        allowed = (torch.int32, torch.int64) if names[i] == "index" else (floats,)
        if names[i] == "x":
            allowed = FLOATS if not backward else (floats,)
            i = i if not backward else 0  # a backward x of another dtype: grad's dtype differs
        args[i] = args[i].to(other_dtype(data, allowed))
    elif how == "shape":
        args[i] = (
            args[i].reshape(1, -1) if args[i].numel() else torch.zeros((1, 2), dtype=args[i].dtype)
        )
        if backward and names[i] == "grad":
            i = len(args) - 1  # grad may have any shape: the index no longer has it
    elif how == "data":
        index = args[-1].contiguous().clone()
        if index.numel() == 0:
            index = torch.zeros(1, dtype=index.dtype)
            if backward:
                args[0] = torch.zeros(1, dtype=args[0].dtype)
        e = args[-2].numel()
        index[0] = data.draw(st.sampled_from((-1, e, e + 7, INT32_MAX, -(2**31))))
        args[-1], i = index, len(args) - 1
    else:
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return Case(op, tuple(args), expect="error", names=names, label=how)
    return Case(op, tuple(args), expect="error", names=(names[i],), label=how)
