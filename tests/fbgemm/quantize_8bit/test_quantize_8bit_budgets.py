"""The quantize_8bit family held to its BUDGETS table (``native/fbgemm/quantize_8bit/budgets.py``).

Each op is measured at two sizes, with the data checks off and on (the family queues none): the
count must be the table's exactly whatever the size, the AI-CPU count too (0).  Paths: float16
inputs (``half``: the float32 cast), empty rows (``empty_row``), float16 / bfloat16 outputs of
``Fused8BitRowwiseQuantizedToFloatOrHalf`` and ``...MixedDim`` (``half``, ``bfloat16``),
``MixedDim`` with no tables (``no_tables``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.native._index import warm_caches
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = ((3, 13), (400, 130))  # rows, width (8-column blocks and a tail): counts fixed
QUANTIZE = {
    "fbgemm::FloatToFused8BitRowwiseQuantized": torch.float32,
    "fbgemm::HalfToFused8BitRowwiseQuantized": torch.float16,
    "fbgemm::FloatOrHalfToFused8BitRowwiseQuantized": torch.float32,
    "fbgemm::FloatToFused8BitRowwiseQuantizedOut": torch.float32,
}
DEQUANTIZE = (
    "fbgemm::Fused8BitRowwiseQuantizedToFloat",
    "fbgemm::Fused8BitRowwiseQuantizedToHalf",
    "fbgemm::Fused8BitRowwiseQuantizedToBfloat16",
    "fbgemm::Fused8BitRowwiseQuantizedToFloatOut",
)
OR_HALF = "fbgemm::Fused8BitRowwiseQuantizedToFloatOrHalf"
MIXED = "fbgemm::Fused8BitRowwiseQuantizedToFloatMixedDim"
CASES: list[tuple[str, str | None, Any]] = [
    *((op, None, dt) for op, dt in QUANTIZE.items()),
    *((op, "empty_row", dt) for op, dt in QUANTIZE.items()),
    ("fbgemm::FloatOrHalfToFused8BitRowwiseQuantized", "half", torch.float16),
    *((op, None, None) for op in DEQUANTIZE),
    (OR_HALF, None, (0, True, True)),
    (OR_HALF, None, (0, False, False)),
    (OR_HALF, "half", (1, True, True)),
    (OR_HALF, "bfloat16", (5, False, True)),
    (OR_HALF, "bfloat16", (5, False, False)),
    (MIXED, None, 0),
    (MIXED, "half", 1),
    (MIXED, "no_tables", 0),
]


def _call(qualname: str, path: str | None, arg: Any, rows: int, width: int) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(rows)
    name = qualname.split("::")[1]
    op = getattr(F, name)
    if qualname in QUANTIZE:
        x = torch.randn(rows, 0 if path == "empty_row" else width, generator=g).to(arg).to(NPU)
        if name.endswith("Out"):
            out = torch.empty(0, dtype=torch.uint8, device=NPU)
            return lambda: op(out, x)
        return lambda: op(x)
    if qualname == MIXED:  # tables of widths 0, 5, width (+ 8 bytes each); or none
        widths = [] if path == "no_tables" else [0, 5, width]
        offsets = torch.cat([torch.zeros(1), (torch.tensor(widths) + 8).cumsum(0)]).int()
        cols = int(offsets[-1]) if widths else width
        q = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, generator=g).to(NPU)
        d_offsets = offsets.to(NPU)
        return lambda: op(q, d_offsets, arg)
    q = torch.randint(0, 256, (rows, width + 8), dtype=torch.uint8, generator=g)
    q[:, -8:] = torch.tensor([[0.25, -1.0]]).view(torch.uint8)
    q[:, :8] = torch.tensor([[0.25, -1.0]]).view(torch.uint8)
    q = q.to(NPU)
    if name.endswith("Out"):
        out = torch.empty(0, device=NPU)
        return lambda: op(out, q)
    if qualname == OR_HALF:
        return lambda: op(q, *arg)
    return lambda: op(q)


def _measure(qualname: str, path: str | None, arg: Any) -> None:
    for rows, width in SIZES:
        call = _call(qualname, path, arg, rows, width)
        warm_caches(NPU)  # MixedDim's cached aranges (native/_index.py)
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_no_rows_launch_nothing() -> None:
    x = torch.empty(0, 5, device=NPU)
    q = torch.empty(0, 13, dtype=torch.uint8, device=NPU)
    for call in (
        lambda: F.FloatToFused8BitRowwiseQuantized(x),
        lambda: F.Fused8BitRowwiseQuantizedToHalf(q),
    ):
        c = assert_op_budget(call, "fbgemm::FloatToFused8BitRowwiseQuantized")
        assert c.launches == 0


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("quantize_8bit", [(q, p) for q, p, _ in CASES])
