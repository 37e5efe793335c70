"""Budgets of the bucketize family (see :class:`fbgemm_npu.native.family.Budget`), written once:
the budget tests (``tests/fbgemm/bucketize/``), the conformance specs, the docs and ``info`` read
them.

A path is named by the options its call uses, in a fixed order (``"weights + sequence +
bucketize_pos"``; ``fbgemm_npu/testing/bucketize_inputs.py`` builds the call of each name); the
main path is uniform blocks, ``my_size`` a power of two, no option, int32 lengths and int64
indices.  ``"... + every option"`` is the ceiling of a form (uniform blocks, ``total_num_blocks``,
``block_bucketize_pos`` or both): every option at once, int32 indices, int64 lengths (their
counts widened: one launch), the bucket mapping and a non-contiguous ``lengths`` (``my_size`` 1
with uniform ``total_num_blocks``); a conformance call whose options no path names, or with
int64 lengths, is held to its form's ceiling.  Counts are of a warm call: the shared index
caches already hold what the call needs.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

__all__ = ["BUDGETS"]

# Why the paths cost what they do, beside the catalogue's target of 20 (docs/ops.md).
_BLOCK_NOTE = (
    "AI CPU 0 on every path, int32 and int64 lengths and indices: row and feature ids by int32 "
    "index_add + cumsum (segment ids) or a broadcast compare, no repeat_interleave; float32 "
    "sort keys (buckets < 2**24; a radix of float sorts above), no integer sort; floor_divide "
    "and remainder, no shifts; torch.where, no int64 masked_fill_; int32 counts widened once; "
    "index_copy_ for the inverse permutation; block_bucketize_pos searched by a broadcast "
    "compare against a padded boundary table (uploaded pinned + non_blocking: no stall), or "
    "rounds of gathers past 2**24 compares, no searchsorted.  Only indices.numel() >= 2**31 "
    "takes int64 cumsum / index_add (AI CPU).  Over the catalogue's 20 on some paths: "
    "batch_size_per_feature (its features' row ends: a cumsum, a compare, a sum), "
    "keep_orig_idx_per_feature (a gather and a select), my_size not a power of two (the "
    "unsigned view of negative ids), bucketize_pos (row starts: a subtraction, two gathers), "
    "total_num_blocks (the per-feature divisor split through my_size: 9 more than the main "
    "path), block_bucketize_pos (the boundary table and the search: 18 more).  A fused kernel "
    "would close the gap (upstream's CUDA kernels take 2-3 launches).  A first call, or one "
    "larger than any before, also fills the shared cached zeros, ones and arange "
    "(native/_index.py)."
)

_UNIFORM_EVERY = "every option"
_TOTAL_EVERY = "total_num_blocks + every option"
_POS_EVERY = "block_bucketize_pos + every option"
_BOTH = "total_num_blocks + block_bucketize_pos"
_BOTH_EVERY = "total_num_blocks + block_bucketize_pos + every option"

# The data check: its conditions joined by one cat and one all, then queued (deferred).  Main
# path 8: lengths in [0, L] (exact sums of int64 lengths) summing to L, block sizes in
# [0, max // my_size].  VBE sizes add 4 (the same pair of conditions); total_num_blocks 5 more
# (positive multiples of my_size, b * G inside the index dtype); variable blocks check their
# boundaries sorted (one comparison) instead of the block bound, plus 3 with total_num_blocks.
_BLOCK_CHECKS = {
    "batch_size_per_feature": 12,
    "total_num_blocks": 13,
    "block_bucketize_pos": 7,
    _BOTH: 10,
    _UNIFORM_EVERY: 12,
    _TOTAL_EVERY: 17,
    _POS_EVERY: 11,
    _BOTH_EVERY: 14,
}
_TRAINING_PATHS = {
    "weights": 20,
    "batch_size_per_feature": 21,
    "sequence": 20,
    "bucketize_pos": 23,
    "weights + sequence + bucketize_pos": 25,
    "keep_orig_idx_per_feature": 21,
    "my_size not a power of two": 21,
    "total_num_blocks": 28,
    "block_bucketize_pos": 37,
    _BOTH: 54,
    _UNIFORM_EVERY: 33,
    _TOTAL_EVERY: 47,
    _POS_EVERY: 53,
    _BOTH_EVERY: 67,
}

# The fused Triton path of the block ops (_triton_block.py): count, scan and scatter kernels,
# 3 launches on every uniform path; variable blocks add the boundaries' cat (none for one
# feature: 4) and the upload of their [starts, sizes] table: 5; a ceiling adds the copy of its
# non-contiguous lengths (read flat).  Its data checks are computed by the kernels (a flag per
# program, reduced by the scan kernel) and queued from a view of one byte: 0 launches more.
# "call" holds every uniform path but the ceilings (weights, VBE, sequence, ... cost the same).
_TRITON = {
    "call": 3,
    _UNIFORM_EVERY: 4,
    _TOTAL_EVERY: 4,
    "block_bucketize_pos": 5,
    _BOTH: 5,
    _POS_EVERY: 6,
    _BOTH_EVERY: 6,
}
_TRITON_NOTE = (
    "; Triton path: 3 launches (count, scan, scatter; variable blocks 5), checks in the "
    "kernels; my_size > 1024 keeps the tensor program"
)

BUDGETS: dict[str, Budget] = {
    "fbgemm::block_bucketize_sparse_features": Budget(
        19,
        checks=8,
        ai_cpu=0,
        paths=_TRAINING_PATHS,
        path_checks=_BLOCK_CHECKS,
        note=_BLOCK_NOTE + _TRITON_NOTE,
        triton=_TRITON,
        triton_checks=0,
    ),
    # As the training op; the bucket mapping is the bucket tensor itself, cast once (+1) where
    # variable blocks make it int64 and the indices are int32.
    "fbgemm::block_bucketize_sparse_features_inference": Budget(
        19,
        checks=8,
        ai_cpu=0,
        paths={**_TRAINING_PATHS, _POS_EVERY: 54, _BOTH_EVERY: 68},
        path_checks=_BLOCK_CHECKS,
        note=_BLOCK_NOTE + _TRITON_NOTE,
        triton=_TRITON,
        triton_checks=0,
    ),
    # Weights are always given (one index_select of their rows): the training op's weights path.
    "fbgemm::block_bucketize_sparse_features_2d_weights": Budget(
        20,
        checks=8,
        ai_cpu=0,
        paths={
            "batch_size_per_feature": 22,
            "sequence": 21,
            "bucketize_pos": 24,
            "keep_orig_idx_per_feature": 22,
            "my_size not a power of two": 22,
            "total_num_blocks": 29,
            "block_bucketize_pos": 38,
            _BOTH: 55,
            _UNIFORM_EVERY: 33,
            _TOTAL_EVERY: 47,
            _POS_EVERY: 53,
            _BOTH_EVERY: 67,
        },
        path_checks=_BLOCK_CHECKS,
        note=_BLOCK_NOTE + _TRITON_NOTE,
        triton=_TRITON,
        triton_checks=0,
    ),
    # Cyclic: bucket u % my_size, an unsigned divmod (2 more launches when my_size is not a
    # power of two), the rows (segment ids), the counts (int32, widened once: the paths are
    # measured with int64 lengths = indices, int32 costs one less) and the float-key sort; the
    # check: lengths in [0, L] summing to L.  AI CPU 0 (int64 only past 2**31 indices).
    "fbgemm::bucketize_sparse_features": Budget(
        13,
        checks=6,
        ai_cpu=0,
        paths={
            "weights": 14,
            "bucketize_pos": 17,
            "weights + bucketize_pos": 18,
            "my_size not a power of two": 15,
            _UNIFORM_EVERY: 20,
        },
    ),
    # Rows (cumsum, clamp, index_add, cumsum), the bucket's clamp, the key, the stable order
    # (float32 cast + sort; past 2**24 keys one float sort per 24-bit digit: remainder,
    # floor_divide, two casts, two sorts, two gathers, and fresh zeros for the counts), the
    # positions (index_copy_), the counts (int32 index_add), sub, cumsum, sub, gather, add; an
    # int32 bucket_mapping adds the cast back.  Checks: amin and sum of the lengths, aminmax of
    # the buckets, the queued check (stack, upload, clamp, eq, all).  AI CPU 0.
    "fbgemm::populate_bucketized_permute": Budget(
        15,
        checks=8,
        ai_cpu=0,
        paths={"int32 bucket_mapping": 16, "more than 2**24 keys": 22},
    ),
    # stack, cumsum, segment ids (clamp, index_add, cumsum), remainder, eq; checks: aminmax,
    # the int64 sum, the queued check.  No sync (output_size is given).
    "fbgemm::get_source_mask": Budget(7, checks=7, ai_cpu=0),
    # The stable order (float32 cast + sort; max_indices >= 2**24: a second 24-bit digit pass,
    # 6 more), the sorted values' gather, the run starts (fill_, ne), cumsum, index_put into
    # cached zeros, the length's add, the counts' index_add (compute_count); checks: aminmax
    # and the queued check.  No integer sort, no unique (AI CPU on a 910B), no sync.
    "fbgemm::get_unique_indices": Budget(
        9, checks=6, ai_cpu=0, paths={"no count": 8, "max_indices >= 2**24": 15}
    ),
    # As get_unique_indices, the positions one int32 cast of the order more.
    "fbgemm::get_unique_indices_with_inverse": Budget(
        10,
        checks=6,
        ai_cpu=0,
        paths={"no count, no inverse": 8, "max_indices >= 2**24": 16},
    ),
}
