"""Spec for ``batched_dense_vec_jagged_2d_mul``, forward and backward.

Oracle: upstream's CPU kernels.  Ours forms the same rounded products as upstream and sums them
in float32 in another order: one rounding of the output dtype relative to the result (``rtol``
``1e-6`` float32, ``2**-10`` float16, ``2**-7`` bfloat16), ``atol`` for sums that cancel
(``1e-5``, ``1e-4``, ``1e-3``).

Inputs: B = 0..4, H = 1..3 heads, D = 0..3, L = 0..4 against row lengths 0..6 (truncation and
empty rows), every float dtype, int32 / int64 offsets, ``v`` and ``a_values`` contiguous,
transposed or sliced; examples for B = 0, a ``v`` whose rows B does not divide and float64
(both raise, as upstream).

Budgets: the op's entry (no argument path costs differently).
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
        torch.float32: Tol(rtol=1e-6, atol=1e-5),
        torch.float16: Tol(rtol=2**-10, atol=1e-4),
        torch.bfloat16: Tol(rtol=2**-7, atol=1e-3),
    }
)


@st.composite
def bdvj_inputs(draw: st.DrawFn, dtypes: tuple = FLOATS) -> dict[str, Any]:
    b, h = draw(st.integers(0, 4)), draw(st.integers(1, 3))
    d, length = draw(st.integers(0, 3)), draw(st.integers(0, 4))
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


_AO = torch.tensor([0, 3, 3, 7])
_BDVJ_EXAMPLES = (
    {"v": torch.ones(6, 4), "a_values": torch.ones(7, 6), "a_offsets": _AO},
    {"v": torch.ones(0, 4), "a_values": torch.ones(7, 6), "a_offsets": torch.tensor([0])},
    {"v": torch.ones(5, 4), "a_values": torch.ones(7, 6), "a_offsets": _AO},  # B | v rows: raises
    {"v": torch.ones(6, 4).double(), "a_values": torch.ones(7, 6).double(), "a_offsets": _AO},
)

SPECS = [
    OpSpec(
        "batched_dense_vec_jagged_2d_mul",
        F.batched_dense_vec_jagged_2d_mul,
        bdvj_inputs(),
        ROUNDING,
        BudgetUse(),
        backward=True,
        grad_inputs=("v", "a_values"),
        examples=_BDVJ_EXAMPLES,
        notes="same products as upstream, summed in another order: one output rounding",
    ),
]
