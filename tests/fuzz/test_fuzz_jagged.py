"""Hostile-input fuzz of the jagged family (fbgemm_npu/native/fbgemm/jagged/).

Valid calls of every op (jagged_to_padded_dense and its forward / backward, jagged_1d/2d_to_dense,
dense_to_jagged and its forward, the stacked ops, the jagged-dense elementwise ops and
batched_dense_vec_jagged_2d_mul with its forward / backward), in every layout (strided,
transposed, stride 0, storage offsets), dtype and size (an empty batch, empty rows, truncated
rows, no inner dim, D = 0), on npu:0 or npu:1, equal upstream's CPU kernels, gradients included
where upstream has autograd; the jagged-output ops given value rows past the last offset (which
upstream's CPU kernels refuse) are judged by the references of
``fbgemm_npu/testing/jagged_fuzz.py``.  Every hostile category of the issue gets a clear error
naming the op and the argument, or (where upstream has no contract: broken offsets that still
read and write inside the tensors) upstream's result: ``fbgemm_npu/testing/jagged_fuzz_hostile.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout
from fbgemm_npu.testing.jagged_fuzz import (
    call_write_call_args,
    elementwise_call,
    laid_out,
    matmul_call,
    stacked_call,
    to_dense_call,
    to_jagged_call,
)
from fbgemm_npu.testing.jagged_fuzz_hostile import hostile_case

FAMILY = "jagged"
PROGRAM = "fbgemm_npu.testing.jagged_fuzz:call_write_call"
# float32 sums of a handful of products of multiples of 1/8 are exact; the half types round
HALF_TOL = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 5e-2)}


def _placed(data: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict, str]:
    """The call's tensors in drawn layouts, sometimes all on npu:1; and the label's suffix."""
    args, kwargs = tuple(laid_out(data, list(args))), laid_out(data, dict(kwargs))
    if data.draw(st.integers(0, 5), label="on npu:1") > 0:
        return args, kwargs, ""

    def move(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return On(v, "npu:1")
        return [move(t) for t in v] if isinstance(v, list) else v

    return tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}, " on npu:1"


def _float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


@fuzz_test(FAMILY)
def test_fuzz_jagged_to_dense_valid(data: Any) -> Case:
    """jagged_to_padded_dense (+ _forward), jagged_1d/2d_to_dense, and d/d(values)."""
    (op, args, kwargs), j = to_dense_call(data)
    grad = (0,) if _float(j.values) else ()
    args, kwargs, where = _placed(data, args, kwargs)
    pad = kwargs.get("padding_value", 0.0)
    if j.values.numel() == 0 and j.values.dtype == torch.float16 and abs(pad) > 65504:
        # no values: upstream fills the output through a checked cast, which refuses this one
        return Case(op, args, kwargs, expect="error", names=("padding_value",), label="valid")
    return Case(op, args, kwargs, grad=grad, label=f"valid {j.values.dtype}{where}")


@fuzz_test(FAMILY)
def test_fuzz_jagged_to_jagged_valid(data: Any) -> Case:
    """dense_to_jagged (+ _forward) and jagged_to_padded_dense_backward, d/d(dense)."""
    (op, args, kwargs), _ = to_jagged_call(data)
    grad = (0,) if _float(args[0]) and not op.endswith("_backward") else ()
    args, kwargs, where = _placed(data, args, kwargs)
    return Case(op, args, kwargs, grad=grad, label=f"valid {op.rpartition('_')[2]}{where}")


# the elementwise ops upstream differentiates (the _forward / _backward ones it does not)
_AUTOGRAD = {
    "fbgemm::jagged_dense_elementwise_add": (0, 2),
    "fbgemm::jagged_dense_elementwise_mul": (0, 2),
    "fbgemm::jagged_dense_elementwise_add_jagged_output": (0, 2),
    "fbgemm::jagged_dense_dense_elementwise_add_jagged_output": (0, 2, 3),
}


@fuzz_test(FAMILY)
def test_fuzz_jagged_elementwise_valid(data: Any) -> Case:
    """The jagged-dense elementwise ops, mixed dtypes included, and their gradients."""
    (op, args, kwargs), j, oracle = elementwise_call(data)
    floats = all(_float(a) for a in args if isinstance(a, torch.Tensor))
    grad = _AUTOGRAD.get(op, ()) if floats and oracle is None else ()
    if op.endswith("_mul") and (
        torch.bfloat16 in (args[0].dtype, args[2].dtype) or args[0].dtype != args[2].dtype
    ):
        # upstream's CPU mul backward has no bfloat16 kernel (its CUDA one has) and refuses
        # mixed dtypes (ours gives gradients in the promoted dtype)
        grad = ()
    if "dense_dense" in op and args[2] is args[3]:
        grad = grad[:2]  # y_1 is y_0: one tensor, one gradient
    args, kwargs, where = _placed(data, args, kwargs)
    label = f"valid{' past the offsets' if oracle else ''}{where}"
    return Case(op, args, kwargs, oracle=oracle, grad=grad, label=label)


@fuzz_test(FAMILY)
def test_fuzz_jagged_matmul_valid(data: Any) -> Case:
    """batched_dense_vec_jagged_2d_mul (+ _forward, _backward), d/dv and d/d(a_values)."""
    op, args, kwargs = matmul_call(data)
    rtol, atol = HALF_TOL.get(args[0].dtype, (None, None))
    grad = (0, 1) if op.endswith("_mul") else ()
    args, kwargs, where = _placed(data, args, kwargs)
    return Case(op, args, kwargs, grad=grad, rtol=rtol, atol=atol, label=f"valid{where}")


@fuzz_test(FAMILY)
def test_fuzz_jagged_stacked_valid(data: Any) -> Case:
    """stacked_jagged_1d/2d_to_dense, d/d(values) for 2-D; slices anywhere in the values (a
    slice is a view: reads may run past it, and past the values raise)."""
    op, args, kwargs, shifted = stacked_call(data)
    grad = (0,) if "2d" in op and _float(args[0]) else ()
    args, kwargs, where = _placed(data, args, kwargs)
    if shifted:  # no gradient: upstream's CPU backward writes past a slice read past its end
        expect = {"expect": "equal_or_error", "names": ("lengths", "offset_per_key")}
        return Case(op, args, kwargs, label=f"shifted slices{where}", **expect)
    return Case(op, args, kwargs, grad=grad, label=f"valid{where}")


@fuzz_test(FAMILY)
def test_fuzz_jagged_hostile(data: Any) -> Case:
    """Any jagged op, one hostile argument (fbgemm_npu/testing/jagged_fuzz_hostile.py)."""
    return hostile_case(data)


@fuzz_test(FAMILY)
def test_fuzz_jagged_offsets_written_between_calls(data: Any) -> Case:
    """A call, the offsets written in place, a second call: each equals upstream's on the data
    of its moment (no result is cached on the tensors' identity)."""
    values, offsets, lengths, new_last, y = call_write_call_args(data)
    written = ("contiguous", "strided", "transposed", "offset")  # no stride 0: it is written to
    offsets = [in_layout(data, o, written) for o in offsets]
    args = (laid_out(data, values), offsets, lengths, new_last, laid_out(data, y))
    return Case(PROGRAM, args, label="offsets written between calls", op_name=PROGRAM)
