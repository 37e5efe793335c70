"""The quantize_mx family held to its BUDGETS table (``native/fbgemm/quantize_mx/budgets.py``):
each op at two sizes, data checks off and on (the family has none), the count exact and the
AI-CPU count 0.  Paths: ``floor`` (rounding modes floor / ceil), ``stochastic``, ``pad`` (a last
dim not a multiple of the group)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
SIZES = ((3, 64), (300, 256))
QUANT = "fbgemm::quantize_mx"
DEQUANT = "fbgemm::dequantize_mx"
CASES = [(QUANT, None), (QUANT, "floor"), (QUANT, "stochastic"), (QUANT, "pad"), (DEQUANT, None)]
MODES = {None: None, "floor": 1, "stochastic": 3, "pad": 2}


def _call(qualname: str, path: str | None, shape: tuple[int, int]) -> Callable[[], Any]:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[0])).to("npu")
    if path == "pad":
        x = x[:, :-5]
    if qualname == QUANT:
        return lambda: F.quantize_mx(x, 8, 2, 3, 6.0, 32, MODES[path])
    q = F.quantize_mx(x, 8, 2, 3, 6.0, 32, None)
    return lambda: F.dequantize_mx(q, 32)


def _measure(qualname: str, path: str | None) -> None:
    for shape in SIZES:
        _call(qualname, path, shape)()  # the LUT's one upload per device
        call = _call(qualname, path, shape)
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("quantize_mx", CASES)
