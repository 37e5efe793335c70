"""The quantize_nbit family held to its BUDGETS table (``native/fbgemm/quantize_nbit/budgets.py``).

Each op and path is measured at two row counts, with the data checks off and on (the family has
none: the counts are equal): exactly the table's count whatever the size, 0 AI-CPU launches, no
sync.  Paths: 4-bit (main), 8-bit (``byte_codes``), float16 inputs / outputs (``half``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (3, 500)  # rows: the counts must not depend on them
P = "fbgemm::"
FLOAT = P + "FloatToFusedNBitRowwiseQuantizedSBHalf"
HALF = P + "HalfToFusedNBitRowwiseQuantizedSBHalf"
FOH = P + "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf"
MIN_MAX = P + "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax"
TO_FLOAT = P + "FusedNBitRowwiseQuantizedSBHalfToFloat"
TO_HALF = P + "FusedNBitRowwiseQuantizedSBHalfToHalf"
TO_FOH = P + "FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf"
FRONT = P + "FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf"
CASES = [
    (FLOAT, None),
    (FLOAT, "byte_codes"),
    (HALF, None),
    (HALF, "byte_codes"),
    (FOH, None),
    (FOH, "half"),
    (FOH, "byte_codes"),
    (FOH, "half_byte_codes"),
    (MIN_MAX, None),
    (MIN_MAX, "half"),
    (MIN_MAX, "byte_codes"),
    (MIN_MAX, "half_byte_codes"),
    (TO_FLOAT, None),
    (TO_HALF, None),
    (TO_FOH, None),
    (TO_FOH, "half"),
    (FRONT, None),
    (FRONT, "half"),
]


def _call(qualname: str, path: str | None, rows: int) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(rows)
    bit_rate = 8 if path is not None and path.endswith("byte_codes") else 4
    half = path is not None and path.startswith("half") or qualname == HALF
    x = torch.randn(rows, 64, generator=g).to(torch.float16 if half else torch.float32).to(NPU)
    if qualname in (FLOAT, HALF, FOH):
        fn = getattr(F, qualname.removeprefix(P))
        return lambda: fn(x, bit_rate)
    if qualname == MIN_MAX:
        bounds = torch.stack([x.amin(1) - 1, x.amax(1) + 1], 1)
        return lambda: F.FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax(
            x, bit_rate, bounds
        )
    q = F.FloatToFusedNBitRowwiseQuantizedSBHalf(x.float(), bit_rate)
    if qualname == TO_FLOAT:
        return lambda: F.FusedNBitRowwiseQuantizedSBHalfToFloat(q, bit_rate)
    if qualname == TO_HALF:
        return lambda: F.FusedNBitRowwiseQuantizedSBHalfToHalf(q, bit_rate)
    if qualname == TO_FOH:
        return lambda: F.FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf(q, bit_rate, int(half))
    dtype = 5 if half else 0  # bfloat16 output for the front layout's half path
    return lambda: F.FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf(q, bit_rate, dtype)


def _measure(qualname: str, path: str | None) -> None:
    for rows in SIZES:
        call = _call(qualname, path, rows)
        call()  # warm the cached powers (_pack.py) on this device
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]
        assert c.ai_cpu == 0 and c.syncs == 0


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("quantize_nbit", CASES)
