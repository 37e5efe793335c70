"""Budgets of the jagged2d family (``mxrec::concat_2d_jagged``, ``mxrec::split_2d_jagged``), one
entry per op; held by ``tests/mxrec/jagged2d/test_jagged2d_budgets.py``.

The row map (``_plan.py``): a ``(B + 1, K)`` table of segment starts and deltas (6 launches;
12 with a prefix or replacing), segment ids (3: int32 ``index_add`` + ``cumsum``, no
``searchsorted``), the delta gather, ``add``, ``clamp``: 12 (18).  Concat: + a ``cat`` of the
values and one ``index_select``.  Split: + a zeroed int64 buffer, the ``index_copy_`` of the
inverse permutation, one ``index_select`` per output, and (both sides jagged) the one read of
``oA[-1], oB[-1]`` (a ``cat`` of the two, 1 sync: the output sizes are the data's).  A dense
side: its offsets ``rows * arange`` (1), no read.  Data checks (queued; on split's jagged path
read with its sizes): one neighbour comparison over ``[0, o_0, 0, o_1, ..., o_B (, bound)]``
(the bounds' upload, ``cat``, ``ge``, ``all``).  No AI-CPU launch on a 910B (int32 / int64
arithmetic and comparisons, int32 ``index_add`` / ``cumsum``, int64 ``index_copy_``).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

_NOTE = (
    "a tensor program with no host read of the offsets: the per-segment table of starts and "
    "deltas (one op per column), segment ids (3) and the gather; a fused kernel (Rec SDK's "
    "AscendC op, GR's Triton one) does the row map in 1"
)
BUDGETS: dict[str, Budget] = {
    "mxrec::concat_2d_jagged": Budget(
        launches=14,
        checks=4,
        ai_cpu=0,
        # prefix: nPrefixFromRight > 0 or isReplace; dense: a dense side (its offsets) or
        # offsets of two dtypes (one widened)
        paths={"prefix": 20, "dense": 15, "dense_prefix": 21},
        target=8,
        note=_NOTE,
    ),
    "mxrec::split_2d_jagged": Budget(
        launches=17,
        checks=3,
        syncs=1,
        ai_cpu=0,
        # mixed: offsets of two dtypes (one widened); dense: a dense side (no read)
        paths={"prefix": 23, "mixed": 18, "mixed_prefix": 24, "dense": 17, "dense_prefix": 23},
        path_checks={"dense": 4, "dense_prefix": 4},
        target=8,
        note=_NOTE + "; the sync: with both sides jagged the output sizes oA[-1], oB[-1] are "
        "data (read once, with the queued checks; none on a dense side or in concat's backward)",
    ),
}
