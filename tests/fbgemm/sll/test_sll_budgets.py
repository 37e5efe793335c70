"""The sll family held to its BUDGETS table (``native/fbgemm/sll/budgets.py``).

Each op is measured at two sizes (B, max_len, D), with the data checks off and on, int64 and
int32 offsets / lengths: the count must be the table's exactly whatever the size, the AI-CPU
count 0, the syncs those of the budget (the jagged-output ops read their output size once).
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of
from fbgemm_npu.testing.sll_inputs import OPS, move, sll_args

F = torch.ops.fbgemm
SIZES = ((4, 3, 2), (96, 24, 16))  # (B, max_len, D): the counts must not depend on them
CASES = [
    (op, "int32" if index == torch.int32 and "int32" in budget_of(f"fbgemm::{op}").paths else None,
     index)
    for op in OPS
    for index in (torch.int64, torch.int32)
]  # fmt: skip
# N above every input's rows: the padding is bounded by the rows, the sequences' ends checked too
CASES += [
    (op, "n_past_rows", torch.int64) for op in ("sll_jagged_dense_bmm", "sll_jagged_jagged_bmm")
]


def _measure(op: str, path: str | None, index: torch.dtype) -> None:
    qualname = f"fbgemm::{op}"
    for size in SIZES:
        cap = {"cap": size[0] * size[1] + 5} if path == "n_past_rows" else {}
        args = move(sll_args(op, *size, seed=size[0], index=index, **cap), "npu")
        fn = getattr(F, op)
        fn(*args)  # warm the cached aranges (native/_index.py) at this size
        c = assert_op_budget(lambda f=fn, a=args: f(*a), qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]
        assert c.ai_cpu == 0


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("sll", [(f"fbgemm::{q}", p) for q, p, _ in CASES])
