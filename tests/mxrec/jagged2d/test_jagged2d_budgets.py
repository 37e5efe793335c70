"""The jagged2d family's launch, AI-CPU and sync budgets, read from its ``budgets.py``.

Both ops at two sizes (the count must not depend on them), on every path (prefix, replace,
dense side, mixed offset dtypes), with the data checks off and on, float32 / float16 / int32
values: 0 AI-CPU launches; concat 0 syncs, split 1 on its jagged path (the output sizes) and
0 with a dense side.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of

NPU = "npu"
M = torch.ops.mxrec
SIZES = (1, 300)  # batches
DTYPES = (torch.float32, torch.float16, torch.int32)


def _offsets(batches: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 6, (batches,), generator=g)
    return torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(dtype).to(NPU)


def _concat(batches: int, dtype: torch.dtype, path: str | None) -> Callable[[], object]:
    mixed = path in ("dense", "dense_prefix") and batches > 1
    oa = _offsets(batches, torch.int32 if mixed else torch.int64, 0)
    ob = _offsets(batches, torch.int64, 1)
    a = torch.ones(int(oa[-1]), 16, device=NPU, dtype=dtype)
    if path in ("dense", "dense_prefix") and not mixed:
        oa, a = oa[:0], torch.ones(batches, 3, 16, device=NPU, dtype=dtype)
    b = torch.ones(int(ob[-1]) + 2, 16, device=NPU, dtype=dtype)
    replace = path == "prefix" and batches > 1  # the replace path shares prefix's budget
    n = 2 if path in ("prefix", "dense_prefix") and not replace else 0
    return lambda: M.concat_2d_jagged(8, a, b, oa, ob, replace, n)


def _split(batches: int, dtype: torch.dtype, path: str | None) -> Callable[[], object]:
    mixed = path is not None and path.startswith("mixed")
    oa = _offsets(batches, torch.int32 if mixed else torch.int64, 0)
    ob = _offsets(batches, torch.int64, 1)
    rows = int(oa[-1]) + int(ob[-1])
    if path is not None and path.startswith("dense"):
        oa, rows = oa[:0], 3 * batches + int(ob[-1])
    v = torch.ones(rows + 1, 16, device=NPU, dtype=dtype)
    n = 2 if path is not None and path.endswith("prefix") else 0
    return lambda: M.split_2d_jagged(v, 8, oa, ob, 3, n)


CONCAT_PATHS = (None, "prefix", "dense", "dense_prefix")
SPLIT_PATHS = (None, "prefix", "mixed", "mixed_prefix", "dense", "dense_prefix")
CASES = [("mxrec::concat_2d_jagged", p, dt, _concat) for p in CONCAT_PATHS for dt in DTYPES] + [
    ("mxrec::split_2d_jagged", p, dt, _split) for p in SPLIT_PATHS for dt in DTYPES
]
IDS = [f"{q.split('::')[1]}-{p}-{dt}" for q, p, dt, _ in CASES]


def _measure(qualname: str, path: str | None, dtype: torch.dtype, build) -> None:
    for batches in SIZES:
        fn = build(batches, dtype, path)
        fn()  # warm: the cached aranges
        read = qualname.endswith("split_2d_jagged") and not (path or "").startswith("dense")
        c = assert_op_budget(fn, qualname, path=path, exact=read or "split" not in qualname)
        assert c.ai_cpu == 0 and c.syncs + c.stalls == (1 if read else 0), c.sync_ops
        if not read and "split" in qualname:  # exact launches; the budget's sync is the read's
            assert c.launches == budget_of(qualname).launch_limit(validation_enabled(), 1, path)


@pytest.mark.parametrize(("qualname", "path", "dtype", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_off(qualname, path, dtype, build, no_validation: None) -> None:
    _measure(qualname, path, dtype, build)


@pytest.mark.parametrize(("qualname", "path", "dtype", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_on(qualname, path, dtype, build) -> None:
    _measure(qualname, path, dtype, build)


def test_every_op_of_the_family_is_measured() -> None:
    assert_every_path_measured("jagged2d", [(q, p) for q, p, _, _ in CASES])
