"""Spec for ``fbgemm::embedding_bag_rowwise_prune`` against upstream's CPU kernel.

Inputs: weights ``[n, D]`` (n 0..200, D 1..6; float32, float16 or bfloat16), a float32
indicator of one value per row (normal, with values near the threshold frequent: a float32
copy of it), threshold in [0, 1.5], ``abs`` either way, ``min_num_rows`` in [-2, n + 3],
``min_save_ratio`` None, 1.0, 0.5 or 2.0 (the skip path), int32 or int64 mappings.  One example
in ten has a negative threshold or a float64 indicator (both raise).  Oracle: upstream, exact
(rows are copied, not computed).  Budget: ``skip`` when upstream's estimate skips pruning,
``min_num_rows`` when it is positive, else the main path.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from fbgemm_npu.native.fbgemm.misc.rowwise_prune import should_prune

F = torch.ops.fbgemm
EXACT = Tol(rtol=0.0, atol=0.0)  # rows are copied, never computed


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, Any]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n, d = draw(st.integers(0, 200)), draw(st.integers(1, 6))
    dtype = draw(st.sampled_from((torch.float32, torch.float16, torch.bfloat16)))
    threshold = draw(st.floats(0.0, 1.5))
    indicator = torch.randn(n, generator=g)
    near = torch.rand(n, generator=g) < 0.2
    indicator[near] = torch.tensor(threshold, dtype=torch.float32)
    kw: dict[str, Any] = {
        "weight": torch.randn(n, d, generator=g).to(dtype),
        "indicator": indicator,
        "threshold": threshold,
        "compressed_indices_dtype": draw(st.sampled_from((torch.int32, torch.int64))),
        "abs": draw(st.booleans()),
        "min_num_rows": draw(st.integers(-2, n + 3)),
        "min_save_ratio": draw(st.sampled_from((None, 1.0, 0.5, 2.0))),
    }
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        bad = draw(st.sampled_from(("threshold", "indicator")))
        kw["threshold" if bad == "threshold" else "indicator"] = (
            -0.5 if bad == "threshold" else indicator.double()
        )
    return kw


def _budget(**kw: Any) -> BudgetUse:
    rows, cols = kw["weight"].shape
    ratio = kw["min_save_ratio"]
    if ratio is not None and not should_prune(rows, cols, kw["min_num_rows"], ratio):
        return BudgetUse(path="skip")
    return BudgetUse(path="min_num_rows" if kw["min_num_rows"] > 0 else None)


SPECS = [
    OpSpec(
        name="embedding_bag_rowwise_prune",
        op=lambda **kw: F.embedding_bag_rowwise_prune(**kw),
        inputs=_inputs(),
        compare=Compare(dict.fromkeys((torch.float32, torch.float16, torch.bfloat16), EXACT)),
        budget=_budget,
    )
]
