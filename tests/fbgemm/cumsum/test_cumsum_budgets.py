"""The cumsum family's launch and sync budgets, read from its ``budgets.py`` (written once there).

Every op and every path of its budget is measured at two sizes (the count must not depend on
them), with the data checks off and on (the family has none: the counts agree), on each input
form the ops take: 1-D, 2-D rows, a sliced view; ``strided`` is a view no reshape flattens
(transposed), which exclusive / inclusive clone before their scan.  Each form in int32 and
float16 (the main path) and in int64 (the ``int64`` path: AI-Core int32 scans of the two words,
no AI-CPU int64 ``cumsum``); the AI-CPU count of every path is held too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of

NPU = "npu"
SIZES = (24, 26 * 2048)  # elements: the counts must not depend on them
KINDS = ("complete", "exclusive", "inclusive", "batched_complete")
# Input forms: (name, view of a 1-D tensor of even length).
FORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "1-D": lambda t: t,
    "2-D": lambda t: t.view(2, -1),
    "sliced": lambda t: t[::2],
    "transposed": lambda t: t.view(2, -1).t(),  # complete scans it row by row as it is
}
DTYPES = (torch.int32, torch.float16, torch.int64)


@dataclass(frozen=True)
class Case:
    kind: str
    path: str | None
    form: str
    dtype: torch.dtype

    @property
    def qualname(self) -> str:
        return f"fbgemm::asynchronous_{self.kind}_cumsum"

    def __str__(self) -> str:
        return f"{self.kind}[{self.path or 'main'}, {self.form}, {self.dtype}]"


def _cases() -> list[Case]:
    cases = []
    for kind in KINDS:
        paths = budget_of(f"fbgemm::asynchronous_{kind}_cumsum").paths
        for dtype in DTYPES:
            for form in FORMS:
                if kind == "batched_complete" and form in ("1-D", "sliced"):
                    continue  # 2-D only
                parts = ["int64"] if dtype == torch.int64 else []
                if "strided" in paths and form == "transposed":
                    parts.append("strided")
                cases.append(Case(kind, " + ".join(parts) or None, form, dtype))
    return cases


CASES = _cases()


def _measure(case: Case) -> None:
    op = getattr(torch.ops.fbgemm, f"asynchronous_{case.kind}_cumsum")
    for n in SIZES:
        t = torch.randint(0, 40, (n,), device=NPU).to(case.dtype)
        t = FORMS[case.form](t)  # built before the count
        c = assert_op_budget(lambda t=t: op(t), case.qualname, path=case.path, exact=True)
        assert [r.op for r in c.calls] == [f"fbgemm.asynchronous_{case.kind}_cumsum.default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: Case, no_validation: None) -> None:
    _measure(case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: Case) -> None:
    _measure(case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("cumsum", [(c.qualname, c.path) for c in CASES])
