"""Hostile-input fuzz of the linear_silu family (fbgemm_npu/native/mxrec/linear_silu/).

Valid inputs in every layout, dtype and size (empty batches, ``k = 0``, zero-width splits, a
float32 or x-dtype bias) equal the float64 references of
``fbgemm_npu/testing/fuzz_references_linear_silu.py`` (no upstream CPU kernel exists: ours is
the CPU kernel), ``in_linear_silu``'s gradients of x, weight and bias included; everything else
is a clear error naming the op and the argument: non-tensors, dtypes, ranks, shapes that
disagree, split lists of the wrong length / sum / sign, inputs on two devices.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, seeded

REF = "fbgemm_npu.testing.fuzz_references_linear_silu:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# a dot product of k <= 12 values in [-1, 1) rounded once in the dtype (module docstring of
# conformance/specs/mxrec/linear_silu/linear_silu.py); the bias gradient of half inputs is
# float32 but sums a half dz: the input's tolerance
TOL = {torch.float32: 2e-5, torch.float16: 1e-2, torch.bfloat16: 6e-2}
GRADS = ("user_grad", "value_grad", "query_grad", "key_grad")


def _forward(data: Any) -> tuple[list[Any], torch.dtype]:
    m, k = data.draw(st.integers(0, 6), label="m"), data.draw(st.integers(0, 12), label="k")
    widths = data.draw(st.lists(st.integers(0, 5), min_size=4, max_size=4), label="attr_dict")
    dtype, gen = data.draw(st.sampled_from(FLOATS)), seeded(data)
    n = sum(widths)
    x = in_layout(data, (torch.rand(m, k, generator=gen) * 2 - 1).to(dtype))
    w = in_layout(data, (torch.rand(n, k, generator=gen) * 2 - 1).to(dtype))
    bias_dtype = data.draw(st.sampled_from((torch.float32, dtype)), label="bias dtype")
    b = in_layout(data, (torch.rand(n, generator=gen) * 2 - 1).to(bias_dtype))
    return [x, w, b, widths], dtype


def _backward(data: Any) -> tuple[list[Any], torch.dtype]:
    (x, w, b, widths), dtype = _forward(data)
    gen = seeded(data)
    grads = [in_layout(data, torch.randn(x.size(0), h, generator=gen).to(dtype)) for h in widths]
    z = in_layout(data, (torch.randn(x.size(0), w.size(0), generator=gen) * 2).to(dtype))
    bias = b if data.draw(st.booleans(), label="bias") else None
    return [x, w, bias, *grads, z, widths], dtype


def _tol(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": TOL[dtype], "atol": TOL[dtype]}


@fuzz_test("linear_silu")
def test_fuzz_linear_silu_valid(data: Any) -> Case:
    """Every op, dtype, layout and size; in_linear_silu's gradients."""
    which = data.draw(
        st.sampled_from(("in_linear_silu", "distance_in_linear_silu", "in_linear_silu_backward"))
    )
    if which == "in_linear_silu_backward":
        args, dtype = _backward(data)
        return Case(f"mxrec::{which}", tuple(args), oracle=REF + "backward", label=f"valid "
                    f"{which}", **_tol(dtype))  # fmt: skip
    args, dtype = _forward(data)
    grad = (0, 1, 2) if which == "in_linear_silu" else ()
    return Case(f"mxrec::{which}", tuple(args), oracle=REF + "forward", grad=grad,
                label=f"valid {which}", **_tol(dtype))  # fmt: skip


@fuzz_test("linear_silu")
def test_fuzz_linear_silu_invalid(data: Any) -> Case:
    """A non-tensor, a dtype, a rank or shape, a bad split list, two devices."""
    how = data.draw(st.sampled_from(("object", "dtype", "shape", "attr_dict", "device")))
    backward = data.draw(st.booleans(), label="backward")
    which = "in_linear_silu_backward" if backward else "in_linear_silu"
    op = f"mxrec::{which}"
    args, _ = _backward(data) if backward else _forward(data)
    names = (
        ("x", "weight", "bias", *GRADS, "linear_output") if backward else ("x", "weight", "bias")
    )
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    i = data.draw(st.sampled_from(tensors), label="argument")
    if how == "object":
        value = not_a_tensor(data)
        if value is None and names[i] == "bias" and backward:
            value = "bias"  # None is a valid bias of the backward
        args[i] = value
    elif how == "dtype":
        args[i] = args[i].to(data.draw(st.sampled_from((torch.float64, torch.int32, torch.bool))))
        if names[i] == "bias" and args[i].dtype == torch.float64 and args[0].dtype == torch.float64:
            args[i] = args[i].int()
    elif how == "shape":
        args[i] = torch.zeros((*args[i].shape, 2), dtype=args[i].dtype)
    elif how == "attr_dict":
        widths = list(args[-1])
        bad = data.draw(st.sampled_from(("short", "sum", "negative")), label="bad attr_dict")
        if bad == "short":
            args[-1] = widths[:3]
        elif bad == "sum":
            args[-1] = [*widths[:3], widths[3] + 1]
        else:
            args[-1] = [-1, widths[0] + widths[1] + 1, *widths[2:]]  # the sum kept
        return Case(op, tuple(args), expect="error", names=("attr_dict",), label="attr_dict")
    else:
        if i == 0:
            i = 1  # the first tensor fixes the device: another argument is the odd one out
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
    return Case(op, tuple(args), expect="error", names=(names[i],), label=how)
