"""Hostile-input fuzz of the sequence family (fbgemm_npu/native/mxrec/sequence/).

Valid inputs in every layout, dtype (int32 / int64 values included) and size, empty ones
included, equal the references of ``fbgemm_npu/testing/fuzz_references_sequence.py`` (no
upstream CPU kernel exists), reverse_sequence's gradient included; everything else is a clear
error naming the op and the argument: non-tensors, dtypes, ranks, lengths that do not match
the batch, lengths past S or negative or near 2**31 (clamped, then the queued check), slices
past the row, counts that do not add up, inputs on two devices.
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

REF = "fbgemm_npu.testing.fuzz_references_sequence:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
DTYPES = (*FLOATS, torch.int32, torch.int64)
EXACT = {"rtol": 0.0, "atol": 0.0}


def _slices(data: Any) -> tuple[torch.Tensor, int, list[int], list[int], list[int]]:
    b, d = data.draw(st.integers(0, 5), label="B"), data.draw(st.integers(1, 12), label="D")
    x = (torch.randn(b, d, generator=seeded(data)) * 50).to(data.draw(st.sampled_from(DTYPES)))
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4), label="concat_size")
    begins = [data.draw(st.integers(0, d - 1)) for _ in range(sum(sizes))]
    lengths = [data.draw(st.sampled_from((-1, *range(1, d - k + 1)))) for k in begins]
    return in_layout(data, x), len(sizes), sizes, begins, lengths


def _reverse(data: Any, floats_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    b, s, d = (
        data.draw(st.integers(0, 4)),
        data.draw(st.integers(0, 7)),
        data.draw(st.integers(0, 5)),
    )
    gen = seeded(data)
    dtype = data.draw(st.sampled_from(FLOATS if floats_only else DTYPES))
    x = (torch.randn(b, s, d, generator=gen) * 50).to(dtype)
    ldt = data.draw(st.sampled_from((torch.int32, torch.int64)))
    lens = torch.randint(0, s + 1, (b,), generator=gen).to(ldt)
    return in_layout(data, x), in_layout(data, lens)


@fuzz_test("sequence")
def test_fuzz_sequence_valid(data: Any) -> Case:
    """Both ops, every dtype, layout and size; reverse_sequence's gradient."""
    if data.draw(st.booleans(), label="multislice"):
        return Case(
            "mxrec::multislice_concat",
            _slices(data),
            oracle=REF + "multislice_concat",
            label="valid multislice_concat",
            **EXACT,
        )
    grad = data.draw(st.booleans(), label="grad")
    args = _reverse(data, floats_only=grad)
    return Case(
        "mxrec::reverse_sequence",
        args,
        oracle=REF + "reverse_sequence",
        grad=(0,) if grad else (),
        label="valid reverse_sequence",
        **EXACT,
    )


@fuzz_test("sequence")
def test_fuzz_sequence_invalid(data: Any) -> Case:
    """A non-tensor, a dtype, a rank, a count or slice or length out of range, two devices."""
    how = data.draw(st.sampled_from(("object", "dtype", "shape", "data", "device")))
    if data.draw(st.booleans(), label="multislice"):
        op, args = "mxrec::multislice_concat", list(_slices(data))
        if how == "object":
            args[0], name = not_a_tensor(data), "input"
        elif how == "dtype":
            args[0], name = args[0].to(other_dtype(data, DTYPES)), "input"
        elif how == "shape":
            args[0], name = args[0].reshape(1, *args[0].shape), "input"
        elif how == "data":
            name = data.draw(
                st.sampled_from(("concat_num", "concat_size", "slice_begin", "slice_length"))
            )
            d = args[0].size(1)
            if name == "concat_num":
                args[1] = data.draw(st.sampled_from((0, -3, len(args[2]) + 1)))
            elif name == "concat_size":
                args[2] = [*args[2][:-1], data.draw(st.sampled_from((0, -1)))]
            elif name == "slice_begin":
                args[3] = [data.draw(st.sampled_from((-1, d, INT32_MAX))), *args[3][1:]]
            else:
                args[4] = [data.draw(st.sampled_from((0, -2, d - args[3][0] + 1))), *args[4][1:]]
        else:
            args[0] = On(args[0], data.draw(st.sampled_from(("cpu", "npu:1"))))
            return Case(
                op,
                tuple(args),
                expect="equal_or_error",
                oracle=REF + "multislice_concat",
                names=("input",),
                label="one tensor elsewhere",
                **EXACT,
            )
        return Case(op, tuple(args), expect="error", names=(name,), label=how)
    op, args = "mxrec::reverse_sequence", list(_reverse(data))
    names = ("input", "seq_lengths")
    i = data.draw(st.integers(0, 1), label="argument")
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        args[i] = args[i].to(other_dtype(data, DTYPES if i == 0 else (torch.int32, torch.int64)))
    elif how == "shape":
        args[i] = (
            args[i].reshape(1, *args[i].shape)
            if i == 0
            else torch.zeros(args[0].size(0) + 1, dtype=torch.int64)
        )
    elif how == "data":
        lens = args[1].contiguous().clone()
        if lens.numel() == 0:
            args[0], lens = torch.zeros(1, 2, 1), torch.zeros(1, dtype=lens.dtype)
        s = args[0].size(1)
        lens[0] = data.draw(st.sampled_from((-1, s + 1, INT32_MAX, -(2**31))))
        args[1], i = lens, 1
    else:
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return Case(op, tuple(args), expect="error", names=names, label=how)
    return Case(op, tuple(args), expect="error", names=(names[i],), label=how)
