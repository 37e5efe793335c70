"""Spec for ``fbgemm::bottom_k_per_row`` against upstream's CPU kernel.

Inputs: int64 rows (2-D ``[R, C]`` or 3-D ``[T, B, C]``, R up to 60, C 1..16) of values in a
small or a large range (repeats frequent or rare), sorted (upstream's callers) or not; a fixed
``k`` (two k_offsets, any start) in [1, C] or per-row ``k`` in [0, C] (R + 1 k_offsets from 0);
``requires_unique`` either way (rows with fewer distinct values than ``k``: both raise).  Not
drawn: ``k > C`` without ``requires_unique``, k_offsets not from 0 or of another length
(upstream reads out of bounds or leaves memory unwritten; ours refuses: tests/fbgemm/misc/).
Oracle: upstream, exact.  Budget: the path of ``k`` and ``requires_unique``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec

F = torch.ops.fbgemm


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, Any]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    cols = draw(st.integers(1, 16))
    shape = draw(st.sampled_from([(draw(st.integers(1, 60)), cols), (2, 3, cols)]))
    x = torch.randint(0, draw(st.sampled_from((3, 20, 10**6))), shape, generator=g)
    if draw(st.booleans()):
        x = x.sort(-1).values
    rows = x.numel() // cols
    if rows == 1 or draw(st.booleans()):
        start = draw(st.integers(0, 5))
        k_offsets = torch.tensor([start, start + draw(st.integers(1, cols))])
    else:
        ks = torch.randint(0, cols + 1, (rows,), generator=g)
        k_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), ks.cumsum(0)])
    return {"input": x, "k_offsets": k_offsets, "requires_unique": draw(st.booleans())}


def _budget(**kw: Any) -> BudgetUse:
    fixed = kw["k_offsets"].numel() == 2
    unique = kw["requires_unique"]
    path = {(True, False): None, (True, True): "unique", (False, False): "variable"}
    return BudgetUse(path=path.get((fixed, unique), "variable_unique"))


SPECS = [
    OpSpec(
        name="bottom_k_per_row",
        op=lambda **kw: F.bottom_k_per_row(**kw),
        inputs=_inputs(),
        compare=Compare({}),
        budget=_budget,
    )
]
