"""Specs for the jagged-dense elementwise ops.

``jagged_dense_elementwise_add`` (dense output), ``_mul``, ``_add_jagged_output`` and
``jagged_dense_dense_elementwise_add_jagged_output``, forward and (float inputs) backward (which
runs ``jagged_dense_elementwise_mul_backward``); the loop reference of upstream's walk.

Oracle: upstream's CPU kernels.  The elementwise ops do one add / multiply per element in the
output dtype, as ours do, so they are compared exactly.  bfloat16 ``mul`` gradients use this
module's float64 reference (upstream's CPU ``jagged_dense_elementwise_mul_backward`` has no
bfloat16 kernel, CUDA's has): ours rounds the gradient to bfloat16, then the product, the
reference neither: ``rtol 2**-7``.

Drawn inputs: 1-3 jagged dims, B = 0..5, lengths 0..6 against max lengths 0..4 (truncation and
empty rows), D = 0..3, every dtype upstream takes, int32 / int64 offsets, transposed / sliced
layouts, y broadcast over the batch or inner dim (``add``), mixed dtypes (promoted as torch does).
``x_values`` has exactly ``offsets[-1][-1]`` rows for the jagged-output ops: upstream CPU raises
otherwise, CUDA and ours leave rows after the last offset uncovered (tests/fbgemm/jagged/).

Budgets: the op's entry, on its path for the number of jagged dims, a ``y`` no view flattens to
rows (copied once) and, for ``dense_dense``, ``y_0`` and ``y_1`` of two dtypes (two scatters;
``two_dtypes_strided_y`` when either is strided, which counts both copied).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.jagged.inputs import (
    DTYPES,
    EXACT,
    OFFSETS,
    int64_values,
    jagged_inputs,
    real,
    rows_need_copy,
)
from conformance.strategies import with_layout
from fbgemm_npu.testing.jagged_inputs import dims_path

F = torch.ops.fbgemm
_O = OFFSETS


# ---- references (float64; independent of fbgemm_npu) ---------------------------------------------


def walk(offsets: list[torch.Tensor], lengths: list[int]) -> tuple[list[int], list[int]]:
    """(flat dense position, value row) of every non-padding position, by upstream's walk."""
    offs = [o.tolist() for o in offsets]
    pos, rows = [], []
    b = len(offs[0]) - 1
    strides = [1] * (len(lengths) + 1)
    for d in range(len(lengths) - 1, -1, -1):
        strides[d] = strides[d + 1] * lengths[d]

    def visit(level: int, r: int, flat: int) -> None:
        if level == len(lengths):
            pos.append(flat)
            rows.append(r)
            return
        begin, end = offs[level][r], offs[level][r + 1]
        for j in range(min(end - begin, lengths[level])):
            visit(level + 1, begin + j, flat + j * strides[level + 1])

    for i in range(b):
        visit(0, i, i * strides[0])
    return pos, rows


def to_jagged_reference(y: torch.Tensor, offsets: list[torch.Tensor], total: int) -> torch.Tensor:
    pos, rows = walk(offsets, list(y.shape[1:-1]))
    src = y.reshape(math.prod(y.shape[:-1]), y.size(-1))[torch.tensor(pos, dtype=torch.int64)]
    out = y.new_zeros((total, y.size(-1)))
    return out.index_put((torch.tensor(rows, dtype=torch.int64),), src)


def mul_reference(x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor) -> Any:
    x, yy = x_values.double(), y.double()
    return x * to_jagged_reference(yy, x_offsets, x.size(0)), list(x_offsets)


# ---- inputs --------------------------------------------------------------------------------


def _fill(dtype: torch.dtype) -> str:
    return "small_ints" if dtype.is_floating_point else "signed"


def _dense(draw: st.DrawFn, shape: tuple[int, ...], dtype: torch.dtype) -> Any:
    layouts = ["contiguous", "sliced"] + (["transposed"] if len(shape) == 3 else [])
    layout = draw(st.sampled_from(layouts))
    return with_layout(shape, dtype, _fill(dtype), draw(st.integers(0, 2**31 - 1)), layout)


@st.composite
def elementwise_inputs(
    draw: st.DrawFn, name: str, dtypes: tuple = DTYPES, mixed: bool = True
) -> dict[str, Any]:
    """``x_values``, ``x_offsets`` and ``y`` (``y_0``, ``y_1``) of one op."""
    dense_out = name == "jagged_dense_elementwise_add"
    args = draw(jagged_inputs((1, 2, 3), dtypes, rank="2", decreasing=dense_out, tail=dense_out))
    x, offsets = real(args["values"]), args["offsets"]
    b = real(offsets[0]).numel() - 1
    d = x.size(1)
    mixed = mixed and draw(st.integers(0, 4)) == 0
    ydtype = draw(st.sampled_from(list(dtypes))) if mixed else x.dtype
    shape = (b, *args["max_lengths"], d)
    if dense_out and draw(st.integers(0, 4)) == 0:  # y broadcast over batch or inner dim
        shape = (1, *shape[1:]) if draw(st.booleans()) else (*shape[:-1], 1)
    out = {"x_values": args["values"], "x_offsets": offsets}
    if name == "jagged_dense_dense_elementwise_add_jagged_output":
        out["y_0"] = _dense(draw, shape, ydtype)
        out["y_1"] = _dense(draw, shape, draw(st.sampled_from([ydtype, x.dtype])))
    else:
        out["y"] = _dense(draw, shape, ydtype)
    return out


def _budget_of(name: str):  # noqa: ANN202
    def budget(
        x_values: Any, x_offsets: list[Any], y: Any = None, y_0: Any = None, y_1: Any = None
    ) -> BudgetUse:
        k = len(x_offsets)
        if name == "jagged_dense_elementwise_add":  # a strided or broadcast y costs nothing more
            return BudgetUse(path=dims_path(k, *int64_values(x_values)))
        if y_1 is None:
            return BudgetUse(path=dims_path(k, *(("strided_y",) if rows_need_copy(y) else ())))
        y0, y1 = real(y_0), real(y_1)
        if y0.dtype == y1.dtype and y0.shape == y1.shape:  # stacked: a strided y costs nothing
            return BudgetUse(path=dims_path(k))
        # scattered one by one, a strided y copied: the path counts both strided (one: 1 fewer)
        strided = ("strided_y",) if rows_need_copy(y0) or rows_need_copy(y1) else ()
        return BudgetUse(path=dims_path(k, "two_dtypes", *strided))

    return budget


# ---- edge cases ----------------------------------------------------------------------------

_X = torch.arange(1.0, 6.0).view(5, 1)
_Y = torch.full((3, 2, 1), 100.0)
_EXAMPLES: dict[str, tuple[dict[str, Any], ...]] = {
    "jagged_dense_elementwise_add": (
        {"x_values": _X, "x_offsets": [_O], "y": torch.zeros(3, 2, 2)},  # D broadcast
        {"x_values": _X, "x_offsets": [_O], "y": torch.full((1, 2, 1), 100.0)},  # B broadcast
        {"x_values": _X, "x_offsets": [_O], "y": _Y.half()},  # mixed: float32 out
        {"x_values": _X, "x_offsets": [torch.tensor([0, 3, 2, 5])], "y": _Y},  # decreasing
        {"x_values": _X, "x_offsets": [_O], "y": torch.zeros(3, 2)},  # rank: raises
    ),
    "jagged_dense_elementwise_mul": (
        {
            "x_values": torch.tensor([1.0, 2, 3, 4, float("inf")]).view(5, 1),
            "x_offsets": [_O],
            "y": _Y,
        },  # inf * uncovered 0 = nan, as upstream
        {"x_values": _X, "x_offsets": [_O], "y": _Y.half()},
        {
            "x_values": torch.zeros(0, 2),
            "x_offsets": [torch.tensor([0])],
            "y": torch.zeros(0, 3, 2),
        },
    ),
    "jagged_dense_elementwise_add_jagged_output": (
        {"x_values": _X, "x_offsets": [_O], "y": _Y},
        {"x_values": _X, "x_offsets": [_O], "y": torch.zeros(3, 2, 2) + 7},  # D broadcast
        {"x_values": _X.long(), "x_offsets": [_O.int()], "y": _Y.long()},
    ),
    "jagged_dense_dense_elementwise_add_jagged_output": (
        {"x_values": _X, "x_offsets": [_O], "y_0": _Y, "y_1": _Y * 2},
        {"x_values": _X, "x_offsets": [_O], "y_0": _Y, "y_1": _Y.half()},
    ),
}


# ---- specs ---------------------------------------------------------------------------------


def _specs(name: str) -> list[OpSpec]:
    grads = ("x_values", "y_0", "y_1") if "dense_dense" in name else ("x_values", "y")
    op, budget = getattr(F, name), _budget_of(name)
    half_grads = elementwise_inputs(name, (torch.float32, torch.float16), "mul" not in name)
    specs = [
        OpSpec(name, op, elementwise_inputs(name), EXACT, budget, examples=_EXAMPLES[name]),
        OpSpec(f"{name}.backward", op, half_grads, EXACT, budget, backward=True, grad_inputs=grads),
    ]
    if name == "jagged_dense_elementwise_mul":
        specs.append(
            OpSpec(
                f"{name}.backward[bfloat16]",
                op,
                elementwise_inputs(name, (torch.bfloat16,), False),
                Compare({torch.bfloat16: Tol(2**-7, 0.0)}),
                budget,
                reference=mul_reference,
                backward=True,
                grad_inputs=grads,
                notes="CUDA-only backward dtype: float64 reference",
            )
        )
    return specs


SPECS = [spec for name in _EXAMPLES for spec in _specs(name)]
