"""Budgets of the sll_attention family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/sll_attention/test_sll_attention_budgets.py``
measures each.  None syncs: every output size is known from shapes and host ints.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # the [B, M] row index (add, ge; where, remainder: the scatter rows; clamp_: the gather
    # rows), index_select, masked_fill_ (-inf), softmax, the scatter (zero_, index_copy_);
    # checks: int32 range, rows read (where, ge), decreasing offsets, cat / any / not
    "fbgemm::sll_jagged_softmax": Budget(launches=10, checks=7, ai_cpu=0),
    # the sizes (sub), the square index (mul, add, add, ge, logical_or), where, remainder,
    # clamp_, index_select, masked_fill_, softmax, the scatter (zero_, index_put_); checks: both
    # offsets' int32 range, 0 <= n_b <= M (lt, gt, or), the square steps (sub, mul, ne), the end
    # inside x (gt), cat / any / not; int32_offsets: n_b**2 in int64 (a cast more)
    "fbgemm::sll_jagged2_softmax": Budget(
        launches=14,
        checks=12,
        ai_cpu=0,
        paths={"int32_offsets": 14},
        path_checks={"int32_offsets": 13},
    ),
    # sub, float cast, sqrt_, round_, int64 cast (n_b), the square index (5), where, remainder,
    # clamp_, index_select, masked_fill_ (int64 values: where and its scalar: int64
    # masked_fill_ is AI CPU); checks: int32 range, lt, mul / ne (a square), gt (n_b <= M), gt
    # (the end), cat / any / not
    "fbgemm::sll_jagged2_to_padded_dense": Budget(
        launches=15, checks=9, ai_cpu=0, paths={"int64_values": 16}
    ),
    # the row index (5), index_select + masked_fill_ of q and v, baddbmm (the bias rows a view),
    # masked_fill_ (-inf), softmax, masked_fill_ (an empty row's NaN), bmm; pad_bias: F.pad of
    # the bias to M rows; cast: k, v and attn_bias to q's dtype (one each); checks: int32 range,
    # rows read (where, ge), decreasing offsets, offsets[-1] == N (ne: upstream's size check,
    # found by the fuzz suite), cat / any / not
    "fbgemm::sll_jagged_dense_flash_attention": Budget(
        launches=14, checks=8, ai_cpu=0, paths={"pad_bias": 15, "cast": 17}
    ),
    # the row index (5), index_select + masked_fill_ of q, k, v, the pair mask (logical_or),
    # bmm, masked_fill_ (-inf), softmax, div_, masked_fill_ (padding: NaN rows), bmm, the scatter
    # (zero_, index_copy_); use_mask: ones, triu_, mul; checks: as jagged_softmax's (7) and
    # n_b <= M (sub, gt), offsets[-1] == N (ne)
    "fbgemm::sll_jagged_flash_attention_basic": Budget(
        launches=20, checks=10, ai_cpu=0, paths={"use_mask": 23}
    ),
    # as flash_attention_basic without the mask, the gathers and scatter per head (index_select
    # at dim 1), and the per-head scatter rows (mul, add) and the copy out of the spare rows
    # (contiguous); checks: as jagged_softmax's (7)
    "fbgemm::sll_multi_head_jagged_flash_attention": Budget(launches=23, checks=7, ai_cpu=0),
}
