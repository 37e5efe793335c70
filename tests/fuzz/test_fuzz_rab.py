"""Hostile-input fuzz of the rab family (fbgemm_npu/native/mxrec/rab/).

Valid inputs in every layout, dtype and size (timestamps up to the int32 extremes) equal the
references of ``fbgemm_npu/testing/fuzz_references_rab.py`` (no upstream CPU kernel exists:
ours is the CPU kernel), the time bias's weight gradient included; everything else is a clear
error naming the op and the argument: non-tensors, dtypes, ranks, shapes that disagree, negative
lengths, divisors <= 0, buckets out of range (the queued check), inputs on two devices.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import INT32_MAX, in_layout, not_a_tensor, seeded

REF = "fbgemm_npu.testing.fuzz_references_rab:"
FLOATS = (torch.float32, torch.float16)
TOL = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.float16: {"rtol": 1e-2, "atol": 1e-2}}


def _pos(data: Any) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    s, dtype, gen = data.draw(st.integers(1, 6)), data.draw(st.sampled_from(FLOATS)), seeded(data)
    bias = in_layout(data, torch.randn(2 * s, 2 * s, generator=gen).to(dtype))
    ident = in_layout(data, (torch.rand(2 * s, 2 * s, generator=gen) > 0.7).to(dtype))
    lens = data.draw(st.lists(st.integers(0, 2 * s + 2), min_size=1, max_size=4), label="lens")
    return bias, ident, lens


def _time(data: Any) -> tuple[torch.Tensor, torch.Tensor, float]:
    b, s, n = (
        data.draw(st.integers(0, 3)),
        data.draw(st.integers(0, 6)),
        data.draw(st.integers(1, 3)),
    )
    top = data.draw(st.sampled_from((10, 10**6, INT32_MAX)), label="span")
    gen = seeded(data)
    tdt = data.draw(st.sampled_from((torch.int32, torch.int64)))
    t = torch.randint(-top, top, (b, s), generator=gen, dtype=torch.int64).to(tdt)
    w = torch.randn(n, data.draw(st.sampled_from((1, 9, 129))), generator=gen)
    w = in_layout(data, w.to(data.draw(st.sampled_from(FLOATS))))
    return in_layout(data, t), w, data.draw(st.sampled_from((0.301, 0.05, 2.0)))


def _backward(data: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
    b, s, n = (
        data.draw(st.integers(0, 3)),
        data.draw(st.integers(0, 5)),
        data.draw(st.integers(1, 3)),
    )
    nb, gen = data.draw(st.sampled_from((1, 9, 129))), seeded(data)
    g = torch.randn(n, b, 2 * s, 2 * s, generator=gen).to(data.draw(st.sampled_from(FLOATS)))
    k = torch.randint(0, nb, (b, s, s), generator=gen, dtype=torch.int32)
    return in_layout(data, g), in_layout(data, k), nb


@fuzz_test("rab")
def test_fuzz_rab_valid(data: Any) -> Case:
    """Every op, dtype, layout and size; the time bias's weight gradient."""
    which = data.draw(st.sampled_from(("pos", "time", "time_with_index", "time_backward")))
    if which == "pos":
        args: tuple = _pos(data)
    elif which == "time_backward":
        args = _backward(data)
    else:
        args = _time(data)
    dtype = args[0].dtype if which != "time" and which != "time_with_index" else args[1].dtype
    grad = (1,) if which == "time" else ()
    return Case(
        f"mxrec::relative_attn_bias_{which}",
        args,
        oracle=REF + which,
        grad=grad,
        label=f"valid {which}",
        **TOL.get(dtype, {}),
    )


@fuzz_test("rab")
def test_fuzz_rab_invalid(data: Any) -> Case:
    """A non-tensor, a dtype, a rank or shape, a bad scalar, bad data, two devices."""
    how = data.draw(st.sampled_from(("object", "dtype", "shape", "scalar", "data", "device")))
    which = data.draw(st.sampled_from(("pos", "time", "time_backward")))
    op = f"mxrec::relative_attn_bias_{which}"
    args = list(
        _pos(data) if which == "pos" else _time(data) if which == "time" else _backward(data)
    )
    names = {
        "pos": ("rel_pos_bias", "identity", "past_valid_lens"),
        "time": ("timestamps", "timestamps_weights", "bucket_divisor"),
        "time_backward": ("rab_time_grad", "bucket_timestamps", "num_buckets"),
    }[which]
    i = data.draw(st.integers(0, 1), label="argument")
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        args[i] = args[i].to(torch.float64 if args[i].dtype != torch.float64 else torch.int8)
    elif how == "shape":
        args[i] = args[i].reshape(-1)
    elif how == "scalar":
        i = 2
        args[2] = {
            "pos": [-1],
            "time": data.draw(st.sampled_from((0.0, -1.0, float("nan")))),
            "time_backward": -1,
        }[which]
    elif how == "data":
        if which != "time_backward" or args[1].numel() == 0:
            return Case(
                op,
                tuple(args),
                oracle=REF + which,
                label="valid (no bad data)",
                **TOL.get(args[0].dtype, TOL[torch.float32]),
            )
        k = args[1].contiguous().clone()
        k.view(-1)[0] = data.draw(st.sampled_from((-1, args[2], INT32_MAX)))
        args[1], i = k, 1
    else:
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return Case(op, tuple(args), expect="error", names=names[:2], label=how)
    return Case(op, tuple(args), expect="error", names=(names[i],), label=how)
