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

from fbgemm_npu.testing.budgets import (
    assert_every_path_measured,
    assert_op_budget,
    budget_of,
)

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (5, 3000)  # segments: the counts must not depend on them
ARANGE = "fbgemm::repeat_arange"
HBC = "fbgemm::histogram_binning_calibration"
BY_FEATURE = "fbgemm::histogram_binning_calibration_by_feature"
GENERIC = "fbgemm::generic_histogram_binning_calibration_by_feature"
PRUNE = "fbgemm::embedding_bag_rowwise_prune"
UNARY = "fbgemm::batched_unary_embeddings"
BOTTOM_K = "fbgemm::bottom_k_per_row"
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
    (PRUNE, None, torch.int32),
    (PRUNE, None, torch.int64),
    (PRUNE, "min_num_rows", torch.int32),
    (UNARY, None, torch.float32),
    (UNARY, "half", torch.float16),
    (UNARY, "half", torch.bfloat16),
    (BOTTOM_K, None, torch.int64),
    (BOTTOM_K, "unique", torch.int64),
    (BOTTOM_K, "variable", torch.int64),
    (BOTTOM_K, "variable_unique", torch.int64),
]


def _call_more(qualname: str, path: str | None, n: int, dtype: torch.dtype) -> Callable[[], Any]:
    """The ops added in issue 13's second round: rowwise prune, unary embeddings, bottom k."""
    g = torch.Generator().manual_seed(n)
    if qualname == PRUNE:
        weight = torch.randn(n, 4, generator=g).to(NPU)
        indicator = torch.randn(n, generator=g).to(NPU)
        rows = n // 2 if path == "min_num_rows" else 0
        ratio = 10.0 if path == "skip" else None  # skip: 4 n + 4 m D >= 0 * ...: never prunes
        if path == "skip":
            ratio = 0.0
        return lambda: F.embedding_bag_rowwise_prune(
            weight, indicator, 0.5, dtype, True, rows, ratio
        )
    if qualname == UNARY:
        tables, batch = 3, max(n // 10, 1)
        sizes = torch.tensor([7, 1, 40])
        table_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
        lengths = torch.randint(0, 4, (tables * batch,), generator=g)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        table = torch.arange(tables).repeat_interleave(batch).repeat_interleave(lengths)
        indices = (torch.rand(int(lengths.sum()), generator=g) * sizes[table]).long()
        weight = torch.randn(2, 48, 1, generator=g).to(dtype).to(NPU)
        args = [t.to(NPU) for t in (table_offsets, offsets, indices)]
        return lambda: F.batched_unary_embeddings(weight, *args)
    rows = max(n // 10, 2)  # two k_offsets would be a fixed k
    x = torch.randint(0, 50, (rows, 12), generator=g).sort(-1).values.to(NPU)
    unique = path in ("unique", "variable_unique")
    if path in ("variable", "variable_unique"):
        ks = torch.randint(1, 4, (rows,), generator=g)  # a non-empty output
        k_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), ks.cumsum(0)]).to(NPU)
    else:
        k_offsets = torch.tensor([0, 3]).to(NPU)
    return lambda: F.bottom_k_per_row(x, k_offsets, unique)


def _call(qualname: str, n: int, dtype: torch.dtype, path: str | None = None) -> Callable[[], Any]:
    if qualname in (PRUNE, UNARY, BOTTOM_K):
        return _call_more(qualname, path, n, dtype)
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
        call = _call(qualname, n, dtype, path)
        call()  # warm the cached steps (native/_index.py) at this size
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_rowwise_prune_skip_path(no_validation: None) -> None:
    """min_save_ratio says pruning saves too little: the host decides from sizes, no sync (the
    budget's one sync is the pruned path's), a copy and the mapping [0]."""
    for n in SIZES:
        call = _call(PRUNE, n, torch.int32, "skip")
        c = assert_op_budget(call, PRUNE, path="skip")
        assert (c.launches, c.syncs) == (budget_of(PRUNE).paths["skip"], 0)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("misc", [(q, p) for q, p, _ in CASES] + [(PRUNE, "skip")])
