"""Specs for the jagged-dense elementwise ops and ``batched_dense_vec_jagged_2d_mul``.

``jagged_dense_elementwise_add`` (dense output), ``_mul``, ``_add_jagged_output``,
``jagged_dense_dense_elementwise_add_jagged_output``, ``jagged_dense_elementwise_mul_backward``
and ``batched_dense_vec_jagged_2d_mul``, forward and (float inputs) backward.

Oracle: upstream's CPU kernels.  The elementwise ops do one add / multiply per element in the
output dtype, as ours do, so they are compared exactly.  bfloat16 ``mul`` gradients use this
module's float64 reference (upstream's CPU ``jagged_dense_elementwise_mul_backward`` has no
bfloat16 kernel, CUDA's has): ours rounds the gradient to bfloat16, then the product, the
reference neither: ``rtol 2**-7``.
``batched_dense_vec_jagged_2d_mul`` forms the same rounded products as upstream and sums them in
float32 in another order: one rounding of the output dtype relative to the result (``rtol``
``1e-6`` float32, ``2**-10`` float16, ``2**-7`` bfloat16), ``atol`` for sums that cancel
(``1e-5``, ``1e-4``, ``1e-3``).

Drawn inputs: 1-3 jagged dims, B = 0..5, lengths 0..6 against max lengths 0..4 (truncation and
empty rows), D = 0..3, every dtype upstream takes, int32 / int64 offsets, transposed / sliced
layouts, y broadcast over the batch or inner dim (``add``), mixed dtypes (promoted as torch does).
``x_values`` has exactly ``offsets[-1][-1]`` rows for the jagged-output ops: upstream CPU raises
otherwise, CUDA and ours leave rows after the last offset uncovered (``tests/test_jagged.py``).

Budgets (OPS.md: 10): ``add`` 12, ``mul`` / ``add_jagged_output`` 12, ``dense_dense`` 14 (24 with
mixed y dtypes), ``batched_dense_vec_jagged_2d_mul`` 12 for one jagged dim; 9 more per further dim
(and 1 ``cat``); the data check is 4-5 of these (see ``native/jagged_elementwise.py``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, Compare, OpSpec, Tol
from conformance.specs.jagged import DTYPES, FLOATS, dense_launches, jagged_inputs, real
from conformance.strategies import with_layout

F = torch.ops.fbgemm
EXACT = Compare({d: Tol(0.0, 0.0) for d in (*FLOATS, torch.float64)})
ROUNDING = Compare(
    {
        torch.float32: Tol(rtol=1e-6, atol=1e-5),
        torch.float16: Tol(rtol=2**-10, atol=1e-4),
        torch.bfloat16: Tol(rtol=2**-7, atol=1e-3),
    }
)
_O = torch.tensor([0, 2, 2, 5])


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
def elementwise_inputs(draw: st.DrawFn, name: str, dtypes: tuple = DTYPES,
                       mixed: bool = True) -> dict[str, Any]:  # fmt: skip
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
    def budget(x_values: Any, x_offsets: list[Any], y: Any = None, y_0: Any = None,
               y_1: Any = None) -> Budget:  # fmt: skip
        k, yy = len(x_offsets), real(y if y is not None else y_0)
        if yy.numel() == 0:
            return Budget(4, 0)  # zeros / fills and the elementwise ops on empty tensors
        if name == "jagged_dense_elementwise_add":
            return Budget(dense_launches(k, write=False) + 1, 0)

        def write(t: Any) -> int:  # to_jagged of t, plus a copy when t is not contiguous
            return dense_launches(k, write=True) + int(not real(t).is_contiguous())

        if y_1 is None:
            return Budget(write(yy) + 1, 0)
        if real(y_1).dtype != yy.dtype:  # two scatters
            return Budget(write(yy) + write(y_1) + 2, 0)
        return Budget(1 + dense_launches(k, write=True) + 2, 0)  # stack, one scatter, two adds

    return budget


@st.composite
def bdvj_inputs(draw: st.DrawFn, dtypes: tuple = FLOATS) -> dict[str, Any]:
    b, h, d, length = (draw(st.integers(0, 4)), draw(st.integers(1, 3)),
                       draw(st.integers(0, 3)), draw(st.integers(0, 4)))  # fmt: skip
    lens = [draw(st.integers(0, 6)) for _ in range(b)]
    offs = [0]
    for n in lens:
        offs.append(offs[-1] + n)
    dtype = draw(st.sampled_from(list(dtypes)))
    fill = draw(st.sampled_from(["small_ints", "uniform"]))
    seed = draw(st.integers(0, 2**31 - 1))
    layout = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    return {
        "v": with_layout((b * h, length), dtype, fill, seed, layout),
        "a_values": with_layout((offs[-1], h * d), dtype, fill, seed + 1, layout),
        "a_offsets": torch.tensor(offs, dtype=draw(st.sampled_from([torch.int32, torch.int64]))),
    }


def bdvj_budget(v: Any, a_values: Any, a_offsets: Any) -> Budget:
    vv, a = real(v), real(a_values)
    b = a_offsets.numel() - 1
    if b == 0 or vv.size(1) == 0 or a.size(1) // max(1, vv.size(0) // b) == 0:
        return Budget(1, 0)
    return Budget(12 + int(not vv.is_contiguous()), 0)


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
        },  # inf * uncovered 0 = nan, as upstream  # fmt: skip
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
    specs = [
        OpSpec(name, getattr(F, name), elementwise_inputs(name), EXACT, _budget_of(name),
               examples=_EXAMPLES[name]),
        OpSpec(f"{name}.backward", getattr(F, name),
               elementwise_inputs(name, (torch.float32, torch.float16), "mul" not in name),
               EXACT, _budget_of(name),
               backward=True, grad_inputs=grads),
    ]  # fmt: skip
    if name == "jagged_dense_elementwise_mul":
        specs.append(OpSpec(f"{name}.backward[bfloat16]", getattr(F, name),
                            elementwise_inputs(name, (torch.bfloat16,), False),
                            Compare({torch.bfloat16: Tol(2**-7, 0.0)}), _budget_of(name),
                            reference=mul_reference, backward=True, grad_inputs=grads,
                            notes="CUDA-only backward dtype: float64 reference"))  # fmt: skip
    return specs


_AO = torch.tensor([0, 3, 3, 7])
_BDVJ_EXAMPLES = (
    {"v": torch.ones(6, 4), "a_values": torch.ones(7, 6), "a_offsets": _AO},
    {"v": torch.ones(0, 4), "a_values": torch.ones(7, 6), "a_offsets": torch.tensor([0])},
    {"v": torch.ones(5, 4), "a_values": torch.ones(7, 6), "a_offsets": _AO},  # B | v rows: raises
    {"v": torch.ones(6, 4).double(), "a_values": torch.ones(7, 6).double(), "a_offsets": _AO},
)

SPECS = [
    *[spec for name in _EXAMPLES for spec in _specs(name)],
    OpSpec(
        "batched_dense_vec_jagged_2d_mul",
        F.batched_dense_vec_jagged_2d_mul,
        bdvj_inputs(),
        ROUNDING,
        bdvj_budget,
        backward=True,
        grad_inputs=("v", "a_values"),
        examples=_BDVJ_EXAMPLES,
        notes="same products as upstream, summed in another order: one output rounding",
    ),
]
