"""Budgets of the bucketize family (see :class:`fbgemm_npu.native.family.Budget`), written once:
the budget tests (``tests/fbgemm/bucketize/``), the conformance specs, the docs and ``info`` read
them.

A path is named by the options its call uses, in a fixed order (``"weights + sequence +
bucketize_pos"``; ``fbgemm_npu/testing/bucketize_inputs.py`` builds the call of each name); the
main path is uniform blocks, ``my_size`` a power of two, no option.  ``"... + every option"`` is
the ceiling of a form (uniform blocks, ``total_num_blocks``, ``block_bucketize_pos`` or both):
every option at once, int32 indices, the bucket mapping and a non-contiguous ``lengths``; a
conformance call whose options no path names is held to its form's ceiling.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

__all__ = ["BUDGETS"]

# Why the paths cost what they do, beside the catalogue's target of 20 (docs/ops.md).
_BLOCK_NOTE = (
    "Over the catalogue's 20 on some paths: sequence (an arange and a scatter for the inverse "
    "permutation), keep_orig_idx_per_feature (a gather and a select), my_size not a power of two "
    "(the unsigned view of negative ids), bucketize_pos (row starts: a searchsorted, a "
    "subtraction, a gather), total_num_blocks (an unsigned division by a per-feature divisor), "
    "block_bucketize_pos (a two-level boundary search). A fused kernel would close the gap "
    "(upstream's CUDA kernels take 2-3 launches)."
)

_UNIFORM_EVERY = "every option"
_TOTAL_EVERY = "total_num_blocks + every option"
_POS_EVERY = "block_bucketize_pos + every option"
_BOTH = "total_num_blocks + block_bucketize_pos"
_BOTH_EVERY = "total_num_blocks + block_bucketize_pos + every option"

# The data check: its conditions joined by one cat and one all, then one _assert_async.  Main
# path 9: lengths in [0, L] (exact sums of int64 lengths) summing to L, block sizes in
# [0, max // my_size].  VBE sizes add 4 (the same pair of conditions); total_num_blocks 5 more
# (positive multiples of my_size, b * G inside the index dtype); variable blocks check their
# boundaries sorted (one comparison) instead of the block bound, plus 3 with total_num_blocks.
_BLOCK_CHECKS = {
    "batch_size_per_feature": 13,
    "total_num_blocks": 14,
    "block_bucketize_pos": 8,
    _BOTH: 11,
    _UNIFORM_EVERY: 13,
    _TOTAL_EVERY: 18,
    _POS_EVERY: 12,
    _BOTH_EVERY: 15,
}
_TRAINING_PATHS = {
    "weights": 20,
    "batch_size_per_feature": 20,
    "sequence": 21,
    "bucketize_pos": 23,
    "weights + sequence + bucketize_pos": 25,
    "keep_orig_idx_per_feature": 21,
    "my_size not a power of two": 21,
    "total_num_blocks": 35,
    "block_bucketize_pos": 40,
    _BOTH: 57,
    _UNIFORM_EVERY: 31,
    _TOTAL_EVERY: 45,
    _POS_EVERY: 55,
    _BOTH_EVERY: 69,
}

BUDGETS: dict[str, Budget] = {
    "fbgemm::block_bucketize_sparse_features": Budget(
        19, checks=9, paths=_TRAINING_PATHS, path_checks=_BLOCK_CHECKS, note=_BLOCK_NOTE
    ),
    # As the training op; the bucket mapping is the bucket tensor itself, cast once (+1) where
    # variable blocks make it int64 and the indices are int32.
    "fbgemm::block_bucketize_sparse_features_inference": Budget(
        19,
        checks=9,
        paths={**_TRAINING_PATHS, _POS_EVERY: 56, _BOTH_EVERY: 70},
        path_checks=_BLOCK_CHECKS,
        note=_BLOCK_NOTE,
    ),
    # Weights are always given (one index_select of their rows): the training op's weights path.
    "fbgemm::block_bucketize_sparse_features_2d_weights": Budget(
        20,
        checks=9,
        paths={
            "batch_size_per_feature": 21,
            "sequence": 22,
            "bucketize_pos": 24,
            "keep_orig_idx_per_feature": 22,
            "my_size not a power of two": 22,
            "total_num_blocks": 36,
            "block_bucketize_pos": 41,
            _BOTH: 58,
            _UNIFORM_EVERY: 31,
            _TOTAL_EVERY: 45,
            _POS_EVERY: 55,
            _BOTH_EVERY: 69,
        },
        path_checks=_BLOCK_CHECKS,
        note=_BLOCK_NOTE,
    ),
    # Cyclic: bucket u % my_size, an unsigned divmod (2 more launches when my_size is not a
    # power of two), the stable sort and the counts; the check: lengths in [0, L] summing to L.
    "fbgemm::bucketize_sparse_features": Budget(
        11,
        checks=7,
        paths={
            "weights": 12,
            "bucketize_pos": 15,
            "weights + bucketize_pos": 16,
            "my_size not a power of two": 13,
            _UNIFORM_EVERY: 18,
        },
    ),
}
