"""Hostile-input fuzz of the jagged2d family (fbgemm_npu/native/mxrec/jagged2d/).

Valid inputs in every layout, dtype (int32 / int64 values included), offsets dtype (mixed too)
and size, empty batches and sequences, prefixes, replace and dense sides, equal the references
of ``fbgemm_npu/testing/fuzz_references_jagged2d.py`` (no upstream CPU kernel exists), both
gradients included; everything else is a clear error naming the op and the argument:
non-tensors, dtypes, ranks, offsets of two lengths, offsets broken in every way
(``bad_offsets``: non-monotone, negative, past the end, not from 0, wrapped int32, float:
concat queues the check and stays memory-safe, split reads it with its sizes), negative
prefixes, inputs on two devices.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    bad_offsets,
    in_layout,
    lengths_to_offsets,
    not_a_tensor,
    other_dtype,
    seeded,
)

REF = "fbgemm_npu.testing.fuzz_references_jagged2d:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
DTYPES = (*FLOATS, torch.int32, torch.int64)
EXACT = {"rtol": 0.0, "atol": 0.0}
NAMES_CONCAT = ("maxSeqlen", "valuesA", "valuesB", "offsetA", "offsetB")
NAMES_SPLIT = ("values", "maxSeqlen", "offsetA", "offsetB", "dense_size", "nPrefixToRight")


def _offsets(data: Any, batches: int) -> torch.Tensor:
    lengths = torch.tensor(
        data.draw(st.lists(st.integers(0, 4), min_size=batches, max_size=batches), label="lengths")
    )
    return lengths_to_offsets(lengths, data.draw(st.sampled_from((torch.int32, torch.int64))))


def _concat(data: Any, floats: bool = False) -> list:
    batches, d = data.draw(st.integers(1, 4), label="B"), data.draw(st.integers(1, 4), label="D")
    dtype, gen = data.draw(st.sampled_from(FLOATS if floats else DTYPES)), seeded(data)
    dense = data.draw(st.sampled_from(("none", "none", "A", "B")), label="dense side")
    values, offsets = [], []
    for side in "AB":
        if dense == side:
            n = data.draw(st.integers(0, 3))
            values.append((torch.randn(batches, n, d, generator=gen) * 50).to(dtype))
            offsets.append(torch.empty(0, dtype=torch.int64))
        else:
            o = _offsets(data, batches)
            extra = data.draw(st.sampled_from((0, 0, 2)), label="rows past the offsets")
            values.append((torch.randn(int(o[-1]) + extra, d, generator=gen) * 50).to(dtype))
            offsets.append(o)
    replace = data.draw(st.booleans(), label="isReplace")
    n = 0 if replace else data.draw(st.sampled_from((0, 1, 3)), label="nPrefixFromRight")
    va, vb = (in_layout(data, v) for v in values)
    return [8, va, vb, offsets[0], offsets[1], replace, n]


def _split(data: Any, floats: bool = False) -> list:
    batches, d = data.draw(st.integers(1, 4), label="B"), data.draw(st.integers(1, 4), label="D")
    dtype, gen = data.draw(st.sampled_from(FLOATS if floats else DTYPES)), seeded(data)
    dense = data.draw(st.sampled_from(("none", "none", "A", "B")), label="dense side")
    dense_size = data.draw(st.integers(0, 3), label="dense_size")
    offs = [
        torch.empty(0, dtype=torch.int64) if dense == s else _offsets(data, batches) for s in "AB"
    ]
    rows = sum(int(o[-1]) if o.numel() else batches * dense_size for o in offs)
    extra = data.draw(st.sampled_from((0, 0, 3))) if dense == "none" else 0
    v = in_layout(data, (torch.randn(rows + extra, d, generator=gen) * 50).to(dtype))
    return [v, 8, offs[0], offs[1], dense_size, data.draw(st.sampled_from((0, 1, 3)))]


@fuzz_test("jagged2d")
def test_fuzz_jagged2d_valid(data: Any) -> Case:
    """Both ops, every dtype, layout, size and option; the gradients."""
    grad = data.draw(st.booleans(), label="grad")
    if data.draw(st.booleans(), label="concat"):
        return Case(
            "mxrec::concat_2d_jagged",
            tuple(_concat(data, grad)),
            oracle=REF + "concat_2d_jagged",
            grad=(1, 2) if grad else (),
            label="valid concat",
            **EXACT if not grad else {},
        )
    return Case(
        "mxrec::split_2d_jagged",
        tuple(_split(data, grad)),
        oracle=REF + "split_2d_jagged",
        grad=(0,) if grad else (),
        label="valid split",
        **EXACT if not grad else {},
    )


@fuzz_test("jagged2d")
def test_fuzz_jagged2d_invalid(data: Any) -> Case:
    """A non-tensor, a dtype, a rank, offsets broken or of two lengths, a negative size, two
    devices."""
    how = data.draw(
        st.sampled_from(("object", "dtype", "shape", "offsets", "length", "size", "device"))
    )
    concat = data.draw(st.booleans(), label="concat")
    op = "mxrec::concat_2d_jagged" if concat else "mxrec::split_2d_jagged"
    args = _concat(data) if concat else _split(data)
    names = NAMES_CONCAT if concat else NAMES_SPLIT
    tensors = (1, 2, 3, 4) if concat else (0, 2, 3)
    i = data.draw(st.sampled_from(tensors), label="argument")
    jagged = (
        [k for k in (3, 4) if args[k].numel()] if concat else [k for k in (2, 3) if args[k].numel()]
    )
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        allowed = DTYPES if names[i].startswith("values") else (torch.int32, torch.int64)
        args[i] = args[i].to(other_dtype(data, allowed))
        if concat and names[i].startswith("values"):
            return Case(op, tuple(args), expect="error", names=("valuesA", "valuesB"), label=how)
    elif how == "shape" or (how == "length" and len(jagged) < 2):
        # (one dense side: an extra offset is one more batch, not a mismatch)
        args[i] = args[i].reshape(1, *args[i].shape)
    elif how == "offsets":
        k = data.draw(st.sampled_from(jagged))
        total = args[1 + (k - 3)].size(0) if concat else args[0].size(0)
        _, args[k] = bad_offsets(data, args[k], total)
        return Case(
            op,
            tuple(args),
            expect="equal_or_error" if False else "error",
            names=(names[k], "offsetA", "offsetB"),
            label=how,
        )
    elif how == "length":
        k = data.draw(st.sampled_from(jagged))
        args[k] = torch.cat([args[k], args[k][-1:]])
        return Case(op, tuple(args), expect="error", names=("offsetA", "offsetB"), label=how)
    elif how == "size":
        i = data.draw(st.sampled_from((0, 6) if concat else (1, 4, 5)))
        args[i] = -data.draw(st.integers(1, 9))
    else:
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return Case(op, tuple(args), expect="error", names=names, label=how)
    return Case(
        op,
        tuple(args),
        expect="error",
        names=(names[i] if i < len(names) else "nPrefixFromRight",),
        label=how,
    )
