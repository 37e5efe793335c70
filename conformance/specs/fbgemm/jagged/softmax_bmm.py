"""Specs for ``jagged_softmax`` (+ ``_forward``, ``_backward``): softmax_bmm.py.

Oracle: a float64 reference (one ``softmax`` per row of the batch, over its first
``min(len_b, max_L)`` rows), since upstream's CPU kernel leaves every other row of its result
uninitialised (``empty``) and ours zeroes it; upstream still runs for errors, structure, shapes
and dtypes.  The forward rounds once to the output dtype; the backward rounds the output
it is given, the products' sum and the difference (a sum that cancels): ``rtol`` 1e-5
float32, ``2**-8`` float16, ``2**-5`` bfloat16, ``atol`` 1e-5 / 5e-3 / 4e-2 for the
cancelling sums (upstream's own half backward is 7.5e-4 / 4.4e-3 from float64 on N(0, 1)
data, ours 8.7e-4 / 5.2e-3: its ``acc_type`` sum is float32, ours rounds the products to
the dtype first).

Inputs: B = 0..4, row lengths 0..6 against max_L = -1..5 (empty rows, truncation, max_L < 0
reads no row), D = 0..3, every float dtype, int32 / int64 offsets, values contiguous,
transposed or sliced; values longer than the last offset; float64 and int32 values raise as
upstream's.  Budgets: the ops' entries (no path).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.jagged.inputs import FLOATS, real
from conformance.strategies import with_layout

F = torch.ops.fbgemm
ROUNDING = Compare(
    {
        torch.float32: Tol(rtol=1e-5, atol=1e-5),
        torch.float16: Tol(rtol=2**-8, atol=5e-3),
        torch.bfloat16: Tol(rtol=2**-5, atol=4e-2),
        torch.float64: Tol(rtol=1e-5, atol=1e-5),
    }
)


@st.composite
def softmax_inputs(draw: st.DrawFn, backward: bool = False) -> dict[str, Any]:
    b, d = draw(st.integers(0, 4)), draw(st.integers(0, 3))
    offs = [0]
    for _ in range(b):
        offs.append(offs[-1] + draw(st.integers(0, 6)))
    n = offs[-1] + draw(st.sampled_from([0, 0, 2]))
    dtype = draw(st.sampled_from(list(FLOATS)))
    seed = draw(st.integers(0, 2**31 - 1))
    layout = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    x_offsets = torch.tensor(offs, dtype=draw(st.sampled_from([torch.int32, torch.int64])))
    max_l = draw(st.integers(-1, 5))
    if backward:
        return {
            "grad_output": with_layout((n, d), dtype, "uniform", seed, layout),
            # probabilities in [0, 1), as a softmax's output
            "output": torch.rand(n, d, generator=torch.Generator().manual_seed(seed)).to(dtype),
            "x_offsets": x_offsets,
            "max_L": max_l,
        }
    values = with_layout((n, d), dtype, "uniform", seed, layout)
    return {"values": values, "x_offsets": x_offsets, "max_L": max_l}


def _rows(x_offsets: torch.Tensor, max_l: int) -> list[tuple[int, int]]:
    o = x_offsets.tolist()
    return [(o[i], o[i] + min(max(o[i + 1] - o[i], 0), max(max_l, 0))) for i in range(len(o) - 1)]


def softmax_forward_reference(values: Any, x_offsets: torch.Tensor, max_L: int) -> torch.Tensor:
    """float64: softmax over each row's first ``min(len, max_L)`` rows, 0 elsewhere."""
    v = real(values).double()
    out = v * 0  # a gradient path on empty batches too
    for start, end in _rows(x_offsets, max_L):
        if end > start:
            full = torch.zeros_like(v)
            full[start:end] = torch.softmax(v[start:end], 0)
            out = out + full
    return out


def softmax_reference(
    values: Any, x_offsets: torch.Tensor, max_L: int
) -> tuple[torch.Tensor, torch.Tensor]:
    return softmax_forward_reference(values, x_offsets, max_L), x_offsets


def softmax_backward_reference(
    grad_output: Any, output: Any, x_offsets: torch.Tensor, max_L: int
) -> torch.Tensor:
    """float64: ``y * (g - sum(g * y))`` over each row's first ``min(len, max_L)`` rows."""
    g, y = real(grad_output).double(), real(output).double()
    out = torch.zeros_like(y)
    for start, end in _rows(x_offsets, max_L):
        if end > start:
            gs, ys = g[start:end], y[start:end]
            out[start:end] = ys * (gs - (gs * ys).sum(0, keepdim=True))
    return out


_O = torch.tensor([0, 3, 3, 7])
_EXAMPLES = (
    {"values": torch.arange(14.0).view(7, 2), "x_offsets": _O, "max_L": 2},
    {"values": torch.ones(7, 2), "x_offsets": torch.tensor([0]), "max_L": 3},
    {"values": torch.ones(0, 2), "x_offsets": torch.tensor([0, 0, 0]), "max_L": 3},
    {"values": torch.ones(7, 2).double(), "x_offsets": _O, "max_L": 2},  # raises, as upstream
    {"values": torch.ones(7, 2, dtype=torch.int32), "x_offsets": _O, "max_L": 2},  # raises
)
_BACKWARD_EXAMPLES = (
    {"grad_output": torch.ones(7, 2), "output": torch.ones(7, 2) / 3, "x_offsets": _O, "max_L": 4},
)

SPECS = [
    OpSpec(
        "jagged_softmax",
        F.jagged_softmax,
        softmax_inputs(),
        ROUNDING,
        BudgetUse(),
        reference=softmax_reference,
        backward=True,
        grad_inputs=("values",),
        examples=_EXAMPLES,
        notes="rows past max_L are 0 (upstream: uninitialised), so a float64 reference",
    ),
    OpSpec(
        "jagged_softmax_forward",
        F.jagged_softmax_forward,
        softmax_inputs(),
        ROUNDING,
        BudgetUse(),
        reference=softmax_forward_reference,
        examples=_EXAMPLES,
    ),
    OpSpec(
        "jagged_softmax_backward",
        F.jagged_softmax_backward,
        softmax_inputs(backward=True),
        ROUNDING,
        BudgetUse(),
        reference=softmax_backward_reference,
        examples=_BACKWARD_EXAMPLES,
    ),
]
