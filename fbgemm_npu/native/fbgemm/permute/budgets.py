"""Budgets of the permute family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/permute/test_permute_budgets.py`` measures each.

The main path of the sparse-data permutes: weights given, ``permuted_lengths_sum`` given,
contiguous inputs; ``paths`` names the others, joined by ``" + "``.  The data checks (permute in
range, lengths >= 0, sums consistent) cost 9 launches with ``permuted_lengths_sum`` given; without
it (``no_permuted_lengths_sum``) they ride on the sync that reads the output size back and cost 4.
A 2-D lengths that no view flattens (transposed, every other row) is copied once
(``strided_lengths``: weighted, a ceiling of the other strided calls).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# Why the weighted permutes are over the catalogue's 10: the weights need their own gather, and
# ATen has no op that builds the per-element source index ("segment arange") in fewer than the
# 4 launches used.  A fused kernel would do the whole op in about 3.
_WEIGHTS_NOTE = (
    "the weights' own gather; ATen has no 'segment arange' for the per-element source index "
    "(4 launches); a fused kernel (~3 launches) closes it"
)
_UNSIZED = "no_permuted_lengths_sum"
_SIZE_PATHS = {"no_weights": 10, _UNSIZED: 11, f"no_weights + {_UNSIZED}": 10}
_SIZE_CHECKS = {_UNSIZED: 4, f"no_weights + {_UNSIZED}": 4}


def _sparse(strided: bool) -> Budget:
    paths = {**_SIZE_PATHS, "strided_lengths": 12} if strided else _SIZE_PATHS
    return Budget(
        launches=11,
        checks=9,
        syncs=0,
        syncs_unsized=1,
        paths=paths,
        path_checks=_SIZE_CHECKS,
        target=10,
        note=_WEIGHTS_NOTE,
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
        launches=11,
        checks=4,
        syncs=1,
        paths={"no_weights": 10, "strided_lengths": 12},
        target=10,
        note=_WEIGHTS_NOTE,
    ),
    # arange + index_put_; the check that permute is a permutation: a clamp for safe writes, a
    # gather back, two compares, and, all, _assert_async.  A permute no view flattens: one copy.
    "fbgemm::invert_permute": Budget(launches=2, checks=7, paths={"strided": 3}),
    # the output lengths, the starts (gather + difference), the index (4); the checks: permute
    # in range, offsets from 0 to output_size without decreasing.  Checks 9, was 8: the offsets
    # are compared (ge + all), no longer judged by the amin of the lengths' difference, which
    # int32 offsets across 2**31 wrapped past (the gather then read by a wrong size)
    "fbgemm::expand_into_jagged_permute": Budget(launches=7, checks=9),
}
