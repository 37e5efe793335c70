"""Specs for ``fbgemm::histogram_binning_calibration_by_feature`` and
``fbgemm::generic_histogram_binning_calibration_by_feature`` against upstream's CPU kernels.

Inputs: 0 to 200 logits (float32 / float16 / bfloat16), one segment length per logit in
{0, 1, 2} (int32 / int64), int64 segment values in [-2, num_segments + 3) (negative ones and
ones past ``num_segments`` fall back to table 0 upstream), 1 to 6 segments, 1 to 12 bins of
float64 counts (zeros frequent); the generic form's boundaries sorted in (0, 1).  Not drawn:
lengths that are not one per logit or run past the values, ids past the tables (upstream reads
uninitialised or out-of-bounds memory; ours refuses: tests/fbgemm/misc/).  Oracle: upstream;
ids exact, predictions at float32 / half tolerances.  Budget: the op's entry (``half`` for
half logits; int32 lengths launch one cast less).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec
from conformance.specs.fbgemm.misc.calibration import TOLERANCES

F = torch.ops.fbgemm


def _inputs(generic: bool) -> st.SearchStrategy:
    @st.composite
    def draw(draw: st.DrawFn) -> dict[str, object]:
        g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
        n, segs, bins = draw(st.integers(0, 200)), draw(st.integers(1, 6)), draw(st.integers(1, 12))
        dtype = draw(st.sampled_from((torch.float32, torch.float16, torch.bfloat16)))
        logit = (torch.randn(n, generator=g) * draw(st.floats(1, 4))).to(dtype)
        sl = torch.randint(0, 3, (n,), generator=g)
        sv = torch.randint(-2, segs + 3, (int(sl.sum()),), generator=g)
        ex = torch.randint(0, 40, ((segs + 1) * bins,), generator=g).double()
        ex[torch.rand(ex.numel(), generator=g) < 0.2] = 0
        pos = (ex * torch.rand(ex.numel(), generator=g, dtype=torch.float64)).floor()
        kw: dict[str, object] = {
            "logit": logit,
            "segment_value": sv,
            "segment_lengths": sl.to(draw(st.sampled_from((torch.int32, torch.int64)))),
            "num_segments": segs,
            "bin_num_examples": ex,
            "bin_num_positives": pos,
        }
        if generic:
            edges = torch.sort(torch.rand(bins - 1, generator=g, dtype=torch.float64))[0]
            kw["bin_boundaries"] = edges
        else:
            kw.update(num_bins=bins, lower_bound=0.0, upper_bound=1.0)
        kw.update(
            positive_weight=draw(st.floats(0.1, 4)),
            bin_ctr_in_use_after=draw(st.integers(0, 20)),
            bin_ctr_weight_value=draw(st.floats(0, 1)),
        )
        return kw

    return draw()


def _budget(logit: torch.Tensor, **_: object) -> BudgetUse:
    return BudgetUse(path="half" if logit.dtype in (torch.float16, torch.bfloat16) else None)


SPECS = [
    OpSpec(
        name="histogram_binning_calibration_by_feature",
        op=lambda **kw: F.histogram_binning_calibration_by_feature(**kw),
        inputs=_inputs(generic=False),
        compare=Compare(TOLERANCES),
        budget=_budget,
    ),
    OpSpec(
        name="generic_histogram_binning_calibration_by_feature",
        op=lambda **kw: F.generic_histogram_binning_calibration_by_feature(**kw),
        inputs=_inputs(generic=True),
        compare=Compare(TOLERANCES),
        budget=_budget,
    ),
]
