"""Budgets of the index-select family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/index_select/test_index_select_budgets.py``
measures each.

The main path: every size argument given, contiguous inputs and the costliest data (weights,
mixed row widths, half types); ``paths`` names the others, joined by ``" + "``.  Without a size
argument (``no_<argument>``) the output size is read back, and the data checks ride on that sync:
they cost less (``path_checks``).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

_BATCH = Budget(
    launches=11,
    checks=9,
    ai_cpu=0,
    paths={"permuted": 4, "one_width": 5, "one_width_permuted": 3, "backward": 2},
    path_checks={"backward": 0},
)

BUDGETS: dict[str, Budget] = {
    # the lengths gather, two int32 cumsums, a gather and a difference for the start distances,
    # five for the row index (rows_gather_index: the segment of every row by clamp + int32
    # index_add + cumsum, was an AI-CPU searchsorted; unsized, no clamp: the read size is the
    # last end), the row gather: 11 (was 10 with 3 AI-CPU launches: two int64 cumsums, the
    # searchsorted or repeat_interleave).  Checks 11 (unsized 7: the clamp), were 9 (4): an amin
    # of each cumsum, as int32 lengths summing past 2**31 wrap to a last sum that looked in
    # range; an aminmax of the lengths (each within values: the int32 scans narrow int64 ones).
    # Backward: zeros + index_add_ with the forward's gather index ("backward"); unsized, the
    # forward is the op itself (traceable: its fake sizes it), so the backward rebuilds the index
    # first: two cumsums, a gather, a difference, four for the row index (no clamp: the forward
    # checked the data).  Sized, checks 11, were 10: the row index clamped into values' rows
    # (the gather runs before deferred checks are read: memory-safe on bad data)
    "fbgemm::jagged_index_select": Budget(
        launches=11,
        checks=11,
        syncs=0,
        syncs_unsized=1,
        ai_cpu=0,
        paths={"no_num_dense_output_rows": 10, "backward": 2, "backward_unsized": 10},
        path_checks={"no_num_dense_output_rows": 7, "backward": 0, "backward_unsized": 0},
        note=(
            "AI CPU 0 with int32 and int64 lengths: int32 scans while len(indices) * "
            "values.size(0) and the output size are below 2**31 (int64 scans, on the AI CPU, "
            "above), the segment of every row by an int32 index_add + cumsum"
        ),
    ),
    # both offsets' starts in one cat behind a cached zero (was two AI-CPU int64 pads), a gather
    # and a difference, five for the row index (unsized four: no clamp), the row gather.
    # Checks 11, were 12 (the row index's clamp_max_ gone); unsized 9, were 7: the output
    # lengths' difference and the clamp are the checks' own now (no repeat_interleave needs them).
    # Sized, checks 11, were 10: the row index clamped into values' rows (memory-safe gather
    # under deferred checks)
    "fbgemm::jagged_index_select_2d_forward_v2": Budget(
        launches=9,
        checks=11,
        syncs=0,
        syncs_unsized=1,
        ai_cpu=0,
        paths={"no_num_dense_output_rows": 8},
        path_checks={"no_num_dense_output_rows": 9},
    ),
    # the select's program with the offsets' roles swapped, then zeros + index_add_; int64
    # values add with an int64 index_add_, which has no AI-Core kernel on a 910B.  Checks 11,
    # were 10: the destination index clamped into the output (memory-safe index_add_ under
    # deferred checks)
    "fbgemm::jagged_index_add_2d_forward_v2": Budget(
        launches=10,
        checks=11,
        ai_cpu=0,
        paths={"int64_values": 10},
        path_ai_cpu={"int64_values": 1},
        note=(
            "int64 values: the index_add_ of the rows runs on the AI CPU (no AI-Core int64 "
            "index_add on a 910B); a fused kernel is the remedy"
        ),
    ),
    # the selected segments (one add of a cached arange's strided view), the lengths gather, an
    # int32 cumsum, a gather and a difference, four for the row index (no clamp: the selected
    # sum is the output size), the gathers: one per output (was 12 with 2 AI-CPU launches: an
    # int64 cumsum and a repeat_interleave).  Checks 15 (unsized 10; the row index's clamp is
    # theirs, 1), were 12 (7): an aminmax
    # of all of offsets (int32 offsets that pass 2**31 wrap negative with steps that still
    # match the lengths) and an amin of the selected lengths' cumsum (the same wrap);
    # selected_lengths_sum is now held equal to the selected total (was: not above it) at no
    # cost.  Backward as jagged_index_select's: 2 sized; unsized the index is rebuilt first (the
    # selected segments 1, a cumsum, a gather, a difference, four for the row index).  Sized,
    # checks 15, were 14: the row index clamped into values (memory-safe gathers under deferred
    # checks)
    "fbgemm::keyed_jagged_index_select_dim1": Budget(
        launches=11,
        checks=15,
        syncs=0,
        syncs_unsized=1,
        ai_cpu=0,
        paths={
            "no_weights": 10,
            "no_selected_lengths_sum": 11,
            "no_weights + no_selected_lengths_sum": 10,
            "backward": 2,
            "backward_unsized": 10,
        },
        path_checks={
            "no_selected_lengths_sum": 10,
            "no_weights + no_selected_lengths_sum": 10,
            "backward": 0,
            "backward_unsized": 0,
        },
    ),
    # per-table constants reach the selected rows by _tables.segment_table (a pinned upload,
    # int32 index_add + cumsum; was a blocking upload and an AI-CPU repeat_interleave).  Mixed
    # row widths: a 10-launch element index and the gather; permuted: every output row has the
    # same runs, so a 3-launch index (upload of per-run constants, a gather of the index
    # columns, an addcmul; was 9); one width: a 4-launch row index (2 permuted); backward:
    # zeros + index_add_, nothing to check.  Checks 9, were 8: the gather index clamped into the
    # tables' buffer (the gather and the backward's index_add_ run before deferred checks are
    # read: memory-safe on bad indices)
    # the gather (checks: aminmax, clamp, the queued range check's 5); backward zeros + index_add_
    "fbgemm::index_select_dim0": Budget(
        launches=1, checks=7, ai_cpu=0, paths={"backward": 2}, path_checks={"backward": 0}
    ),
    "fbgemm::batch_index_select_dim0": _BATCH,
    # the list form's kernels on the three size tensors read on the host: CPU tensors (upstream's
    # usage, measured) cost nothing more; npu ones add one sync (one copy of all three)
    "fbgemm::batch_index_select_dim0_tensor": _BATCH,
    # One dtype per group (a mix is refused, as upstream's CUDA kernel does; it was 14 launches
    # and 13 checks per two dtypes): the members are concatenated and gathered at once
    # (8 launches for one row width), then one split_with_sizes_copy gives each output its own
    # tensor (+1 everywhere but one_member: they were views of one buffer, aliasing each
    # other); one member alone is one index_select.  A member no view turns into rows
    # (transposed) is copied: "transposed_members" is the most the conformance draws reach
    # (four members, all copied), the ceiling of calls with copies.  Checks 9 (one member 7):
    # the gather index clamped into the members' rows (memory-safe gather and backward
    # index_add_ under deferred checks)
    "fbgemm::group_index_select_dim0": Budget(
        launches=14,
        checks=9,
        ai_cpu=0,
        paths={"one_width": 8, "one_member": 1, "transposed_members": 18},
        path_checks={"one_member": 7},
        target=12,
        note=(
            "members of mixed row widths are concatenated before one gather reads them all, and "
            "the gathered rows are split into one tensor per output; the element index is 10 "
            "launches (the table constants per row, the row of every run of g elements by an "
            "int32 index_add + cumsum: no AI-CPU repeat_interleave, no blocking upload); a fused "
            "kernel reading the members in place and writing each output (as upstream's CUDA "
            "kernel) closes it"
        ),
    ),
    # the segment of every position (int32 index_add + cumsum; validating, a clamp first: checks
    # 9, were 8), the
    # starts' gather, a sub from a cached arange (was 6 with 2 AI-CPU launches: an int64 pad and
    # a repeat_interleave)
    "fbgemm::offsets_range": Budget(launches=4, checks=8, ai_cpu=0),
    # the ends' int32 cumsum, the lengths' cast to int32, an index_add of them at the ends and
    # its cumsum (the starts), a sub from a cached arange: 5 (was 6 with 3 AI-CPU launches: an
    # int64 cumsum and pad, a repeat_interleave); int32 t_in: 4 (no cast).  No shape: an int64
    # sum read back first (exact: it decides the scans' dtype).  Checks 9 (no shape: 3), were
    # 7 (2): an amin of the lengths' cumsum, which int32 lengths summing past 2**31 wrap (the
    # last sum alone can look right), an aminmax of the lengths (within the size: the int32 scans
    # narrow int64 lengths; no shape: at most the sum read, else the int64 sum wrapped), the
    # clamp of the ends
    "fbgemm::lengths_range": Budget(
        launches=5,
        checks=8,
        syncs=0,
        syncs_unsized=1,
        ai_cpu=0,
        paths={"no_shape": 6},
        path_checks={"no_shape": 3},
    ),
    "fbgemm::lengths_range_out": Budget(
        launches=5,
        checks=8,
        syncs=0,
        syncs_unsized=1,
        ai_cpu=0,
        paths={"no_shape": 6},
        path_checks={"no_shape": 3},
    ),
    # the segment of every row of batch_size elements (int32 index_add + cumsum; was an AI-CPU
    # searchsorted of every element), the rows' sum (half types into float32: the cast rides
    # on it, was two casts over target 6), zeros, index_add_, the inner buckets copied out (the
    # cast back, or a clone for "no_cast": float32 and integer values; was 5 as a slice of the
    # buckets at storage offset 1); "no_segments": batch_size <= 0 or fewer than two
    # boundaries, zeros; "int64_values": their index_add_ has no AI-Core kernel on a 910B.
    # Checks 9, were 8: the clamp of the boundaries before the int32 index_add
    "fbgemm::segment_sum_csr": Budget(
        launches=6,
        checks=8,
        ai_cpu=0,
        paths={"no_cast": 6, "no_segments": 1, "int64_values": 6},
        path_checks={"no_segments": 0},
        path_ai_cpu={"int64_values": 1},
        note=(
            "int64 values: the index_add_ of the rows' sums runs on the AI CPU (no AI-Core int64 "
            "index_add on a 910B); a fused kernel is the remedy"
        ),
    ),
    # linearize 4 (the feature of every index by int32 index_add + cumsum of every B-th offset:
    # strided offsets need no copy), the merged keys 2, unique 1, below / owners / reverse index
    # / unique ids read from the merged order 8 (was two AI-CPU searchsorted), ids at or past
    # hsc[T] made the last feature's 2 (owners capped at T - 1, below[T] set to the unique
    # count: upstream counts them in the last group; they were refused), lengths 10, offsets 2
    # (an int32 cumsum widened by a cat; was an AI-CPU int64 cumsum); unique reads its output
    # size back (no sync without indices).  Checks 18, were 12: every linear id at or above
    # hsc[0] (an aminmax and a difference); hsc[T] and the largest id small enough for the
    # merged keys; bad data kept harmless until the checks fire (clamps of the two count_le
    # points, the reverse index, the group boundaries and sizes: 5)
    "fbgemm::jagged_unique_indices": Budget(
        launches=30,
        checks=18,
        syncs=1,
        ai_cpu=1,
        paths={"strided_offsets": 30},
        target=20,
        note=(
            "AI CPU 1: torch.unique (_unique2) has no AI-Core kernel on a 910B, and the contract "
            "needs the number of unique ids (a sort of float keys is exact only below 2**24, "
            "and no size bounds the ids: hash_size_cumsum is data); the feature boundaries go "
            "into the same unique (keys id * (T + 2) + T + 1, boundary hsc[t] * (T + 2) + t), so "
            "the owners and group counts need no searchsorted (was 6 AI-CPU launches at 22).  "
            "Over the catalogue's 20: the merged order is decoded by index_add + cumsum, two "
            "index_copy_ and gathers (8 launches, 2 more give ids past hsc[T] to the last "
            "feature), the per-group lengths take 10; a fused "
            "kernel closes it"
        ),
    ),
}
