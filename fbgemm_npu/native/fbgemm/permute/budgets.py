"""Budgets of the permute family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/permute/test_permute_budgets.py`` measures each
(``test_permute_more_budgets.py`` the later ops: the sequence permute, the baddbmm, the duplicate
pooled permutes, the recats, whose counts are commented at their entries below).

The main path of the sparse-data permutes: weights given, ``permuted_lengths_sum`` given,
contiguous inputs; ``paths`` names the others, joined by ``" + "``.  The data checks (permute in
range, lengths >= 0 and within the values, sums consistent, no int32 scan wrapped) with
``permuted_lengths_sum`` given: one queued check, and the row bounds and the index clamped so the
gathers stay in bounds until it is read; without it (``no_permuted_lengths_sum``) they ride on
the sync that reads the output size back, and nothing after needs guarding.  A 2-D lengths that
no view flattens (transposed, every other row) is copied once (``strided_lengths``: weighted, a
ceiling of the other strided calls).

AI CPU: 0 on every path, int32 and int64 lengths alike: the scans, scatters and the index are
int32 (``_gather.py``), decided on the host from the sizes.  Two paths only sizes reach, measured
with ``_gather.INT32_LIMIT`` lowered: ``int64_index`` (values or output past 2**31 elements: the
same launches in int64, 5 of them on the AI CPU, a fused kernel is the remedy), and ``wide`` (no
``permuted_lengths_sum`` and ``T_out * values.numel()`` past 2**31: the exact output size is read
first by an int64 sum, one launch more, then the int32 route, or ``int64_index`` past 2**31).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

_UNSIZED = "no_permuted_lengths_sum"
_WIDE = f"{_UNSIZED} + wide"
_INT64 = "int64_index"
_INT64_NOTE = (
    "int64_index: values or output past 2**31 elements; the two scans, the two scatters and "
    "the index cumsum are int64 (AI CPU); a fused kernel closes it"
)
_SIZE_PATHS = {
    "no_weights": 9,
    _UNSIZED: 10,
    f"no_weights + {_UNSIZED}": 9,
    _WIDE: 11,
    _INT64: 10,
    f"{_UNSIZED} + {_INT64}": 11,
}
# without the length sum the checks ride on the size's read: nothing after it needs guarding
_SIZE_CHECKS = {_UNSIZED: 5, f"no_weights + {_UNSIZED}": 5, _WIDE: 5, f"{_UNSIZED} + {_INT64}": 5}
_SIZE_AI_CPU = {_INT64: 5, f"{_UNSIZED} + {_INT64}": 5}


# Launches: the lengths gather, both int32 scans into one buffer (a zero_ of its two leading
# zeros, two cumsum), a gather of the source rows' (start, end), the index (two index_add of a
# cached constant, a cumsum), one gather per output: 10 with weights, the catalogue's target
# (11 before, with repeat_interleave).  Checks (deferred, the default): aminmax of permute and
# of lengths, the permute clamp, the amin of the scans (a wrapped int32 scan), stack, bounds
# upload, clamp, eq, all (queued, no launch), then the row bounds and the index clamped (the
# gathers in bounds while the check is deferred): 11.
# The fused Triton path (_triton_permute.py): an offsets kernel (both scans, the permuted
# lengths, the data checks as flags) and a copy kernel (values and weights): 2 launches on every
# path below 2**31 (strided lengths are read by their strides: no copy); without the length sum
# the size is read back with the checks' flags (the one sync).  Checks: 0 launches more (the
# kernel's flag queued from a view).  int64_index / wide keep the tensor program.
_TRITON = {"call": 2, "no_weights": 2, _UNSIZED: 2, f"no_weights + {_UNSIZED}": 2}


def _sparse(strided: bool) -> Budget:
    paths = {**_SIZE_PATHS, "strided_lengths": 11} if strided else _SIZE_PATHS
    triton = {**_TRITON, "strided_lengths": 2} if strided else _TRITON
    return Budget(
        launches=10,
        checks=11,
        syncs=0,
        syncs_unsized=1,
        ai_cpu=0,
        path_ai_cpu=_SIZE_AI_CPU,
        paths=paths,
        path_checks=_SIZE_CHECKS,
        note=_INT64_NOTE,
        triton=triton,
        triton_checks=0,
    )


BUDGETS: dict[str, Budget] = {
    "fbgemm::permute_2D_sparse_data": _sparse(strided=True),
    "fbgemm::permute_sparse_data": _sparse(strided=True),  # upstream's older name, same kernel
    # the gathers write into the given buffers (out=): no launch more
    "fbgemm::permute_2D_sparse_preallocated_out": _sparse(strided=True),
    # 1-D lengths always view flat: no strided path
    "fbgemm::permute_1D_sparse_data": _sparse(strided=False),
    "fbgemm::permute_2D_sparse_data_input1D": _sparse(strided=False),
    # no size argument: the output size is always read back, and the checks ride on that sync
    "fbgemm::permute_sparse_features": Budget(
        launches=10,
        checks=5,
        syncs=1,
        ai_cpu=0,
        path_ai_cpu={_INT64: 5},
        paths={"no_weights": 9, "strided_lengths": 11, "wide": 11, _INT64: 11},
        note=_INT64_NOTE,
        triton={"call": 2, "no_weights": 2, "strided_lengths": 2},
        triton_checks=0,
    ),
    # index_put_ of a cached arange; the check that permute is a permutation: a clamp for safe
    # writes, a gather back, two compares, and, all (queued).  A permute no view flattens:
    # one copy.
    "fbgemm::invert_permute": Budget(launches=1, checks=6, ai_cpu=0, paths={"strided": 2}),
    # int64 (main path): the starts gather and their distance to the output starts, the row of
    # each element by segment ids (clamp, index_add, cumsum, all int32), a gather and the add of a
    # cached arange; int32: the starts gather, the distance, two index_add and a cumsum of the
    # segment arange (int32 wraps as upstream's).  The checks: permute in range, offsets from 0
    # to output_size without decreasing, then the permute clamped for the gather (and, int32,
    # the offsets for the scatters) until they are read
    "fbgemm::expand_into_jagged_permute": Budget(
        launches=7, checks=9, ai_cpu=0, paths={"int32": 5}, path_checks={"int32": 10}
    ),
}


# The source columns (full of the bounds buffer, its two zeros, the cuts read as a slice does:
# lt, add, clamp, copy), the gather of each block's (start, end), the widths (sub, clamp), their
# int32 cumsum, the one read of the output width, the segment arange (sub, two index_add,
# cumsum), the gather of the columns: 15.  Checks: aminmax of permute_list, its clamp (the
# gather in bounds), the cat that reads them with the width: 3.
_DUPLICATE = Budget(
    launches=15,
    checks=3,
    syncs=1,
    ai_cpu=0,
    paths={_INT64: 15},
    path_ai_cpu={_INT64: 4},
    target=6,
    note="the output width is data (one read, as upstream's CUDA kernel makes); ATen has no "
    "segment arange, so the columns take an int32 index_add + cumsum program (8 launches) and "
    "the cuts' slice semantics 4 more; int64_index: permute_list.numel() * width past 2**31, "
    "the scans and scatters in int64 (AI CPU).  A fused kernel would gather the blocks directly.",
)
# permute_2D_sparse_data without weights nor permuted_lengths_sum: its read of the output size
# carries the checks (5)
_SEQUENCE = Budget(
    launches=9,
    checks=5,
    syncs=1,
    ai_cpu=0,
    paths={"strided_lengths": 10, "wide": 10, _INT64: 10},
    path_ai_cpu={_INT64: 5},
    note=_INT64_NOTE,
    triton={"call": 2, "strided_lengths": 2},
    triton_checks=0,
)
BUDGETS.update(
    {
        "fbgemm::permute_sequence_embeddings": _SEQUENCE,
        # one baddbmm; the permutes and the bias broadcast are views
        "fbgemm::permute102_baddbmm_permute102": Budget(1, ai_cpu=0),
        "fbgemm::permute_duplicate_pooled_embs": _DUPLICATE,
        "fbgemm::permute_duplicate_pooled_embs_split": _DUPLICATE,
        # the backward of the split one is the split op on the gradient: its budget
        "fbgemm::permute_duplicate_pooled_embs_auto_grad": _DUPLICATE,
        "fbgemm::permute_duplicate_pooled_embs_auto_grad_split": _DUPLICATE,
        # one split_with_sizes_copy into views of the flat output
        "fbgemm::recat_embedding_grad_output": Budget(1, ai_cpu=0),
        "fbgemm::recat_embedding_grad_output_mixed_D": Budget(1, ai_cpu=0),
        # the ranks of the columns (segment ids: clamp, index_add, cumsum), a gather of their
        # (start, width) rows (stack, index_select), the positions (add, mul, add), index_put_.
        # Checks: ends (add), four comparisons into one bool buffer, all; the positions' clamp.
        "fbgemm::recat_embedding_grad_output_mixed_D_batch": Budget(9, checks=7, ai_cpu=0),
    }
)
