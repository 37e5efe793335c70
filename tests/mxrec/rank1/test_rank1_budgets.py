"""The rank1 family's launch, AI-CPU and sync budgets, read from its ``budgets.py``.

Both ops at two sizes (the count must not depend on them), with the data checks off and on, in
every float dtype and with int32 / int64 indices: 0 AI-CPU launches, 0 syncs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

NPU = "npu"
M = torch.ops.mxrec
SIZES = ((1, 1), (2049, 5000))  # (E, N)


def _gather(e: int, n: int, dtype: torch.dtype, idt: torch.dtype) -> Callable[[], object]:
    x = torch.randn(e, device=NPU).to(dtype)
    index = torch.randint(0, e, (n,), device=NPU, dtype=idt)
    return lambda: M.gather_for_rank1(x, index)


def _backward(e: int, n: int, dtype: torch.dtype, idt: torch.dtype) -> Callable[[], object]:
    g = torch.randn(n, device=NPU).to(dtype)
    x = torch.randn(e, device=NPU).to(dtype)
    index = torch.randint(0, e, (n,), device=NPU, dtype=idt)
    return lambda: M.index_select_for_rank1_backward(g, x, index)


CASES: list[tuple[str, str | None, str, Callable[[int, int], Callable[[], object]]]] = []
for dt in (torch.float32, torch.float16, torch.bfloat16):
    for it in (torch.int32, torch.int64):
        CASES.append(
            (
                "mxrec::gather_for_rank1",
                None,
                f"gather-{dt}-{it}",
                lambda e, n, d=dt, i=it: _gather(e, n, d, i),
            )
        )
        CASES.append(
            (
                "mxrec::index_select_for_rank1_backward",
                None if dt == torch.float32 else "half",
                f"backward-{dt}-{it}",
                lambda e, n, d=dt, i=it: _backward(e, n, d, i),
            )
        )
IDS = [c[2] for c in CASES]


def _measure(qualname: str, path: str | None, build: Callable[[int, int], Callable[[], object]]):
    for e, n in SIZES:
        fn = build(e, n)
        fn()
        c = assert_op_budget(fn, qualname, path=path, exact=True)
        assert c.ai_cpu == 0 and c.syncs == 0, (c.launch_ops, c.sync_ops)


@pytest.mark.parametrize(("qualname", "path", "label", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_off(qualname, path, label, build, no_validation: None) -> None:
    _measure(qualname, path, build)


@pytest.mark.parametrize(("qualname", "path", "label", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_on(qualname, path, label, build) -> None:
    _measure(qualname, path, build)


def test_autograd_backward_is_the_budgeted_op() -> None:
    x = torch.randn(64, device=NPU, requires_grad=True)
    y = M.gather_for_rank1(x, torch.randint(0, 64, (100,), device=NPU))
    y.sum().backward()  # reaches index_select_for_rank1_backward (budgeted above)
    assert x.grad.shape == (64,)


def test_every_op_of_the_family_is_measured() -> None:
    assert_every_path_measured("rank1", [(q, p) for q, p, _, _ in CASES])
