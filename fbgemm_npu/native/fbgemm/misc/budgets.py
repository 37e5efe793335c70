"""Budgets of the misc family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/misc/test_misc_budgets.py`` measures each.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # the output size is data: int64 sum, one read (the sync; checks: amin and the cat of both);
    # then int32 cumsum of the ends, their clamp, index_add, cumsum; int64: the casts in and out
    "fbgemm::repeat_arange": Budget(launches=5, checks=2, syncs=1, ai_cpu=0, paths={"int64": 7}),
}
