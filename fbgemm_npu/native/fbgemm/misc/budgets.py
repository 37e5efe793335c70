"""Budgets of the misc family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/misc/test_misc_budgets.py`` measures each.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # the output size is data: int64 sum, one read (the sync; checks: amin and the cat of both);
    # then int32 cumsum of the ends, their clamp, index_add, cumsum; int64: the casts in and out
    "fbgemm::repeat_arange": Budget(launches=5, checks=2, syncs=1, ai_cpu=0, paths={"int64": 7}),
    # p: float64 cast + add, cast to the logit dtype, to float32; neg_, exp (float32 as upstream),
    # to float64, add_, reciprocal_, div, ceil, sub_, long (the ids); u to float32; the bins
    # stacked and cast, clamp, gather, ctr div, lerp, gt, where; half: the cast back (+2 with
    # p's); checks: aminmax and the queued check's 5.  The float64 elementwise ops (the ids
    # match upstream's only so) are assumed AI Core: docs/hardware.md lists none of them
    "fbgemm::histogram_binning_calibration": Budget(
        launches=21, checks=6, ai_cpu=0, paths={"half": 23}
    ),
    # as histogram_binning_calibration (21), plus the feature offsets: the lengths cast to int32,
    # cumsum, sub_, clamp_, gather of the first values, eq, add, where, gt, mul, clamp_min_,
    # where, and the offset add_ (int64 lengths and values; int32 lengths: one cast less, int32
    # values: one more); checks: the lengths' amin, sum and queued check (+7) and the ids' (6)
    "fbgemm::histogram_binning_calibration_by_feature": Budget(
        launches=36, checks=13, ai_cpu=0, paths={"half": 38}
    ),
    # the same with the ids a broadcast lt + sum over the boundaries (no searchsorted) in place
    # of div, ceil, sub_, long
    "fbgemm::generic_histogram_binning_calibration_by_feature": Budget(
        launches=34, checks=13, ai_cpu=0, paths={"half": 36}
    ),
}
