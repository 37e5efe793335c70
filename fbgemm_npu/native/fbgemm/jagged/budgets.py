"""Budgets of the jagged family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/jagged/test_jagged_budgets.py`` measures each.

The main path is one jagged dim, contiguous inputs and every size argument given; ``paths``
names the others.  Every count is exact: ``launches`` and ``paths`` with the data checks off
(the kernel alone), ``checks`` and ``path_checks`` what the data checks add on that path.  No
launch runs on a 910B's AI CPU (``ai_cpu=0`` everywhere: int32 and int64 offsets, every values
dtype; docs/hardware.md), and no upload stalls the host.

The kernel's count grows by one level of the dense index with each further jagged dim (5
launches, the same in every op: clamp, the pairs' gather, add, ge, logical_or).  The data check
(every offset in ``[0, 2**31)``, as upstream reads them as 32-bit ints, and every position the
offsets reach inside the tensor it reads or writes) costs, for one jagged dim, 7 launches for a
gather (the range compare, the rows' where and ge, their cat, any, not, the assert) and 6 for a
scatter (whose padding positions are marked -1 already: the rows' ge only); each further dim
adds 4 (its range compare, a subtract, the parent rows' where and ge).  So every ``two_dims`` /
``three_dims`` path has its own ``path_checks``; the ``two_dtypes`` paths, which run the kernel
and its check once per dense input, twice that.
The fused Triton path (``triton``, one jagged dim, ``_triton_dense.py``): to_dense one kernel
that writes every output element; to_jagged a ``zeros`` and one scatter kernel (strided inputs
read through their strides, no copy); its data check (``triton_checks``) is a flag per program
written by the kernel, then an ``any`` and a ``logical_not``: 2 launches for any dtype.
The ops that return offsets (``-> (Tensor, Tensor[])``) copy them, a ``clone`` per jagged dim
(the schemas declare no alias, so an output may not be an input): one launch per dim more than
their ``_forward`` variants, none in the checks.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# The data check of 2 and 3 jagged dims of a gather (6 for one) and of a scatter (5 for one).
_READ_DIMS = {"two_dims": 10, "three_dims": 14}
_WRITE_DIMS = {"two_dims": 9, "three_dims": 13}
# A gather's int64 values (``int64_values`` paths): their padding fill is a where, whose scalar
# costs a launch of its own (int64 masked_fill_ runs on a 910B's AI CPU); the checks the same.
_READ_DIMS_INT64 = {"two_dims_int64_values": 10, "three_dims_int64_values": 14}

# Jagged -> dense: the dense index (add of a cached arange and compare for the first dim; a
# further dim adds a clamp, a gather of the (begin, end) pairs, add, compare and or), the rows
# clamped into the values, one gather and the fill of its padding positions.
_TO_DENSE = Budget(
    launches=5,
    checks=6,
    ai_cpu=0,
    paths={
        "two_dims": 10,
        "three_dims": 15,
        "int64_values": 6,
        "two_dims_int64_values": 11,
        "three_dims_int64_values": 16,
    },
    path_checks={**_READ_DIMS, **_READ_DIMS_INT64},
    triton={"call": 1, "int64_values": 1},
    triton_checks=2,
)

# The one-offsets ops, jagged_1d_to_dense and jagged_2d_to_dense: the same program and kernel.
_ONE_TO_DENSE = Budget(
    launches=5,
    checks=6,
    ai_cpu=0,
    paths={"int64_values": 6},
    triton={"call": 1},
    triton_checks=2,
)

# Dense -> jagged: the same index, its padding positions sent to a spare row (where, remainder),
# then a zeroed output and one scatter.  Without total_L the
# output length is read back (an amax and its sync, as upstream reads it); a dense input that no
# view flattens to [rows, D] (transposed) is copied once.
_TO_JAGGED = Budget(
    launches=6,
    checks=5,
    syncs=0,
    syncs_unsized=1,
    ai_cpu=0,
    paths={
        "no_total_L": 7,
        "strided_dense": 7,
        "strided_dense_no_total_L": 8,
        "two_dims": 11,
        "three_dims": 16,
        "two_dims_no_total_L": 12,
        "three_dims_no_total_L": 17,
    },
    path_checks={**_WRITE_DIMS, "two_dims_no_total_L": 9, "three_dims_no_total_L": 13},
    triton={"call": 2, "strided_dense": 2},
    triton_checks=2,
)

# to_jagged of y (a strided y is copied, as above) and the product or sum with x_values.
_JAGGED_OUTPUT = Budget(
    launches=7,
    checks=5,
    ai_cpu=0,
    paths={"strided_y": 8, "two_dims": 12, "three_dims": 17},
    path_checks=_WRITE_DIMS,
)
# The same, plus the copy of each offsets tensor returned (one per jagged dim).
_JAGGED_OUTPUT_OFFSETS = Budget(
    launches=8,
    checks=5,
    ai_cpu=0,
    paths={"strided_y": 9, "two_dims": 14, "three_dims": 20},
    path_checks=_WRITE_DIMS,
)

# y_0 and y_1 of one dtype and shape are stacked and scattered at once (stack, the index, the
# zeroed output, one scatter, two adds; a strided y costs nothing more, the stack copies it).
# Otherwise ("two_dtypes") each goes through its own to_jagged, index and check included, then
# two adds; "two_dtypes_strided_y": y_0 and y_1 both strided, each copied once.
_DENSE_DENSE = Budget(
    launches=9,
    checks=5,
    ai_cpu=0,
    paths={
        "two_dims": 14,
        "three_dims": 19,
        "two_dtypes": 14,
        "two_dtypes_strided_y": 16,
        "two_dims_two_dtypes": 24,
        "three_dims_two_dtypes": 34,
    },
    path_checks={
        **_WRITE_DIMS,
        "two_dtypes": 10,
        "two_dtypes_strided_y": 10,
        "two_dims_two_dtypes": 18,
        "three_dims_two_dtypes": 26,
    },
)
# The same, plus the copy of each offsets tensor returned (one per jagged dim).
_DENSE_DENSE_OFFSETS = Budget(
    launches=10,
    checks=5,
    ai_cpu=0,
    paths={
        "two_dims": 16,
        "three_dims": 22,
        "two_dtypes": 15,
        "two_dtypes_strided_y": 17,
        "two_dims_two_dtypes": 26,
        "three_dims_two_dtypes": 37,
    },
    path_checks=_DENSE_DENSE.path_checks,
)

# One pinned non-blocking upload of the grid columns' keys, padding bounds and positions (host
# lists), the int32 scan of the lengths (a cat with cached zeros, cumsum), one gather of each
# column's row ends, the grid index (sub, le, add, clamp), the gather of the values and its
# padding fill, one split into the keys' own tensors, for any number of keys (T > 1); int32
# lengths cost the same, their check one launch less (no int64 length to fit the int32 scan);
# int64 values one launch more (the padding fill's scalar, as in _TO_DENSE).
_STACKED = Budget(
    launches=11,
    checks=7,
    ai_cpu=0,
    paths={"int32_lengths": 11, "int64_values": 12},
    path_checks={"int32_lengths": 6},
    target=8,
    note=(
        "the per-key constants (host lists) cost an upload and a gather, the row ends a cat "
        "and a cumsum (int32: AI Core), the padding a sub, a compare and a fill, and the keys' "
        "outputs (each its own tensor) a split copy; a fused kernel reading the constants as "
        "kernel arguments and writing each key's output closes it"
    ),
)

BUDGETS: dict[str, Budget] = {
    # upstream's composite: its forward op, run by our autograd kernel (no launch of its own)
    "fbgemm::jagged_to_padded_dense": _TO_DENSE,
    "fbgemm::jagged_to_padded_dense_forward": _TO_DENSE,
    "fbgemm::jagged_1d_to_dense": _ONE_TO_DENSE,
    "fbgemm::jagged_2d_to_dense": _ONE_TO_DENSE,
    # to_jagged of the gradient, total_L always given
    "fbgemm::jagged_to_padded_dense_backward": Budget(
        launches=6,
        checks=5,
        ai_cpu=0,
        paths={"strided_grad_output": 7, "two_dims": 11, "three_dims": 16},
        path_checks=_WRITE_DIMS,
        triton={"call": 2, "strided_grad_output": 2},
        triton_checks=2,
    ),
    "fbgemm::dense_to_jagged": _TO_JAGGED,  # upstream's composite, as jagged_to_padded_dense
    "fbgemm::dense_to_jagged_forward": _TO_JAGGED,
    # to_dense of x at y's lengths, then one add (a strided or broadcast y costs nothing more)
    "fbgemm::jagged_dense_elementwise_add": Budget(
        launches=6,
        checks=6,
        ai_cpu=0,
        paths={
            "two_dims": 11,
            "three_dims": 16,
            "int64_values": 7,
            "two_dims_int64_values": 12,
            "three_dims_int64_values": 17,
        },
        path_checks={**_READ_DIMS, **_READ_DIMS_INT64},
    ),
    "fbgemm::jagged_dense_elementwise_mul": _JAGGED_OUTPUT_OFFSETS,
    "fbgemm::jagged_dense_elementwise_mul_forward": _JAGGED_OUTPUT,
    "fbgemm::jagged_dense_elementwise_add_jagged_output": _JAGGED_OUTPUT_OFFSETS,
    # one index for both gradients: the scatter of y and a product for x's, a product into a
    # padded buffer, its spare row zeroed, and the gather for y's; a strided (permuted) y is
    # copied once to flatten it and once more to give y's gradient y's strides (upstream's Meta)
    "fbgemm::jagged_dense_elementwise_mul_backward": Budget(
        launches=10,
        checks=5,
        ai_cpu=0,
        paths={"strided_y": 12, "two_dims": 15, "three_dims": 20},
        path_checks=_WRITE_DIMS,
    ),
    "fbgemm::jagged_dense_dense_elementwise_add_jagged_output": _DENSE_DENSE_OFFSETS,
    "fbgemm::jagged_dense_dense_elementwise_add_jagged_output_forward": _DENSE_DENSE,
    # the [B, L] index (add, ge, clamp), the row gather, the broadcast product, its padding fill,
    # the sum (checks: the offsets' int32 range and order, and the rows read)
    "fbgemm::batched_dense_vec_jagged_2d_mul": Budget(launches=7, checks=7, ai_cpu=0),
    "fbgemm::batched_dense_vec_jagged_2d_mul_forward": Budget(launches=7, checks=7, ai_cpu=0),
    "fbgemm::batched_dense_vec_jagged_2d_mul_backward": Budget(
        launches=11,
        checks=7,
        ai_cpu=0,
        target=10,
        note=(
            "two gradients on the forward's index (add, ge, clamp, the row gather): v's "
            "(product, padding fill, a sum written in v's layout) and a's (product, padding "
            "fill, zeros, index_add_); each padding fill guards a gradient against non-finite "
            "inputs upstream never reads; a fused kernel closes it"
        ),
    ),
    # softmax_bmm.py: the [B, max_L] index (add, ge, clamp), the row gather, -inf at the padding,
    # softmax, the scatter back (where, remainder, zeros, index_copy_); checks: the offsets'
    # int32 range, the rows read and their order
    "fbgemm::jagged_softmax": Budget(launches=11, checks=7, ai_cpu=0),  # + the offsets' clone
    "fbgemm::jagged_softmax_forward": Budget(launches=10, checks=7, ai_cpu=0),
    # both gathers, the product, its padding fill, sum, sub, mul, the scatter back
    "fbgemm::jagged_softmax_backward": Budget(launches=14, checks=7, ai_cpu=0),
    # bmm.py: the [B, max_L] index (add, ge, clamp), a gather and its padding fill per jagged
    # input, one bmm; jagged_dense_bmm scatters back (where, remainder, zeros, index_copy_) and
    # copies the offsets it returns; checks: the int32 range and rows read (+ order: a scatter)
    "fbgemm::jagged_jagged_bmm": Budget(launches=8, checks=6, ai_cpu=0),
    "fbgemm::jagged_jagged_bmm_forward": Budget(launches=8, checks=6, ai_cpu=0),
    "fbgemm::jagged_dense_bmm": Budget(launches=11, checks=7, ai_cpu=0),
    "fbgemm::jagged_dense_bmm_forward": Budget(launches=10, checks=7, ai_cpu=0),
    "fbgemm::stacked_jagged_1d_to_dense": _STACKED,
    "fbgemm::stacked_jagged_2d_to_dense": _STACKED,
    # slicing.py: the new lengths (sub, clamp), both lengths' int32 bounds (cast, cumsum, sub
    # each), the first rows (add), upstream's two start checks (amin each, always: they ride on
    # the read), the one sync (the output size; its cat), the segment gather (segment_ids'
    # three, base sub, gather, arange add, clamp), one index_select; checks: the lengths'
    # aminmax and sum, the furthest read (add, gt, where, amax)
    "fbgemm::jagged_slice": Budget(launches=20, checks=7, syncs=1, ai_cpu=0),
    # both bounds (6), count (sub, sub, minimum, clamp), first / end / shift (4), stack, the
    # segment ids (3), the triple's gather, the written test (lt, ge, or), rows (add, clamp),
    # index_select, the zero fill; checks: both lengths' aminmax + sum, both starts' amin, the
    # furthest write and read (gt, where, amax, add, where, amax) and the queued check (5)
    "fbgemm::jagged_slice_forward": Budget(launches=26, checks=19, ai_cpu=0),
    # select.py: the lengths' bounds (3), the mask's cast, zeros, cumsum, both bounds clamped and
    # gathered, sub, the lengths' dtype cast, the sync's cat, segment_ids (3), clamp, the gather;
    # int32 lengths: the two casts go; checks: aminmax, sum, the mask past the rows (sub)
    "fbgemm::masked_select_jagged_1d": Budget(
        launches=17, checks=4, syncs=1, ai_cpu=0, paths={"int32_lengths": 15}
    ),
    # clamp (the kept lengths), both bounds (6), base sub, the sync's cat, the segment gather
    # (6), index_select; int32 lengths: one cast less each side... (the lengths' own cast);
    # checks: aminmax, sum, the furthest read (gt, add, where, amax)
    "fbgemm::jagged_1d_to_truncated_values": Budget(
        launches=15, checks=8, syncs=1, ai_cpu=0, paths={"int32_lengths": 13}
    ),
    # accumulate.py: zeros, a one, stack, clamp, index_add_ (float32 weights; others: their
    # float32 cast); checks: the ids' aminmax and the queued check (5)
    "fbgemm::jagged_acc_weights_and_counts": Budget(
        launches=5, checks=6, ai_cpu=0, paths={"cast": 6}
    ),
    # the features' bounds (cast), hash_size_offsets (arange), segment_ids (3), the outside
    # positions (lt, where), the segment max: int64 ids in two int32 passes (floor div, cast,
    # full, scatter_reduce; the low words: mul, sub, add, cast, gather, eq, where, full,
    # scatter_reduce; recombined: casts, mul, sub, add), empty features (gt, add, where, cast),
    # the complete cumsum (ours: int64 as two int32-word scans); int32 ids: one pass, int32
    # scan; checks: first / last bound, the bounds' order (ge, all), the queued check (5)
    "fbgemm::jagged_hash_size_cumsum": Budget(launches=35, checks=7, ai_cpu=0, paths={"int32": 17}),
    # pack.py: the int32 offsets (cast, zeros, cumsum; int32 lengths: no cast), then the
    # family's gather (to_dense: add, ge, clamp, index_select, the padding fill); v2's presence
    # mask: one lt; the backward the family's scatter (to_jagged: add, ge, where, remainder,
    # zeros, index_copy_); checks: the lengths' amin, amax (int64), sum and queued check (8),
    # and to_dense's / to_jagged's own (6 / 5)
    "fbgemm::pack_segments": Budget(
        launches=8,
        checks=14,
        ai_cpu=0,
        paths={"int32_lengths": 7},
        path_checks={"int32_lengths": 13},
    ),
    # (int64 values: their padding fill is a where, whose scalar costs a launch: the family's
    # to_dense int64_values path)
    "fbgemm::pack_segments_v2": Budget(
        launches=8,
        checks=14,
        ai_cpu=0,
        paths={"presence_mask": 9, "int64_values": 9, "int64_values_presence_mask": 10},
    ),
    # (a data no view flattens to [B * L, D], transposed say, is copied once: strided_data)
    "fbgemm::pack_segments_backward": Budget(
        launches=9,
        checks=13,
        ai_cpu=0,
        paths={"int32_lengths": 8, "strided_data": 10},
        path_checks={"int32_lengths": 12},
    ),
}
