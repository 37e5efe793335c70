"""Hostile-input fuzz of the sll family (fbgemm_npu/native/fbgemm/sll/).

Valid calls (``fbgemm_npu.testing.sll_inputs.sll_args``: empty batches and sequences, sequences
past ``max_seq_len``, int32 / int64 offsets, every float dtype) in drawn layouts equal
upstream's CPU kernels, gradients included where upstream's backward is its forward's gradient;
a non-tensor, a refused dtype or a tensor on another device gets a clear error naming the op
and the argument; broken offsets (decreasing, negative, past the end, not from zero,
int32-wrapped, float) give upstream's result or a clear error, never a crash or a wrong result.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import bad_offsets, in_layout, not_a_tensor, other_dtype
from fbgemm_npu.testing.sll_inputs import OPS, sll_args

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
INDEX = (torch.int32, torch.int64)
GRAD = {
    "sll_jagged_dense_bmm": (0, 1),
    "sll_jagged_jagged_bmm": (0, 1),
    "sll_jagged_dense_elementwise_add": (0, 2),
    "sll_jagged_dense_elementwise_mul_jagged_out": (0,),
    "sll_array_jagged_bmm_jagged_out": (0, 1),
    "sll_jagged_jagged_bmm_jagged_out": (0, 1),
}
# one rounding of the output dtype on sums taken in another order (conformance/specs/fbgemm/sll/)
TOL = {torch.float16: (2**-8, 2e-2), torch.bfloat16: (2**-5, 1e-1)}
CAPPED_GRADS = ("sll_array_jagged_bmm_jagged_out", "sll_jagged_jagged_bmm_jagged_out")
# the schema names of each op's tensor arguments, in order
NAMES = {
    op: tuple(
        a.name
        for a in getattr(torch.ops.fbgemm, op).default._schema.arguments
        if str(a.type) == "Tensor"
    )
    for op in OPS
}
# the dtypes each tensor argument may have (its partners' unchanged)
ALLOWED = {
    ("sll_jagged_dense_elementwise_add", "x"): (*FLOATS, torch.int32, torch.int64),
    ("sll_jagged_dense_elementwise_add", "y"): (*FLOATS, torch.int32, torch.int64),
    ("sll_jagged_dense_elementwise_mul_jagged_out", "y"): (*FLOATS, torch.bool),
    ("sll_jagged_self_substraction_jagged_out", "a"): (*FLOATS, torch.int32, torch.int64),
}


def _draw_args(data: Any, op: str, grad: bool) -> tuple[list[Any], int]:
    least = 1 if op == "sll_dense_jagged_cat_jagged_out" else 0  # upstream's cat of no pieces
    b = data.draw(st.integers(least, 5), label="B")
    max_len = data.draw(st.integers(0, 6), label="L")
    low = max_len if grad and op in CAPPED_GRADS else 0
    cap = data.draw(st.integers(low, max_len + 2), label="max_seq_len")
    args = sll_args(
        op,
        b,
        max_len,
        data.draw(st.integers(1, 4), label="D"),
        seed=data.draw(st.integers(0, 2**16), label="seed"),
        dtype=data.draw(st.sampled_from(FLOATS), label="dtype"),
        index=data.draw(st.sampled_from(INDEX), label="index"),
        cap=cap,
    )
    return list(args), max_len


@fuzz_test("sll")
def test_fuzz_sll_valid(data: Any) -> Case:
    """Every op on valid input, its tensors in drawn layouts; gradients where upstream's are."""
    op = data.draw(st.sampled_from(OPS), label="op")
    grad = op in GRAD and data.draw(st.booleans(), label="grad")
    args, _ = _draw_args(data, op, grad)
    layouts = ("contiguous", "strided", "transposed", "offset")
    if not grad:  # no stride-0 leaf that requires grad
        layouts += ("expanded",)
    args = [in_layout(data, a, layouts) if isinstance(a, torch.Tensor) else a for a in args]
    dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
    rtol, atol = TOL.get(dtype, (None, None))
    return Case(f"fbgemm::{op}", tuple(args), grad=GRAD[op] if grad else (), rtol=rtol, atol=atol,
                label=f"valid {op}")  # fmt: skip


@fuzz_test("sll")
def test_fuzz_sll_invalid(data: Any) -> Case:
    """A non-tensor, a refused dtype, a tensor on another device."""
    op = data.draw(st.sampled_from(OPS), label="op")
    args, _ = _draw_args(data, op, False)
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    i = data.draw(st.sampled_from(tensors), label="argument")
    name = NAMES[op][tensors.index(i)]
    how = data.draw(st.sampled_from(("object", "dtype", "device")), label="how")
    t = args[i]
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        allowed = ALLOWED.get((op, name), INDEX if not t.is_floating_point() else FLOATS)
        if op == "sll_dense_jagged_cat_jagged_out" and name != "a_offsets":
            allowed = (t.dtype,)  # any dtype, one for a and b
        args[i] = t.to(other_dtype(data, allowed))
    else:
        args[i] = On(t, data.draw(st.sampled_from(("cpu", "npu:1")), label="device"))
    return Case(f"fbgemm::{op}", tuple(args), expect="error", names=NAMES[op], label=how)


@fuzz_test("sll")
def test_fuzz_sll_bad_offsets(data: Any) -> Case:
    """Broken offsets: upstream's result or a clear error naming the offsets (or a partner)."""
    op = data.draw(st.sampled_from(OPS), label="op")
    args, _ = _draw_args(data, op, False)
    # the tensor arguments come first in every sll schema: position i is NAMES[op][i]
    offsets = [i for i, name in enumerate(NAMES[op]) if "offsets" in name]
    i = data.draw(st.sampled_from(offsets), label="offsets")
    total = int(args[i][-1]) if args[i].numel() else 0
    how, args[i] = bad_offsets(data, args[i], total)
    return Case(f"fbgemm::{op}", tuple(args), expect="equal_or_error", names=NAMES[op], label=how)
