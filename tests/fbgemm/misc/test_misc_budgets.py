"""The misc family held to its BUDGETS table (``native/fbgemm/misc/budgets.py``).

Each op is measured at two sizes, with the data checks off and on: the count must be the
table's exactly whatever the size, the AI-CPU count too (0).  ``repeat_arange``: int32 lengths
(the main path) and int64 (``int64``: the casts in and out of the int32 scans).
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (5, 3000)  # segments: the counts must not depend on them
ARANGE = "fbgemm::repeat_arange"
CASES = [(ARANGE, None, torch.int32), (ARANGE, "int64", torch.int64)]


def _measure(qualname: str, path: str | None, dtype: torch.dtype) -> None:
    for n in SIZES:
        lengths = torch.randint(0, 9, (n,), generator=torch.Generator().manual_seed(n))
        lengths = lengths.to(dtype).to(NPU)
        F.repeat_arange(lengths)  # warm the cached steps (native/_index.py) at this size
        c = assert_op_budget(
            lambda lengths=lengths: F.repeat_arange(lengths), qualname, path=path, exact=True
        )
        assert [r.op for r in c.calls] == ["fbgemm.repeat_arange.default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("misc", [(q, p) for q, p, _ in CASES])
