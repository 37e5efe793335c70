"""Budgets of the cumsum family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/cumsum/test_cumsum_budgets.py`` measures each.

No data checks (every input of a valid dtype and rank has a result) and no syncs.  The main path
is int32 and the float types (``cumsum`` on the AI Core); ``int64`` is built from int32 scans of
the two words of each element (``cumsum.py``: ``_complete_int64``, ``_scan_int64``), because an
int64 ``cumsum`` runs on a 910B's AI CPU: exact mod 2**64, 0 AI-CPU launches, 2-3 launches more.
``strided``: a view that no reshape can flatten in logical order (a transposed 2-D or 3-D tensor)
is cloned before the scan; a 1-D slice with a step flattens as it is.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # zero_ of the leading column and cumsum.out into the rest; a strided input is scanned as it
    # is, row by row, so no path costs more.  int64: zero_, the low words' scan, an int64 add
    # (the carries), the high words' scan
    "fbgemm::asynchronous_complete_cumsum": Budget(launches=2, ai_cpu=0, paths={"int64": 4}),
    # as complete on 2-D: zero_ of the leading column, cumsum.out of the rows (int64: 4)
    "fbgemm::asynchronous_batched_complete_cumsum": Budget(
        launches=2, ai_cpu=0, paths={"int64": 4}
    ),
    # zero_ of out[0] and cumsum.out of the flattened input (all but its last element) into out[1:]
    "fbgemm::asynchronous_exclusive_cumsum": Budget(
        launches=2, ai_cpu=0, paths={"strided": 3, "int64": 4, "int64 + strided": 5}
    ),
    # int64: both words' scan, out - t_in (the carries), a difference of high words, their scan
    "fbgemm::asynchronous_inclusive_cumsum": Budget(
        launches=1, ai_cpu=0, paths={"strided": 2, "int64": 4, "int64 + strided": 5}
    ),
}
