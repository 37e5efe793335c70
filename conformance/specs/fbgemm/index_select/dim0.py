"""Spec for ``fbgemm::index_select_dim0``, forward and backward, against upstream's CPU kernel
(``index_select`` along dim 0; its gradient, with repeated rows summed, is the oracle for ours).

Inputs: 0 to 8 rows of rank 1 to 3, float32 / float16 / bfloat16 / float64 / int32 / int64
values (the backward: the float types), contiguous or transposed, 0 to 12 int32 / int64 indices
with repeats, the hints (``consecutive_range_start`` / ``_length``, ``skip_indices_sorting_fwd``)
drawn: upstream's CPU kernel ignores them.  One example in ten has an index out of range
(upstream: IndexError; ours: the queued range check).  Tolerances: the forward is a copy
(exact); gradients sum repeated rows (``SUMS``).  Budget: the op's entry (``backward`` for the
gradient).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, OpSpec
from conformance.specs.fbgemm.index_select.common import EXACT, INDEX_DTYPES, SUMS, by_name

F = torch.ops.fbgemm
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
DTYPES = (*FLOATS, torch.int32, torch.int64)


def _inputs(dtypes: tuple[torch.dtype, ...]) -> st.SearchStrategy:
    @st.composite
    def draw(draw: st.DrawFn) -> dict[str, object]:
        g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
        rows = draw(st.integers(1, 8))
        shape = (rows, *draw(st.lists(st.integers(0, 4), max_size=2)))
        x = (torch.randn(shape, generator=g) * 8).to(draw(st.sampled_from(dtypes)))
        if x.dim() == 2 and draw(st.booleans()):
            x = x.t().contiguous().t()  # a transposed view, rows strided
        n = draw(st.integers(0, 12))
        bad = draw(st.integers(0, 9)) == 9
        hi = rows + 3 if bad else rows
        idx = torch.randint(0, hi, (n + bad,), generator=g)
        if bad:
            idx[-1] = rows  # one index past the rows at least
        start, length = draw(st.integers(0, 5)), draw(st.integers(0, 5))
        return {
            "input": x,
            "indices": idx.to(draw(st.sampled_from(INDEX_DTYPES))),
            "consecutive_range_start": start,
            "consecutive_range_length": length,
            "skip_indices_sorting_fwd": draw(st.sampled_from((None, False, True))),
        }

    return draw()


def _budget(**_: object) -> BudgetUse:
    return BudgetUse()


EXAMPLES = (
    {"input": torch.zeros(0, 3), "indices": torch.zeros(0, dtype=torch.int64)},
    {"input": torch.arange(6.0).view(3, 2), "indices": torch.tensor([2, 2, 0, 2])},
    {"input": torch.arange(4), "indices": torch.tensor([-1])},  # upstream: IndexError
)

SPECS = [
    OpSpec(
        "index_select_dim0",
        by_name(F.index_select_dim0),
        _inputs(DTYPES),
        EXACT,
        _budget,
        examples=EXAMPLES,
    ),
    OpSpec(
        "index_select_dim0[grad]",
        by_name(F.index_select_dim0),
        _inputs(FLOATS),
        SUMS,
        _budget,
        backward=True,
        grad_inputs=("input",),
    ),
]
