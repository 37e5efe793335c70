"""The optim family's budgets (``budgets.py``): each op and path at two sizes (the count must
not depend on the table, the index count or duplicates), float32 and float16, int32 and int64
indices; 0 syncs, 0 AI-CPU launches."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

M = torch.ops.mxrec
CASES = [
    ("mxrec::fused_sgd", None),
    ("mxrec::fused_sgd", "weight_decay"),
    ("mxrec::fused_lazy_adam", None),
]


def _call(op: str, path: str | None, rows: int, n: int, dtype, idx_dtype):  # type: ignore[no-untyped-def]
    var = torch.randn(rows, 8, device="npu").to(dtype)
    grad = torch.randn(n, 8, device="npu").to(dtype)
    idx = torch.randint(-2, rows + 2, (n,), device="npu", dtype=idx_dtype)
    lr = torch.tensor(0.1, device="npu")
    if op == "mxrec::fused_sgd":
        return lambda: M.fused_sgd(var, grad, idx, lr, 0.1 if path else 0.0)
    m, v = torch.zeros_like(var), torch.zeros_like(var)
    return lambda: M.fused_lazy_adam(var, m, v, grad, idx, lr)


@pytest.mark.parametrize(("op", "path"), CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64], ids=str)
def test_budget(op: str, path: str | None, dtype: torch.dtype, idx_dtype: torch.dtype) -> None:
    counts = []
    for rows, n in ((5, 3), (300, 200)):
        fn = _call(op, path, rows, n, dtype, idx_dtype)
        fn()
        c = assert_op_budget(fn, op, path=path)
        assert c.ai_cpu == 0 and c.syncs == 0 and c.stalls == 0
        counts.append(c.launches)
    assert counts[0] == counts[1], counts


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("optim", CASES)
