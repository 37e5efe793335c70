"""Specs for upstream's TBE index-distribution tools on npu tensors, against upstream's CPU kernels.

``tbe_estimate_indices_distribution``: int64 index traces of 200 to 6000 entries over 50 to 3000
rows, a share (0 to 60 %) drawn from a few hot rows; one example in ten is int32 or empty
(upstream refuses both).  ``tbe_generate_indices_from_distribution``: 1 to 5 heavy hitters
(float32 / float64), q in [1, 10), s in (1, 3), up to 2000 indices; torch's generator seeded the
same on both sides (upstream draws with it).  Oracle: upstream, exact (the outputs are upstream's
host code run on a host copy).  Budget: the op's entry (no launch, one sync).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Compare, OpSpec, Tol

F = torch.ops.fbgemm


@st.composite
def _traces(draw: st.DrawFn) -> dict[str, Any]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n, rows = draw(st.integers(200, 6000)), draw(st.integers(50, 3000))
    hot = int(n * draw(st.floats(0.0, 0.6)))
    x = torch.cat([torch.randint(0, 4, (hot,), generator=g), torch.randint(0, rows, (n - hot,))])
    bad = draw(st.integers(0, 9))
    if bad == 9:
        return {"indices": x.to(torch.int32)}
    if bad == 8:
        return {"indices": x[:0]}
    return {"indices": x}


@st.composite
def _distributions(draw: st.DrawFn) -> dict[str, Any]:
    k = draw(st.integers(1, 5))
    probs = sorted((draw(st.floats(0.01, 0.15)) for _ in range(k)), reverse=True)
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    return {
        "heavy_hitters": torch.tensor(probs, dtype=dtype),
        "zipf_q": draw(st.floats(1.0, 9.9)),
        "zipf_s": draw(st.floats(1.05, 2.95)),
        "max_index": draw(st.integers(10, 5000)),
        "num_indices": draw(st.integers(0, 2000)),
    }


def _generate(**kw: Any) -> torch.Tensor:
    torch.manual_seed(1234)  # upstream draws with torch's generator: the same draw both sides
    return F.tbe_generate_indices_from_distribution(**kw)


SPECS = [
    OpSpec(
        "tbe_estimate_indices_distribution",
        lambda **kw: F.tbe_estimate_indices_distribution(**kw),
        _traces(),
        Compare({torch.float64: Tol(0.0, 0.0)}),  # upstream's own host code: exact
        examples=({"indices": torch.tensor([0, 0, 0, 1] * 100 + list(range(400)))},),
    ),
    OpSpec(
        "tbe_generate_indices_from_distribution",
        _generate,
        _distributions(),
        Compare({}),
    ),
]
