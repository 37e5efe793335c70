"""Hostile-input fuzz of the permute family's index ops (fbgemm_npu/native/fbgemm/permute/):
``invert_permute`` and ``expand_into_jagged_permute``; the sparse-data permutes are in
``test_fuzz_permute.py``.

Valid permutations and segment offsets in any layout, on npu:0 or npu:1, equal upstream's CPU
kernels (run on contiguous copies); repeated, out-of-range, negative and int32-extreme entries,
non-monotone / negative / wrapped / float offsets, sizes that disagree or cannot be allocated,
wrong dtypes, empty permutes, non-tensors and mixed devices get a clear error naming the op and
the argument.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    INT32_MAX,
    bad_offsets,
    in_layout,
    lengths_to_offsets,
    not_a_tensor,
    other_dtype,
    seeded,
)

FAMILY = "permute"
INDEX = (torch.int32, torch.int64)


def _permutation(data: Any, n: int) -> torch.Tensor:
    perm = torch.randperm(n, generator=seeded(data))
    return perm.to(data.draw(st.sampled_from(INDEX), label="dtype"))


@fuzz_test(FAMILY)
def test_fuzz_invert_permute(data: Any) -> Case:
    """Permutations of 0..n-1 (n = 0 included, 1-D or 2-D, any layout, on npu:0 or npu:1);
    repeats, out-of-range, negative and int32-extreme entries, wrong dtypes, non-tensors."""
    op = "fbgemm::invert_permute"
    how = data.draw(
        st.sampled_from(("valid", "valid", "device", "repeat", "range", "dtype", "object"))
    )
    n = data.draw(st.integers(0, 12), label="n")
    perm = _permutation(data, n)
    if n % 2 == 0 and n and data.draw(st.booleans(), label="2-D"):
        perm = perm.view(2, -1)
    if how in ("valid", "device"):
        t = in_layout(data, perm)
        return Case(op, (On(t, "npu:1") if how == "device" else t,), label=f"valid {how}")
    if how == "object":
        return Case(op, (not_a_tensor(data),), expect="error", names=("permute",), label=how)
    if how == "dtype":
        bad = in_layout(data, perm.to(other_dtype(data, INDEX)))
        return Case(op, (bad,), expect="error", names=("permute",), label=how)
    perm = perm.reshape(-1).clone() if n else torch.zeros(1, dtype=perm.dtype)
    k = data.draw(st.integers(0, perm.numel() - 1))
    if how == "repeat" and perm.numel() > 1:
        perm[k] = perm[(k + 1) % perm.numel()]
    else:
        perm[k] = data.draw(st.sampled_from((perm.numel(), -1, INT32_MAX, -(2**31))))
    return Case(op, (in_layout(data, perm),), expect="error", names=("permute",), label=how)


def _expand_call(data: Any) -> dict[str, Any]:
    gen = seeded(data)
    t = data.draw(st.integers(1, 8), label="T")
    dtype = data.draw(st.sampled_from(INDEX), label="dtype")
    in_lengths = torch.randint(0, 6, (t,), generator=gen)
    perm = torch.randint(0, t, (t,), generator=gen)
    same = data.draw(st.booleans(), label="output lengths of the permuted inputs")
    out_lengths = in_lengths[perm] if same else torch.randint(0, 6, (t,), generator=gen)
    return {
        "permute": perm.to(dtype),
        "input_offset": lengths_to_offsets(in_lengths, dtype),
        "output_offset": lengths_to_offsets(out_lengths, dtype),
        "output_size": int(out_lengths.sum()),
    }


@fuzz_test(FAMILY)
def test_fuzz_expand_into_jagged_permute(data: Any) -> Case:
    """Valid segment offsets in any layout (input offsets of any values: they are only added
    to); broken output offsets, out-of-range permutes, sizes that disagree or cannot be
    allocated, dtypes, empty permutes, non-tensors, mixed devices."""
    op = "fbgemm::expand_into_jagged_permute"
    call = _expand_call(data)
    how = data.draw(
        st.sampled_from(
            (
                "valid",
                "valid",
                "input offsets anything",
                "output_offset",
                "permute",
                "output_size",
                "dtype",
                "empty",
                "object",
                "devices",
            )
        ),
        label="case",
    )
    tensors = ("permute", "input_offset", "output_offset")
    err: dict[str, Any] = {"expect": "error", "label": how}
    if how.startswith("valid") or how == "input offsets anything":
        if how == "input offsets anything":
            base = torch.randint(-(2**31), INT32_MAX - 100, call["input_offset"].shape)
            call["input_offset"] = base.to(call["input_offset"].dtype)
        for k in tensors:
            call[k] = in_layout(data, call[k])
        return Case(op, (), call, label=how)
    if how == "output_offset":
        broken, fixed = bad_offsets(data, call["output_offset"], call["output_size"])
        call["output_offset"] = in_layout(data, fixed)
        return Case(op, (), call, names=("output_offset",), **{**err, "label": broken})
    if how == "permute":
        perm = call["permute"].clone()
        perm[data.draw(st.integers(0, perm.numel() - 1))] = data.draw(
            st.sampled_from((perm.numel(), -1, INT32_MAX, -(2**31)))
        )
        call["permute"] = perm
        return Case(op, (), call, names=("permute",), **err)
    if how == "output_size":
        size = call["output_size"]
        call["output_size"] = data.draw(st.sampled_from((size + 1, -1, 2**40, 2**62)))
        if call["output_size"] >= 2**40 and data.draw(st.booleans(), label="offsets agree"):
            # offsets that end there too: consistent, but no memory holds the output
            call["output_offset"] = call["output_offset"].to(torch.int64)
            call["output_offset"][-1] = call["output_size"]
            call["permute"] = call["permute"].to(torch.int64)
            call["input_offset"] = call["input_offset"].to(torch.int64)
        return Case(op, (), call, names=("output_size", "output_offset"), **err)
    if how == "dtype":
        arg = data.draw(st.sampled_from(tensors), label="arg")
        call[arg] = call[arg].to(other_dtype(data, (call[arg].dtype,)))
        return Case(op, (), call, names=(arg, *tensors), **err)
    if how == "empty":
        call.update(
            permute=call["permute"][:0],
            input_offset=call["input_offset"][:1],
            output_offset=call["output_offset"][:1],
            output_size=0,
        )
        return Case(op, (), call, names=("permute",), **err)
    if how == "object":
        arg = data.draw(st.sampled_from(tensors), label="arg")
        call[arg] = not_a_tensor(data)
        return Case(op, (), call, names=(arg,), **err)
    arg = data.draw(st.sampled_from(tensors), label="arg")
    call[arg] = On(call[arg], data.draw(st.sampled_from(("cpu", "npu:1"))))
    return Case(op, (), call, names=tensors, **err)
