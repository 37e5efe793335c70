"""Hostile-input fuzz of the sll_attention family (fbgemm_npu/native/fbgemm/sll_attention/).

Valid calls (``fbgemm_npu.testing.sll_attention_fuzz.args``: empty batches and sequences, rows
after the last sequence, sequences past ``max_seq_len`` where the op takes them, int32 / int64
offsets, every float dtype the op takes, integers for the padding op) in drawn layouts equal
upstream's CPU kernels, or the float64 references where upstream has no contract (the row
softmax, the dense attention past ``max_seq_len``, the multi-head attention); gradients too.
A non-tensor, a refused dtype or rank, a tensor on another device get a clear error naming the
op and an argument; broken offsets (decreasing, negative, past the end, not from zero,
int32-wrapped, float) give upstream's result or a clear error, never a crash or a wrong result.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import bad_offsets, in_layout, not_a_tensor, other_dtype
from fbgemm_npu.testing.sll_attention_fuzz import OPS, args

HALF = (torch.float32, torch.float16, torch.bfloat16)
FLOATS = (*HALF, torch.float64)
INDEX = (torch.int32, torch.int64)
DTYPES = {  # the dtypes each op's data takes
    "sll_jagged_softmax": HALF,
    "sll_jagged2_softmax": FLOATS,
    "sll_jagged2_to_padded_dense": (*FLOATS, torch.int32, torch.int64),
    "sll_jagged_dense_flash_attention": HALF,
    "sll_jagged_flash_attention_basic": FLOATS,
    "sll_multi_head_jagged_flash_attention": HALF,
}
GRAD = {
    "sll_jagged_softmax": (0,),
    "sll_jagged2_softmax": (0,),
    "sll_jagged2_to_padded_dense": (0,),
    "sll_jagged_dense_flash_attention": (0, 1, 2, 3),
    "sll_jagged_flash_attention_basic": (0, 1, 2),
    "sll_multi_head_jagged_flash_attention": (0, 1, 2),
}
SOFT = {torch.float32: (1e-5, 1e-5), torch.float16: (2**-8, 5e-3), torch.bfloat16: (2**-5, 4e-2)}
MATMUL = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}
MATMUL[torch.float64] = SOFT[torch.float64] = (1e-7, 1e-9)
REF = "fbgemm_npu.testing.sll_attention_fuzz:"
NAMES = {
    op: tuple(
        a.name
        for a in getattr(torch.ops.fbgemm, op).default._schema.arguments
        if str(a.type) == "Tensor"
    )
    for op in OPS
}
EXTRA_ROWS = (
    "sll_jagged_softmax",
    "sll_jagged2_softmax",
    "sll_jagged2_to_padded_dense",
    "sll_multi_head_jagged_flash_attention",
    "sll_jagged_dense_flash_attention",
)


def _draw(data: Any, op: str, dtype: torch.dtype | None = None) -> list[Any]:
    b = data.draw(st.integers(0, 4), label="B")
    lengths = data.draw(st.lists(st.integers(0, 5), min_size=b, max_size=b), label="lengths")
    return args(
        op,
        lengths,
        data.draw(st.integers(0, 2**16), label="seed"),
        dtype or data.draw(st.sampled_from(DTYPES[op]), label="dtype"),
        data.draw(st.sampled_from(INDEX), label="index"),
        data.draw(st.sampled_from((0, 0, 2, 3)), label="extra") if op in EXTRA_ROWS else 0,
        data.draw(st.integers(-1 if op == "sll_jagged_softmax" else 0, 6), label="max_seq_len"),
        (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))),
        data.draw(st.booleans(), label="flag"),
    )


def _oracle(op: str, a: list[Any]) -> str | None:
    if op == "sll_jagged_softmax":
        return REF + "softmax_oracle"
    if op == "sll_multi_head_jagged_flash_attention":
        return REF + "multi_head_oracle"
    if op == "sll_jagged_dense_flash_attention" and bool((a[4].diff() > a[5]).any()):
        return REF + "dense_oracle"  # a sequence past max_seq_len: upstream's rows uninitialised
    return None


@fuzz_test("sll_attention")
def test_fuzz_sll_attention_valid(data: Any) -> Case:
    """Every op on valid input, its tensors in drawn layouts; gradients (float inputs)."""
    op = data.draw(st.sampled_from(OPS), label="op")
    a = _draw(data, op)
    dtype = a[0].dtype
    grad = dtype.is_floating_point and data.draw(st.booleans(), label="grad")
    if grad and op == "sll_jagged2_to_padded_dense" and int(a[1][-1]) == 0:
        grad = False  # upstream's output has no grad_fn where no matrix is copied
    layouts = ("contiguous", "strided", "transposed", "offset") + (() if grad else ("expanded",))
    a = [in_layout(data, t, layouts) if isinstance(t, torch.Tensor) else t for t in a]
    tol = (SOFT if "softmax" in op else MATMUL).get(dtype, (0.0, 0.0))
    if op == "sll_jagged2_to_padded_dense":
        tol = (0.0, 0.0)
    return Case(f"fbgemm::{op}", tuple(a), oracle=_oracle(op, a), grad=GRAD[op] if grad else (),
                rtol=tol[0], atol=tol[1], label=f"valid {op}")  # fmt: skip


@fuzz_test("sll_attention")
def test_fuzz_sll_attention_invalid(data: Any) -> Case:
    """A non-tensor, a refused dtype or rank, a tensor on another device."""
    op = data.draw(st.sampled_from(OPS), label="op")
    a = _draw(data, op)
    tensors = [i for i, t in enumerate(a) if isinstance(t, torch.Tensor)]
    i = data.draw(st.sampled_from(tensors), label="argument")
    name = NAMES[op][tensors.index(i)]
    how = data.draw(st.sampled_from(("object", "dtype", "rank", "device")), label="how")
    t = a[i]
    if how == "object":
        a[i] = not_a_tensor(data)
    elif how == "dtype":
        offsets = "offsets" in name
        allowed = INDEX if offsets else DTYPES[op]
        if not offsets and op == "sll_jagged2_to_padded_dense":
            # values: upstream's plain copy takes any of them; float64 offsets are refused
            i, name, offsets, allowed = 1, "offsets", True, INDEX
            t = a[1]
        if not offsets and i > 0 and op != "sll_jagged2_to_padded_dense":
            allowed = (a[0].dtype,)  # the partners of the data: its dtype
        if op == "sll_jagged_dense_flash_attention" and i in (1, 2, 3):
            allowed = FLOATS if i < 3 else HALF  # cast to q's dtype (budgets' "cast" path)
        a[i] = t.to(other_dtype(data, allowed))
        if op == "sll_jagged_softmax" and i == 0 and a[i].dtype == torch.float64:
            # upstream's kernel runs (and refuses float64) only with a batch row and columns
            oracle = REF + "softmax_oracle"
            return Case(f"fbgemm::{op}", tuple(a), expect="equal_or_error", oracle=oracle,
                        names=("x",), label="float64 x")  # fmt: skip
    elif how == "rank":
        a[i] = t.reshape(-1) if t.dim() > 1 else t.view(1, -1)
        if op == "sll_jagged2_to_padded_dense" and i == 0:
            a[i] = t.view(1, -1)  # values: 1-D only (upstream's flat copy)
    else:
        a[i] = On(t, data.draw(st.sampled_from(("cpu", "npu:1")), label="device"))
        if len(tensors) == 1:  # pragma: no cover - every op has two tensors or more
            return Case(f"fbgemm::{op}", tuple(a), label="valid elsewhere")
    return Case(f"fbgemm::{op}", tuple(a), expect="error", names=NAMES[op], label=how)


@fuzz_test("sll_attention")
def test_fuzz_sll_attention_bad_offsets(data: Any) -> Case:
    """Broken offsets: upstream's result or a clear error naming an argument."""
    op = data.draw(st.sampled_from(OPS), label="op")
    a = _draw(data, op, torch.float32)
    offsets = [i for i, name in enumerate(NAMES[op]) if "offsets" in name]
    i = data.draw(st.sampled_from(offsets), label="offsets")
    total = int(a[i][-1]) if a[i].numel() else 0
    how, a[i] = bad_offsets(data, a[i], total)
    return Case(f"fbgemm::{op}", tuple(a), expect="equal_or_error", oracle=_oracle(op, a),
                names=NAMES[op], label=how)  # fmt: skip
