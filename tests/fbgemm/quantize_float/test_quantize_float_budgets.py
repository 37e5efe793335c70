"""The quantize_float family held to its BUDGETS table (``native/fbgemm/quantize_float/
budgets.py``): each op at two sizes, data checks off and on (the family has none), the count
exact and the AI-CPU count 0.  Paths: ``ebits7`` (HFP8 without mantissa bits), ``half``
(FP8 rowwise from float16 / to bfloat16), ``one_row`` / ``no_pad`` (padded FP8: one row,
``ncols`` a multiple of ``row_dim``; its dequantize without ``output_last_dim``: ``unsized``,
the one sync)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = ((3, 8), (300, 130))
TO_BF16 = "fbgemm::FloatToBfloat16Quantized"
FROM_BF16 = "fbgemm::Bfloat16QuantizedToFloat"
TO_HFP8 = "fbgemm::FloatToHFP8Quantized"
FROM_HFP8 = "fbgemm::HFP8QuantizedToFloat"
TO_FP8 = "fbgemm::FloatToFP8RowwiseQuantized"
FROM_FP8 = "fbgemm::FP8RowwiseQuantizedToFloat"
PADDED = "fbgemm::FloatToPaddedFP8RowwiseQuantized"
FROM_PADDED = "fbgemm::PaddedFP8RowwiseQuantizedToFloat"
CASES = [
    (TO_BF16, None),
    (FROM_BF16, None),
    (TO_HFP8, None),
    (TO_HFP8, "ebits7"),
    (FROM_HFP8, None),
    (TO_FP8, None),
    (TO_FP8, "half"),
    (FROM_FP8, None),
    (FROM_FP8, "half"),
    (PADDED, None),
    (PADDED, "half"),
    (PADDED, "one_row"),
    (PADDED, "no_pad"),
    (FROM_PADDED, None),
    (FROM_PADDED, "half"),
    (FROM_PADDED, "unsized"),
    (FROM_PADDED, "half_unsized"),
]


def _call(qualname: str, path: str | None, shape: tuple[int, int]) -> Callable[[], Any]:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[0])).to(NPU)
    if qualname == TO_BF16:
        return lambda: F.FloatToBfloat16Quantized(x)
    if qualname == FROM_BF16:
        b = x.bfloat16()
        return lambda: F.Bfloat16QuantizedToFloat(b)
    if qualname == TO_HFP8:
        ebits = 7 if path == "ebits7" else 4
        return lambda: F.FloatToHFP8Quantized(x, ebits, 15, 1.875)
    if qualname == FROM_HFP8:
        codes = F.FloatToHFP8Quantized(x, 4, 15, 1.875)
        return lambda: F.HFP8QuantizedToFloat(codes, 4, 15)
    if qualname == TO_FP8:
        xin = x.half() if path == "half" else x
        return lambda: F.FloatToFP8RowwiseQuantized(xin, True)
    if qualname == FROM_PADDED:
        cols = shape[1] + 2
        q = F.FloatToPaddedFP8RowwiseQuantized(torch.randn(shape[0], cols).to(NPU), True, 8)
        last = -1 if path and "unsized" in path else cols
        dtype = 1 if path and "half" in path else 0
        return lambda: F.PaddedFP8RowwiseQuantizedToFloat(q, True, 8, last, dtype)
    if qualname == PADDED:
        rows, cols = shape[0], shape[1] + 2  # a short last bucket (row_dim 8)
        if path == "one_row":
            rows = 1
        if path == "no_pad":
            cols = 16 * (cols // 16 + 1)
        xin = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows)).to(NPU)
        xin = xin.half() if path == "half" else xin
        return lambda: F.FloatToPaddedFP8RowwiseQuantized(xin, True, 8)
    rows = F.FloatToFP8RowwiseQuantized(x, False)
    dtype = 5 if path == "half" else 0
    return lambda: F.FP8RowwiseQuantizedToFloat(rows, False, dtype)


def _measure(qualname: str, path: str | None) -> None:
    for shape in SIZES:
        _call(qualname, path, shape)()  # warm the cached aranges (native/_index.py)
        call = _call(qualname, path, shape)
        sized = not (path and "unsized" in path)
        c = assert_op_budget(call, qualname, path=path, sized=sized, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("quantize_float", CASES)
