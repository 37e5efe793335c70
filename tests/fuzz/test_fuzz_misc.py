"""Hostile-input fuzz of the misc family's issue-13 round-2 ops (fbgemm_npu/native/fbgemm/misc/):
``embedding_bag_rowwise_prune``, ``batched_unary_embeddings`` (forward and the weight gradient)
and ``bottom_k_per_row``.

Valid inputs in every layout equal upstream's CPU kernel on contiguous copies (the unary
embeddings' gradient: a float64 reference, upstream's CPU build has none); hostile ones (dtypes,
ranks, objects, other devices, out-of-range indices and offsets, huge sizes) get a clear error
naming the op and the argument, or upstream's result.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded

PRUNE = "fbgemm::embedding_bag_rowwise_prune"
UNARY = "fbgemm::batched_unary_embeddings"
BOTTOM_K = "fbgemm::bottom_k_per_row"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@fuzz_test("misc")
def test_fuzz_rowwise_prune(data: Any) -> Case:
    gen = seeded(data)
    n, d = data.draw(st.integers(0, 40), label="rows"), data.draw(st.integers(1, 5), label="D")
    weight = torch.randn(n, d, generator=gen).to(data.draw(st.sampled_from(FLOATS)))
    indicator = torch.randn(n, generator=gen)
    args = [
        in_layout(data, weight),
        in_layout(data, indicator),
        data.draw(st.floats(0, 2), label="threshold"),
        data.draw(st.sampled_from((torch.int32, torch.int64)), label="mapping"),
        data.draw(st.booleans(), label="abs"),
        data.draw(st.sampled_from((-(2**40), -1, 0, 1, n // 2, n, n + 3, 2**40)), label="m"),
        data.draw(st.sampled_from((None, 1.0, 0.3, 4.0)), label="ratio"),
    ]
    how = data.draw(
        st.sampled_from(("valid", "valid", "threshold", "indicator", "weight", "object", "device"))
    )
    names: tuple[str, ...]
    if how == "valid":
        return Case(PRUNE, tuple(args), label="valid", rtol=0, atol=0)
    if how == "threshold":
        args[2], names = data.draw(st.sampled_from((-0.5, float("nan")))), ("threshold",)
    elif how == "indicator":
        bad = data.draw(st.sampled_from(("dtype", "size")))
        args[1] = (
            indicator.to(other_dtype(data, (torch.float32,))) if bad == "dtype" else indicator[1:]
        )
        names = ("indicator",)
        if bad == "size" and n == 0:
            args[1] = torch.ones(1)
    elif how == "weight":
        args[0], names = weight.view(-1), ("weight",)
    elif how == "object":
        which = data.draw(st.sampled_from((0, 1)))
        args[which], names = not_a_tensor(data), (("weight", "indicator")[which],)
    else:
        args[1], names = On(indicator, data.draw(st.sampled_from(("cpu", "npu:1")))), ("indicator",)
    return Case(PRUNE, tuple(args), expect="error", names=names, label=how)


def _unary_inputs(data: Any) -> tuple[torch.Tensor, ...]:
    gen = seeded(data)
    n, t, b = (data.draw(st.integers(1, 4), label=k) for k in ("N", "T", "B"))
    sizes = torch.randint(1, 9, (t,), generator=gen)
    table_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    lengths = torch.randint(0, 5, (t * b,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    table = torch.arange(t).repeat_interleave(b).repeat_interleave(lengths)
    indices = (torch.rand(int(lengths.sum()), generator=gen) * sizes[table]).long()
    weight = torch.randn(n, int(table_offsets[-1]), 1, generator=gen)
    index_dtype = data.draw(st.sampled_from((torch.int32, torch.int64)), label="index dtype")
    return weight, *(x.to(index_dtype) for x in (table_offsets, offsets, indices))


@fuzz_test("misc")
def test_fuzz_unary_embeddings_valid(data: Any) -> Case:
    """Every layout and weight dtype; float32 with the weight gradient against float64."""
    weight, *rest = _unary_inputs(data)
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    args = (in_layout(data, weight.to(dtype)), *(in_layout(data, x) for x in rest))
    if dtype != torch.float32:
        tol = 1e-3 if dtype == torch.float16 else 8e-3
        return Case(UNARY, args, label=f"valid {dtype}", rtol=tol, atol=tol)
    return Case(
        UNARY,
        args,
        label="valid grad",
        grad=(0,),
        rtol=1e-5,
        atol=1e-5,
        oracle="fbgemm_npu.testing.misc_references:batched_unary_embeddings",
    )


@fuzz_test("misc")
def test_fuzz_unary_embeddings_invalid(data: Any) -> Case:
    weight, table_offsets, offsets, indices = _unary_inputs(data)
    how = data.draw(
        st.sampled_from(
            ("index", "negative", "offsets", "tables", "dtype", "weight dtype", "object", "device")
        )
    )
    names: tuple[str, ...] = ("indices", "table_offsets")
    if how == "index" and indices.numel():
        indices = indices + data.draw(st.sampled_from((10**3, 2**31 - 5)))
    elif how == "negative" and indices.numel():
        indices = indices - 10**3
    elif how == "offsets":
        offsets = offsets.flip(0)
        offsets[0] += 1  # decreasing, and past the indices
        names = ("offsets",)
    elif how == "tables":
        table_offsets = table_offsets.clone()
        table_offsets[-1] -= 1  # not weight.numel() / N
        names = ("table_offsets",)
    elif how == "dtype":
        offsets = offsets.to(other_dtype(data, (indices.dtype,)))
        names = ("offsets",)
    elif how == "weight dtype":
        weight = weight.to(other_dtype(data, FLOATS))
        names = ("weight",)
    elif how == "object":
        offsets, names = not_a_tensor(data), ("offsets",)
    elif how == "device":
        indices, names = On(indices, data.draw(st.sampled_from(("cpu", "npu:1")))), ("indices",)
    else:  # no indices to spoil: a valid call
        return Case(UNARY, (weight, table_offsets, offsets, indices), label="valid empty")
    args = (weight, table_offsets, offsets, indices)
    return Case(UNARY, args, expect="error", names=names, label=how)


@fuzz_test("misc")
def test_fuzz_bottom_k(data: Any) -> Case:
    gen = seeded(data)
    cols = data.draw(st.integers(1, 10), label="C")
    shape = data.draw(st.sampled_from(((data.draw(st.integers(1, 12)), cols), (2, 3, cols))))
    span = data.draw(st.sampled_from((3, 30, 2**62)), label="span")
    x = torch.randint(-span, span, shape, generator=gen)
    if data.draw(st.booleans(), label="sorted"):
        x = x.sort(-1).values
    rows = x.numel() // cols
    unique = data.draw(st.booleans(), label="unique")
    if rows == 1 or data.draw(st.booleans(), label="fixed"):
        start = data.draw(st.integers(-3, 3))
        k_offsets = torch.tensor([start, start + data.draw(st.integers(1, cols))])
    else:
        ks = torch.randint(0, cols + 1, (rows,), generator=gen)
        k_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), ks.cumsum(0)])
    how = data.draw(st.sampled_from(("valid", "valid", "k", "k_offsets", "dtype", "object")))
    if how == "valid":  # rows with too few distinct values: both raise, a clear error
        return Case(
            BOTTOM_K,
            (in_layout(data, x), in_layout(data, k_offsets), unique),
            expect="equal_or_error",
            names=("input", "k_offsets"),
            label="valid",
        )
    names: tuple[str, ...] = ("k_offsets",)
    if how == "k":
        k_offsets = torch.tensor([0, data.draw(st.sampled_from((-1, cols + 1, 2**40)))])
        if unique and int(k_offsets[1]) > 0:
            names = ("input",)
    elif how == "k_offsets":
        k_offsets = data.draw(
            st.sampled_from(
                [torch.arange(rows + 2), torch.arange(rows + 1) + 1, torch.arange(rows + 1).flip(0)]
            )
        )
        if k_offsets.numel() == 2:  # one row: two offsets are a fixed k (valid or not)
            return Case(
                BOTTOM_K,
                (x, k_offsets, unique),
                expect="equal_or_error",
                names=("k_offsets", "input"),
                label="one row",
            )
    elif how == "dtype":
        which = data.draw(st.sampled_from(("input", "k_offsets")))
        if which == "input":
            x = x.to(other_dtype(data, (torch.int64,)))
        else:
            k_offsets = k_offsets.to(other_dtype(data, (torch.int64,)))
        names = (which,)
    else:
        x, names = not_a_tensor(data), ("input",)
    return Case(BOTTOM_K, (x, k_offsets, unique), expect="error", names=names, label=how)
