"""Specs for ``jagged_jagged_bmm`` and ``jagged_dense_bmm`` (+ their ``_forward``): bmm.py.

Oracle: upstream's CPU kernels (their results are fully written: zeros where no row is read),
gradients of upstream's autograd.  Ours forms the products in a ``bmm`` and sums them in
another order: one rounding of the output dtype relative to the result (``rtol`` 1e-5 float32,
``2**-8`` float16, ``2**-5`` bfloat16), ``atol`` for sums that cancel.

Inputs: B = 0..4, row lengths 0..6 against max_L = -1..5 (empty rows, truncation),
M, K = 0..3, every float dtype, int32 / int64 offsets, inputs contiguous, transposed or
sliced; y_values rows past the last offset (the forward ops only: upstream's autograd fails
on them); float64 raises as upstream's.  Budgets: the ops' entries (no path).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.jagged.inputs import FLOATS
from conformance.strategies import with_layout

F = torch.ops.fbgemm
ROUNDING = Compare(
    {
        torch.float32: Tol(rtol=1e-5, atol=1e-5),
        torch.float16: Tol(rtol=2**-8, atol=1e-2),
        torch.bfloat16: Tol(rtol=2**-5, atol=1e-1),
    }
)


@st.composite
def bmm_inputs(draw: st.DrawFn, dense: bool, extra_rows: bool = True) -> dict[str, Any]:
    b, m, k = draw(st.integers(0, 4)), draw(st.integers(0, 3)), draw(st.integers(0, 3))
    offs = [0]
    for _ in range(b):
        offs.append(offs[-1] + draw(st.integers(0, 6)))
    dtype = draw(st.sampled_from(list(FLOATS)))
    seed = draw(st.integers(0, 2**31 - 1))
    layout = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    x_offsets = torch.tensor(offs, dtype=draw(st.sampled_from([torch.int32, torch.int64])))
    x = with_layout((offs[-1], m), dtype, "uniform", seed, layout)
    max_l = draw(st.integers(-1, 5))
    if dense:
        y = with_layout((b, m, k), dtype, "uniform", seed + 1, layout)
        return {"x_values": x, "x_offsets": x_offsets, "y": y, "max_L": max_l}
    # more y rows than x rows: upstream's autograd fails (it returns the other input's rows)
    n_y = offs[-1] + (draw(st.sampled_from([0, 0, 2])) if extra_rows else 0)
    y = with_layout((n_y, k), dtype, "uniform", seed + 1, layout)
    return {"x_values": x, "y_values": y, "x_offsets": x_offsets, "max_L": max_l}


_O = torch.tensor([0, 3, 3, 7])
_JJ_EXAMPLES = (
    {"x_values": torch.ones(7, 2), "y_values": torch.ones(7, 3), "x_offsets": _O, "max_L": 2},
    {"x_values": torch.ones(0, 2), "y_values": torch.ones(0, 3), "x_offsets": _O[:1], "max_L": 2},
    {
        "x_values": torch.ones(7, 2).double(),
        "y_values": torch.ones(7, 3).double(),
        "x_offsets": _O,
        "max_L": 2,
    },
)
_JD_EXAMPLES = (
    {"x_values": torch.ones(7, 2), "x_offsets": _O, "y": torch.ones(3, 2, 4), "max_L": 2},
    {"x_values": torch.ones(0, 2), "x_offsets": _O[:1], "y": torch.ones(0, 2, 4), "max_L": 2},
    {
        "x_values": torch.ones(7, 2).double(),
        "x_offsets": _O,
        "y": torch.ones(3, 2, 4).double(),
        "max_L": 2,
    },
)


def _spec(name: str, dense: bool, examples: tuple, backward: bool) -> OpSpec:
    return OpSpec(
        name,
        getattr(F, name),
        bmm_inputs(dense, extra_rows=not backward),
        ROUNDING,
        BudgetUse(),
        backward=backward,
        grad_inputs=(("x_values", "y") if dense else ("x_values", "y_values")) if backward else (),
        examples=examples,
        notes="same products as upstream, summed in another order: one output rounding",
    )


SPECS = [
    _spec("jagged_jagged_bmm", False, _JJ_EXAMPLES, True),
    _spec("jagged_jagged_bmm_forward", False, _JJ_EXAMPLES, False),
    _spec("jagged_dense_bmm", True, _JD_EXAMPLES, True),
    _spec("jagged_dense_bmm_forward", True, _JD_EXAMPLES, False),
]
