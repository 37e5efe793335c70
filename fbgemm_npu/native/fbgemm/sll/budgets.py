"""Budgets of the sll family, one entry per op it registers (see fbgemm_npu.native.family.Budget);
``tests/fbgemm/sll/test_sll_budgets.py`` measures each.

The main path is int64 offsets and lengths; int32 ones cost the same, except where ``int32``
names a path: a cast more (the lengths widened to int64 before they multiply: an int32 product
of lengths near 2**16 would wrap).  Every count is exact and size-independent: ``launches``
with the data checks off, ``checks`` what the queued data checks add.  No launch runs on a
910B's AI CPU (int64 index arithmetic is ``add`` / ``mul`` / ``floor_divide`` / ``clamp`` /
``where``, segment ids an int32 ``index_add`` + ``cumsum``: docs/hardware.md).  ``syncs=1``:
the output size is data (upstream reads it too: ``offsets_b[-1]``, ``sum(z_lengths)``), read
with the padded length and the checks in one copy.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # bmm.py: the [B, N] index (add, ge, clamp), a gather + padding fill per jagged input, bmm;
    # the dense-output op scatters back (where, remainder, zeros, index_copy_); checks: the
    # offsets' int32 range, the rows read (+ the order: a scatter)
    # n_past_rows: N above the rows (the padding is bounded by the rows), so each sequence's end
    # within N is checked too (sub, clamp, add, gt: upstream reads min(len, N) rows, past the
    # input there)
    "fbgemm::sll_jagged_dense_bmm": Budget(
        launches=10, checks=7, ai_cpu=0, paths={"n_past_rows": 10}, path_checks={"n_past_rows": 11}
    ),
    "fbgemm::sll_jagged_jagged_bmm": Budget(
        launches=8, checks=6, ai_cpu=0, paths={"n_past_rows": 8}, path_checks={"n_past_rows": 10}
    ),
    # elementwise.py: to_jagged of y (index, where, remainder, zeros, index_copy_) and the add;
    # checks: to_jagged's and x_offsets[-1] == x.size(0) (upstream's add fails otherwise: ne,
    # any, not and the queue's)
    "fbgemm::sll_jagged_dense_elementwise_add": Budget(launches=7, checks=8, ai_cpu=0),
    # segment ids (clamp, index_add, cumsum, clamp), the length and start gathers, q, r, c
    # (sub, clamp, floor div, mul, sub), the in-block test (ge, mul, lt, and), y's index (two
    # clamps, index), the product and the outside zeroed (zeros, where); int32: the lengths'
    # cast; checks: offsets from 0 to x.numel() in order, lengths >= 0, block sizes, lengths
    # within y
    "fbgemm::sll_jagged_dense_elementwise_mul_jagged_out": Budget(
        launches=21, checks=11, ai_cpu=0, paths={"int32": 22}, path_checks={"int32": 12}
    ),
    # cat_sub.py: c_offsets (add), zeros, a's positions (clamp, index_copy_), b's segment ids
    # (clamp, index_add, cumsum), positions (add, clamp), index_copy_; checks: start, end, order
    "fbgemm::sll_dense_jagged_cat_jagged_out": Budget(launches=10, checks=6, ai_cpu=0),
    # lengths (sub, clamp, cast), the read of (offsets_b[-1], longest) (amax, cat: the sync),
    # the [B, L] gather (add, ge, clamp, index_select), the pairwise sub, the block positions
    # and their padding mask (sub, clamp, mul, add, add, lt, lt, and, fill, where, clamp), the
    # scatter (zero_, index_put_); checks: offsets' ranges and order, block sizes
    "fbgemm::sll_jagged_self_substraction_jagged_out": Budget(
        launches=22, checks=14, syncs=1, ai_cpu=0, paths={"int32": 23}
    ),
    # jagged_out.py: the lengths capped, the read of (sum(z_lengths), longest) (sum, amax, cat:
    # the sync), the [B, L] rows of y, the [B, L, L] positions of x and the output rows (add,
    # mul, clamp, where, or), a gather + padding fill per input, bmm, the scatter (zero_,
    # index_copy_); checks: lengths, x block sizes and range, y and z rows, z blocks' overlap
    "fbgemm::sll_array_jagged_bmm_jagged_out": Budget(
        launches=23, checks=24, syncs=1, ai_cpu=0, paths={"int32": 24}
    ),
    # the same for X_i Y_i^T: M_i and N_i (sub, clamp, cast each), the read of (sum(z_lengths),
    # max M, max N), the [B, L_m] and [B, L_n] rows, the [B, L_m, L_n] output positions, two
    # gathers + fills, bmm, the scatter (zero_, index_put_); checks: ranges, order, block sizes
    "fbgemm::sll_jagged_jagged_bmm_jagged_out": Budget(
        launches=28, checks=15, syncs=1, ai_cpu=0, paths={"int32": 30}
    ),
}
