"""Budgets of the rank1 family (``mxrec::gather_for_rank1`` and its backward), one entry per
op; held by ``tests/mxrec/rank1/test_rank1_budgets.py``.

No syncs, no AI-CPU launch on a 910B: ``index_select`` (int32 / int64 indices) and a float32
``index_add_`` along dim 0 run on the AI Core.  The index is clamped and checked by a queued
``eq`` + ``all`` (2 launches with the checks on).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # the index clamp, index_select
    "mxrec::gather_for_rank1": Budget(launches=2, checks=2, ai_cpu=0),
    # the index clamp, the float32 zero table, index_add_; half: + the float32 cast of grad and
    # the cast of the table back
    "mxrec::index_select_for_rank1_backward": Budget(
        launches=3, checks=2, ai_cpu=0, paths={"half": 5}
    ),
}
