"""Budgets of the cumsum family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/cumsum/test_cumsum_budgets.py`` measures each.

No data checks (every input of a valid dtype and rank has a result) and no syncs.  ``strided``:
a view that no reshape can flatten in logical order (a transposed 2-D or 3-D tensor) is cloned
before the scan; a 1-D slice with a step flattens as it is.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # zero_ of the leading column and cumsum.out into the rest; a strided input is scanned as it
    # is, row by row, so no path costs more
    "fbgemm::asynchronous_complete_cumsum": Budget(launches=2),
    # zero_ of out[0] and cumsum.out of the flattened input (all but its last element) into out[1:]
    "fbgemm::asynchronous_exclusive_cumsum": Budget(launches=2, paths={"strided": 3}),
    "fbgemm::asynchronous_inclusive_cumsum": Budget(launches=1, paths={"strided": 2}),
}
