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
    # the kept count sizes the output (the 1 sync: count[-1] read); abs, gt, int32 cumsum,
    # sub_, where (new row or -1), its int64 cast, remainder (-1 to the spare row), index_copy_
    # (int32 and int64 mappings alike); min_num_rows > 0: sub, le_, logical_or_ and the cumsum
    # again; skip (min_save_ratio says pruning saves too little, decided from sizes): a copy of
    # the weights and the mapping [0], no sync
    "fbgemm::embedding_bag_rowwise_prune": Budget(
        launches=8, syncs=1, ai_cpu=0, paths={"min_num_rows": 12, "skip": 2}
    ),
    # the bag of each index position (clamp, cast, index_add, cumsum), each row's table offset
    # (copy, cat, gather, cast, add), the [L, N] flat indices (arange, add, clamp), the weight
    # gather, index_add_ into zeros, the [N, B, T] copy (with the cast back); half: the float32
    # cast of the gathered values.  checks: remainder, ne, mul, aminmax (indices), non_decreasing,
    # aminmax (offsets) and the queued check's 5
    "fbgemm::batched_unary_embeddings": Budget(
        launches=14, checks=12, ai_cpu=0, paths={"half": 15}
    ),
    # the output size is data: the 1 sync reads k (or k_offsets[-1]) and every bound with it.
    # fixed k: sub, the copy of x[:, :k]; unique (fixed k): the distinct ranks [R, C, C] (lt,
    # eq, logical_and_, any, logical_not_, cumsum, sub_), the least count (select, amin), the
    # row starts, the kept mask (lt, logical_and_), the places (lt, logical_and_, sum, add_),
    # where (fill + where), index_copy_; variable: per-row k (sub, aminmax), the read's cat,
    # segment ids (3), its start (gather, sub), flat index (mul_, add_, clamp_), the gather;
    # variable_unique: per-row k and the distinct ranks as above.  No sort (integer sort is AI
    # CPU on a 910B): comparisons, O(R C**2) booleans
    "fbgemm::bottom_k_per_row": Budget(
        launches=2,
        syncs=1,
        ai_cpu=0,
        paths={"unique": 20, "variable": 13, "variable_unique": 22},
    ),
}
