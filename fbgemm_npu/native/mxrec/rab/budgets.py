"""Budgets of the rab family (``mxrec::relative_attn_bias_*``), one entry per op; held by
``tests/mxrec/rab/test_rab_budgets.py``.

No syncs, no AI-CPU launch on a 910B: buckets by float32 log arithmetic (no ``searchsorted`` /
``bucketize``), the timestamp difference in int64 ``sub`` (AI Core), the scatter a float32
``index_add_`` along dim 0.  Only the backward has a data check (its bucket index, queued).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

_TIME = (
    "over the catalogue's 8: the bucket is trunc(log(max(|t_j - t_i|, 1)) / divisor) clamped, "
    "computed exactly from int64 differences (int32 stamps are widened first: a float32 "
    "difference of unix-second stamps is off by up to 128 s) in 6 elementwise launches, then "
    "the 2x2-expanded index and one gather; a fused kernel would bucket inside the gather"
)

BUDGETS: dict[str, Budget] = {
    # upload of past_valid_lens, clamp of the cached arange, index_select, lerp
    "mxrec::relative_attn_bias_pos": Budget(launches=4, ai_cpu=0),
    # int64 widening, sub, float cast, abs_, clamp_min_, log_, div_, clamp_max_, int32 cast;
    # the 2x2-expanded index, index_select of the weights; int64 timestamps: no widening
    "mxrec::relative_attn_bias_time": Budget(
        launches=11, ai_cpu=0, paths={"int64": 10}, target=8, note=_TIME
    ),
    "mxrec::relative_attn_bias_time_with_index": Budget(
        launches=11, ai_cpu=0, paths={"int64": 10}, target=8, note=_TIME
    ),
    # float32 block sum, bucket clamp, zero table, index_add_, the transposed copy_ (and cast)
    # into the (L, num_buckets) output; checks: eq + all of the clamped index (queued);
    # strided: a bucket index no view flattens (transposed) is copied into logical order
    "mxrec::relative_attn_bias_time_backward": Budget(
        launches=5, checks=2, ai_cpu=0, paths={"strided": 6}
    ),
}
