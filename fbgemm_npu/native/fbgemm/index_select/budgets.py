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

BUDGETS: dict[str, Budget] = {
    # the lengths gather, two cumsums, a gather and a difference for the start distances, four
    # for the row index, the row gather.  Checks 11 (unsized 6), were 9 (4): an amin of each
    # cumsum, as int32 lengths summing past 2**31 wrap to a last sum that looked in range.
    # Backward: zeros + index_add_ with the forward's gather index ("backward"); unsized, the
    # forward is the op itself (traceable: its fake sizes it), so the backward rebuilds the index
    # first: two cumsums, a gather, a difference, four for the row index (was 3 with a zeros
    # for the output lengths' gradient, now not materialized; not traceable unsized)
    "fbgemm::jagged_index_select": Budget(
        launches=10,
        checks=11,
        syncs=0,
        syncs_unsized=1,
        paths={"no_num_dense_output_rows": 10, "backward": 2, "backward_unsized": 10},
        path_checks={"no_num_dense_output_rows": 6, "backward": 0, "backward_unsized": 0},
    ),
    # the output size given, a repeat_interleave builds the row index (no searchsorted + gather)
    "fbgemm::jagged_index_select_2d_forward_v2": Budget(
        launches=9,
        checks=12,
        syncs=0,
        syncs_unsized=1,
        paths={"no_num_dense_output_rows": 10},
        path_checks={"no_num_dense_output_rows": 7},
    ),
    "fbgemm::jagged_index_add_2d_forward_v2": Budget(launches=10, checks=12),
    # segment ids (arange + add), the lengths gather, the row index, the gathers: one per output.
    # Checks 14 (unsized 9), were 12 (7): an aminmax of all of offsets (int32 offsets that pass
    # 2**31 wrap negative with steps that still match the lengths) and an amin of the selected
    # lengths' cumsum (the same wrap); selected_lengths_sum is now held equal to the selected
    # total (was: not above it) at no cost.  Backward as jagged_index_select's: 2 sized; unsized
    # the index is rebuilt first (segment ids 2, a cumsum, a gather, a difference, four for the
    # row index; was 3, not traceable)
    "fbgemm::keyed_jagged_index_select_dim1": Budget(
        launches=12,
        checks=14,
        syncs=0,
        syncs_unsized=1,
        paths={
            "no_weights": 11,
            "no_selected_lengths_sum": 12,
            "no_weights + no_selected_lengths_sum": 11,
            "backward": 2,
            "backward_unsized": 11,
        },
        path_checks={
            "no_selected_lengths_sum": 9,
            "no_weights + no_selected_lengths_sum": 9,
            "backward": 0,
            "backward_unsized": 0,
        },
    ),
    # mixed row widths: a 10-launch element index and the gather; permuted a 9-launch one (was
    # 10: its (n, T) start distances are one addcmul onto a row-major base, no out= that
    # functionalization lays out transposed); one width: a 4-launch row index (2 permuted);
    # backward: zeros + index_add_, nothing to check
    "fbgemm::batch_index_select_dim0": Budget(
        launches=11,
        checks=9,
        paths={"permuted": 10, "one_width": 5, "one_width_permuted": 3, "backward": 2},
        path_checks={"backward": 0},
    ),
    # Per distinct input dtype: the members of one dtype are concatenated and gathered at once
    # (8 launches for one row width), then one split_with_sizes_copy gives each output its own
    # tensor (+1 everywhere but one_member: they were views of one buffer, aliasing each
    # other); one member alone is one index_select.  Each further dtype adds 3 check launches
    # ("two_dtypes").  A member no view turns into rows (transposed) is copied:
    # "transposed_members" is the most the conformance draws reach (four members, all copied),
    # the ceiling of calls with copies or several dtypes.
    "fbgemm::group_index_select_dim0": Budget(
        launches=14,
        checks=9,
        per="distinct dtype",
        paths={"one_width": 8, "one_member": 1, "two_dtypes": 14, "transposed_members": 18},
        path_checks={"one_member": 7, "two_dtypes": 12},
        target=12,
        note=(
            "members of mixed row widths are concatenated before one gather reads them all, and "
            "the gathered rows are split into one tensor per output; a fused kernel reading the "
            "members in place and writing each output (as upstream's CUDA kernel) closes it"
        ),
    ),
    "fbgemm::offsets_range": Budget(launches=6, checks=8),
    # checks 8 (no shape: 3), were 7 (2): an amin of the lengths' cumsum, which int32 lengths
    # summing past 2**31 wrap (the last sum alone can look right)
    "fbgemm::lengths_range": Budget(
        launches=6,
        checks=8,
        syncs=0,
        syncs_unsized=1,
        paths={"no_shape": 6},
        path_checks={"no_shape": 3},
    ),
    "fbgemm::lengths_range_out": Budget(
        launches=6,
        checks=8,
        syncs=0,
        syncs_unsized=1,
        paths={"no_shape": 6},
        path_checks={"no_shape": 3},
    ),
    # half types sum in a float32 accumulator (two casts); "no_cast": float32 and integer
    # values, whose inner buckets are cloned out (was 5: the output was a slice of the buckets
    # at storage offset 1); "no_segments": batch_size <= 0 or fewer than two boundaries, zeros
    "fbgemm::segment_sum_csr": Budget(
        launches=7,
        checks=8,
        paths={"no_cast": 6, "no_segments": 1},
        path_checks={"no_segments": 0},
        target=6,
        note="float16 / bfloat16 sum in a float32 accumulator: two casts; a fused kernel closes it",
    ),
    # linearize 5, unique 1, delinearize 3 (searchsorted of the owners, gather, sub: upstream's
    # reading of an id past its feature's size; was a 1-launch scatter of indices), lengths 11,
    # offsets 2; unique reads its output size back (no sync without indices).  Strided offsets
    # are copied once for searchsorted.  Checks 15, were 12: every linear id inside
    # [hsc[0], hsc[T]) (an aminmax and two differences), else the lengths miss ids
    "fbgemm::jagged_unique_indices": Budget(
        launches=22,
        checks=15,
        syncs=1,
        paths={"strided_offsets": 23},
        target=20,
        note=(
            "the delinearization by owner feature (3 launches, upstream's) and strided offsets' "
            "copy for searchsorted take it past the catalogue's 20; a fused kernel closes it"
        ),
    ),
}
