"""Spec for ``fbgemm::batched_unary_embeddings`` against upstream's CPU kernel.

Inputs: N 1..4 tasks, T 1..4 tables of 1..30 rows, B 1..40 bags of 0..6 indices each (indices
inside their table), int32 or int64 index tensors, float32 / float16 / bfloat16 weights ``[N,
sum E, 1]``.  One example in ten has mixed index dtypes or float64 weights (upstream raises:
RuntimeError / NotImplementedError).  Oracle: upstream; both sum in float32 (the order may
differ: float32 tolerance), half outputs rounded once from it (one unit of the half type).
The gradient (upstream's CPU build has none) is held against a float64 reference in
tests/fbgemm/misc/test_misc_unary_embeddings.py.  Budget: ``half`` for float16 / bfloat16.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

F = torch.ops.fbgemm
TOLERANCES = {
    torch.float32: Tol(rtol=1e-5, atol=1e-5),
    torch.float16: Tol(rtol=1e-3, atol=1e-3),
    torch.bfloat16: Tol(rtol=8e-3, atol=8e-3),
}


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, Any]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n, t, b = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 40))
    sizes = torch.randint(1, 31, (t,), generator=g)
    table_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    lengths = torch.randint(0, 7, (t * b,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    table = torch.arange(t).repeat_interleave(b).repeat_interleave(lengths)
    indices = (torch.rand(int(lengths.sum()), generator=g) * sizes[table]).long()
    dtype = draw(st.sampled_from((torch.float32, torch.float16, torch.bfloat16)))
    index_dtype = draw(st.sampled_from((torch.int32, torch.int64)))
    weight = torch.randn(n, int(table_offsets[-1]), 1, generator=g).to(dtype)
    kw = {
        "weight": weight,
        "table_offsets": table_offsets.to(index_dtype),
        "offsets": offsets.to(index_dtype),
        "indices": indices.to(index_dtype),
    }
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        if draw(st.booleans()):
            kw["weight"] = weight.double()
        else:
            kw["offsets"] = offsets.to(torch.int32 if index_dtype == torch.int64 else torch.int64)
    return kw


def _budget(**kw: Any) -> BudgetUse:
    return BudgetUse(path=None if kw["weight"].dtype == torch.float32 else "half")


SPECS = [
    OpSpec(
        name="batched_unary_embeddings",
        op=lambda **kw: F.batched_unary_embeddings(**kw),
        inputs=_inputs(),
        compare=Compare(TOLERANCES),
        budget=_budget,
    )
]
