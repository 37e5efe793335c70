"""Spec for ``fbgemm::repeat_arange``: ``cat([arange(l) for l in lengths])``.

Inputs: 1-D int32 / int64 lengths in [0, 40) (zeros frequent: empty segments), 0 to 300 of them;
edge cases: empty, all zeros, one long segment, zeros at both ends.  One example in ten is a
dtype upstream rejects (float32, float64, bool): ours must raise too.  Not drawn: negative
lengths and 2-D lengths, which upstream accepts with a result that depends on memory, and ours
refuses by name (tests/fbgemm/misc/).  Oracle: upstream, exact.  Budget: the op's entry, its
``int64`` path for int64 lengths.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec

F = torch.ops.fbgemm


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, object]:
    n = draw(st.integers(0, 300))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 40, (n,), generator=g)
    lengths[torch.rand(n, generator=g) < 0.3] = 0
    # a bad dtype on non-empty lengths only: upstream returns an empty result for empty float
    # lengths, ours refuses them naming 'lengths'
    if n > 0 and draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        bad = draw(st.sampled_from((torch.float32, torch.float64, torch.bool)))
        return {"lengths": lengths.to(bad)}
    return {"lengths": lengths.to(draw(st.sampled_from((torch.int32, torch.int64))))}


def _budget(lengths: torch.Tensor) -> BudgetUse:
    return BudgetUse(path="int64" if lengths.dtype == torch.int64 else None)


EXAMPLES = tuple(
    {"lengths": t}
    for t in (
        torch.zeros(0, dtype=torch.int64),
        torch.zeros(5, dtype=torch.int32),
        torch.tensor([5000]),
        torch.tensor([0, 0, 3, 1, 0, 2, 0], dtype=torch.int32),
        torch.ones(3, dtype=torch.float32),  # upstream raises
    )
)

SPECS = [
    OpSpec(
        name="repeat_arange",
        op=lambda lengths: F.repeat_arange(lengths),
        inputs=_inputs(),
        compare=Compare({}),
        budget=_budget,
        examples=EXAMPLES,
    )
]
