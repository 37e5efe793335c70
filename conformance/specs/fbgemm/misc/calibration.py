"""Spec for ``fbgemm::histogram_binning_calibration`` against upstream's CPU kernel.

Inputs: logits of 0 to 300 elements, rank 1 or 2, float32 / float16 / bfloat16, scaled by 1 to
4; 1 to 40 bins of float64 example counts in [0, 50) (zeros frequent) with positives at most the
examples; positive_weight in [0.1, 4], bounds (0, 1), bin_ctr_in_use_after in [0, 20], the
weight in [0, 1].  One example in ten has a float64 logit or float32 bins (upstream refuses).
Not drawn: bounds that put a bin id out of range (upstream reads out of bounds; ours refuses:
tests/fbgemm/misc/).  Oracle: upstream; bin ids exact (a float32 u differs from upstream's
float64 one by ~1e-7, a bin edge that close is not drawn by chance), predictions at float32 /
half tolerances.  Budget: the op's entry, ``half`` for float16 / bfloat16 logits.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

F = torch.ops.fbgemm
TOLERANCES = {
    torch.float32: Tol(rtol=1e-6, atol=1e-6),
    torch.float16: Tol(rtol=1e-3, atol=1e-3),
    torch.bfloat16: Tol(rtol=8e-3, atol=8e-3),
}
ARGS = (
    "logit",
    "bin_num_examples",
    "bin_num_positives",
    "positive_weight",
    "lower_bound",
    "upper_bound",
    "bin_ctr_in_use_after",
    "bin_ctr_weight_value",
)


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, object]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n = draw(st.integers(0, 300))
    shape = (n,) if draw(st.booleans()) or n % 3 else (3, n // 3)
    dtype = draw(st.sampled_from((torch.float32, torch.float16, torch.bfloat16)))
    logit = (torch.randn(shape, generator=g) * draw(st.floats(1, 4))).to(dtype)
    bins = draw(st.integers(1, 40))
    ex = torch.randint(0, 50, (bins,), generator=g).double()
    ex[torch.rand(bins, generator=g) < 0.2] = 0
    pos = (ex * torch.rand(bins, generator=g, dtype=torch.float64)).floor()
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        if draw(st.booleans()):
            logit = logit.double()
        else:
            ex = ex.float()
    return {
        "logit": logit,
        "bin_num_examples": ex,
        "bin_num_positives": pos,
        "positive_weight": draw(st.floats(0.1, 4)),
        "lower_bound": 0.0,
        "upper_bound": 1.0,
        "bin_ctr_in_use_after": draw(st.integers(0, 20)),
        "bin_ctr_weight_value": draw(st.floats(0, 1)),
    }


def _budget(logit: torch.Tensor, **_: object) -> BudgetUse:
    return BudgetUse(path="half" if logit.dtype in (torch.float16, torch.bfloat16) else None)


def _op(**kw: object) -> object:
    return F.histogram_binning_calibration(*(kw[a] for a in ARGS))


SPECS = [
    OpSpec(
        name="histogram_binning_calibration",
        op=_op,
        inputs=_inputs(),
        compare=Compare(TOLERANCES),
        budget=_budget,
    )
]
