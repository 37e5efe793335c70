"""Launch and sync budgets of softmax_bmm.py's ops (``jagged_softmax``, its forward and
backward) and bmm.py's (``jagged_jagged_bmm``, ``jagged_dense_bmm`` and their forwards), read
from the family's ``budgets.py``: exact both ways, at two sizes, with the data checks off (the
kernel alone) and on, int32 and int64 offsets, nothing on a 910B's AI CPU.
``test_jagged_budgets.py`` counts these ops as measured here (``EXTRA_MEASURED``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_op_budget, budget_of

F = torch.ops.fbgemm
SIZES = ((4, 3, 2), (128, 64, 128))  # (B, max_len, D): the counts must not depend on them
MEASURED = (
    "jagged_softmax",
    "jagged_softmax_forward",
    "jagged_softmax_backward",
    "jagged_jagged_bmm",
    "jagged_jagged_bmm_forward",
    "jagged_dense_bmm",
    "jagged_dense_bmm_forward",
)


def _inputs(size: tuple[int, int, int], index: torch.dtype) -> tuple[torch.Tensor, ...]:
    b, max_len, d = size
    g = torch.Generator().manual_seed(b)
    lens = torch.randint(0, max_len + 2, (b,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(index)
    n = int(offsets[-1])
    values = torch.randn(n, d, generator=g)
    grad = torch.randn(n, d, generator=g)
    return values.to("npu"), offsets.to("npu"), grad.to("npu")


def _call(op: str, size: tuple[int, int, int], index: torch.dtype) -> Callable[[], Any]:
    values, offsets, grad = _inputs(size, index)
    max_l = size[1]
    if op == "jagged_softmax_backward":
        out = F.jagged_softmax_forward(values, offsets, max_l)
        return lambda: F.jagged_softmax_backward(grad, out, offsets, max_l)
    fn = getattr(F, op)
    if op.startswith("jagged_jagged_bmm"):
        return lambda: fn(values, grad, offsets, max_l)
    if op.startswith("jagged_dense_bmm"):
        y = torch.randn(size[0], size[2], 3).to("npu")
        return lambda: fn(values, offsets, y, max_l)
    return lambda: fn(values, offsets, max_l)


def _measure(op: str, index: torch.dtype) -> None:
    counts = []
    for i, size in enumerate(SIZES):
        call = _call(op, size, index)
        if i == 0:
            call()  # warm-up: the cached arange and scalars
        c = assert_op_budget(call, f"fbgemm::{op}", exact=True)
        stalls = [s for r in c.calls for s in r.stalls]
        assert c.ai_cpu == 0 and all("_assert_async" in s for s in stalls), (stalls, c.summary())
        counts.append(c.launches)
    assert len(set(counts)) == 1, f"{op}: the count depends on the size: {counts}"


@pytest.mark.parametrize("index", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("op", MEASURED)
def test_budget_with_the_checks_off(op: str, index: torch.dtype, no_validation: None) -> None:
    _measure(op, index)


@pytest.mark.parametrize("index", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("op", MEASURED)
def test_budget_with_the_checks_on(op: str, index: torch.dtype) -> None:
    _measure(op, index)


def test_every_path_is_the_main_one() -> None:
    """No named path: the main one measured above is all of each op's budget."""
    for op in MEASURED:
        assert not budget_of(f"fbgemm::{op}").paths, op
