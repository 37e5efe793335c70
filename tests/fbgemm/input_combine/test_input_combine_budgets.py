"""The input_combine family held to its BUDGETS table (``native/fbgemm/input_combine/
budgets.py``): each op at 2 and 9 tables, with the data checks off and on, the count exact and
the same at both sizes; 0 AI-CPU launches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of
from fbgemm_npu.testing.op_samples_input_combine import tables

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (2, 9)  # tables
COMBINE = "fbgemm::tbe_input_combine"
WITH_LENGTH = "fbgemm::tbe_input_combine_with_length"
PADDING = "fbgemm::padding_fused_tbe_input_combine"
PADDING_WITH_LENGTH = "fbgemm::padding_fused_tbe_input_combine_with_length"
CASES = [
    (op, path)
    for op in (COMBINE, WITH_LENGTH, PADDING, PADDING_WITH_LENGTH)
    for path in (None, "no weights", "flags on the host")
    if path != "flags on the host" or op in (COMBINE, PADDING)
]


def _call(qualname: str, path: str | None, n: int) -> Callable[[], Any]:
    a = tables(n, n_tables=n, min_batch=1)
    idx = [t.to(NPU) for t in a.indices]
    meta = [t.to(NPU) for t in (a.lengths if "length" in qualname else a.offsets)]
    w = [t.to(NPU) for t in a.weights]
    w[0] = torch.rand(idx[0].numel()).to(NPU)  # some table has weights
    if path == "no weights":
        w = [torch.empty(0).to(NPU) for _ in w]
    flags = a.include_last.clone()
    flags[0] = False  # not all set: the host path reads nothing
    if path != "flags on the host":
        flags = flags.to(NPU)
    if qualname == COMBINE:
        return lambda: F.tbe_input_combine(idx, meta, w, flags)
    if qualname == WITH_LENGTH:
        return lambda: F.tbe_input_combine_with_length(idx, meta, w)
    if qualname == PADDING:
        return lambda: F.padding_fused_tbe_input_combine(idx, meta, w, flags, a.batch_size)
    return lambda: F.padding_fused_tbe_input_combine_with_length(idx, meta, w, a.batch_size)


def _measure(qualname: str, path: str | None) -> None:
    for n in SIZES:
        call = _call(qualname, path, n)
        call()  # warm the cached zeros and ones (native/_index.py)
        host_read = qualname == COMBINE and path == "flags on the host"
        c = assert_op_budget(call, qualname, path=path, exact=not host_read)
        if host_read:  # exact launches; no sync at all (the budget's 1 is the device-flag read)
            assert c.launches == budget_of(qualname).paths[path] and c.syncs + c.stalls == 0
        assert c.ai_cpu == 0
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("input_combine", CASES)
