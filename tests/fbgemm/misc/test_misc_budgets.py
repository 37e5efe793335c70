"""The misc family held to its BUDGETS table (``native/fbgemm/misc/budgets.py``).

Each op is measured at two sizes, with the data checks off and on: the count must be the
table's exactly whatever the size, the AI-CPU count too (0).  ``repeat_arange``: int32 lengths
(the main path) and int64 (``int64``: the casts in and out of the int32 scans);
``histogram_binning_calibration``: float32 logits, and float16 / bfloat16 (``half``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (5, 3000)  # segments: the counts must not depend on them
ARANGE = "fbgemm::repeat_arange"
HBC = "fbgemm::histogram_binning_calibration"
BY_FEATURE = "fbgemm::histogram_binning_calibration_by_feature"
GENERIC = "fbgemm::generic_histogram_binning_calibration_by_feature"
CASES = [
    (ARANGE, None, torch.int32),
    (ARANGE, "int64", torch.int64),
    (HBC, None, torch.float32),
    (HBC, "half", torch.float16),
    (HBC, "half", torch.bfloat16),
    (BY_FEATURE, None, torch.float32),
    (BY_FEATURE, "half", torch.float16),
    (GENERIC, None, torch.float32),
    (GENERIC, "half", torch.bfloat16),
]


def _call(qualname: str, n: int, dtype: torch.dtype) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(n)
    if qualname == ARANGE:
        lengths = torch.randint(0, 9, (n,), generator=g).to(dtype).to(NPU)
        return lambda: F.repeat_arange(lengths)
    logit = torch.randn(n, generator=g).to(dtype).to(NPU)
    if qualname != HBC:  # int64 segment lengths and values: 3 segments of 5 bins
        sl = torch.randint(0, 3, (n,), generator=g)
        sv = torch.randint(-1, 5, (int(sl.sum()),), generator=g)
        ex = torch.randint(0, 30, (20,), generator=g).double()
        pos = (ex * torch.rand(20, generator=g, dtype=torch.float64)).floor()
        edges = torch.tensor([0.2, 0.4, 0.6, 0.8], dtype=torch.float64).to(NPU)
        sl, sv, ex, pos = (t.to(NPU) for t in (sl, sv, ex, pos))
        if qualname == GENERIC:
            return lambda: F.generic_histogram_binning_calibration_by_feature(
                logit, sv, sl, 3, ex, pos, edges, 0.4, 5, 0.9
            )
        return lambda: F.histogram_binning_calibration_by_feature(
            logit, sv, sl, 3, ex, pos, 5, 0.4, 0.0, 1.0, 5, 0.9
        )
    ex = torch.randint(0, 30, (20,), generator=g).double()
    pos = (ex * torch.rand(20, generator=g, dtype=torch.float64)).floor()
    ex, pos = ex.to(NPU), pos.to(NPU)
    return lambda: F.histogram_binning_calibration(logit, ex, pos, 0.4, 0.0, 1.0, 10, 0.9995)


def _measure(qualname: str, path: str | None, dtype: torch.dtype) -> None:
    for n in SIZES:
        call = _call(qualname, n, dtype)
        call()  # warm the cached steps (native/_index.py) at this size
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("misc", [(q, p) for q, p, _ in CASES])
