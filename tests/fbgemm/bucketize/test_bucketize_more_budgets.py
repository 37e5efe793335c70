"""The bucketize family's smaller ops held to their BUDGETS (``native/fbgemm/bucketize/
budgets.py``): ``populate_bucketized_permute``, ``get_source_mask``, ``get_unique_indices`` and
``_with_inverse``, each path at two sizes with the data checks off and on, exact; 0 AI-CPU
launches, 0 syncs.  The ``more than 2**24 keys`` path of ``populate_bucketized_permute`` is forced
by lowering the float-key width and the counts cache limit (``_order.py``), so that a test tensor
takes the radix route and fresh zeros a real input takes past ``2**24`` keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.native.fbgemm.bucketize import _order
from fbgemm_npu.testing.budgets import assert_op_budget, budget_of, family_ops
from fbgemm_npu.testing.op_samples_bucketize_more import (
    BUILDERS,
    populate_inputs,
    source_mask_inputs,
    unique_inputs,
)

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (1, 7)
POPULATE = "fbgemm::populate_bucketized_permute"
MASK = "fbgemm::get_source_mask"
UNIQUE = "fbgemm::get_unique_indices"
INVERSE = "fbgemm::get_unique_indices_with_inverse"
BIG = 2**40  # max_indices past 2**24: two 24-bit digits
CASES = [(op, p) for op in BUILDERS for p in (None, *budget_of(op).paths)]


def _call(op: str, path: str | None, s: int) -> Callable[[], Any]:
    if op == POPULATE:
        m32 = torch.int32 if path == "int32 bucket_mapping" else torch.int64
        big = path == "more than 2**24 keys"
        args = [t.to(NPU) for t in populate_inputs(s, 10 * s, 64 if big else 4, m32, m32)]
        return lambda: F.populate_bucketized_permute(*args)
    if op == MASK:
        ns, nt, size = source_mask_inputs(s, 10 * s)
        ns, nt = ns.to(NPU), nt.to(NPU)
        return lambda: F.get_source_mask(ns, nt, size)
    top = BIG if path == "max_indices >= 2**24" else 1000
    v = unique_inputs(s, 30 * s, top).to(NPU)
    if op == UNIQUE:
        return lambda: F.get_unique_indices(v, top, path != "no count")
    asked = path != "no count, no inverse"
    return lambda: F.get_unique_indices_with_inverse(v, top, asked, asked)


@pytest.fixture
def small_float_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Float keys of 7 bits and a counts cache of 64 elements: 64 * rows keys take two digit
    passes and fresh zeros, as more than 2**24 keys do with the real limits."""
    monkeypatch.setattr(_order, "FLOAT_KEY_BITS", 7)
    monkeypatch.setattr(_order, "COUNTS_CACHE_LIMIT", 64)


def _measure(op: str, path: str | None, request: pytest.FixtureRequest) -> None:
    if path == "more than 2**24 keys":
        request.getfixturevalue("small_float_keys")
    for s in SIZES:
        call = _call(op, path, s)
        call()  # warm the shared caches (native/_index.py)
        c = assert_op_budget(call, op, path=path, exact=True)
        assert c.ai_cpu == 0 and c.syncs == 0
        assert [r.op for r in c.calls] == [op.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(
    case: tuple, no_validation: None, request: pytest.FixtureRequest
) -> None:
    _measure(*case, request)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple, request: pytest.FixtureRequest) -> None:
    _measure(*case, request)


def test_every_op_and_path_is_measured() -> None:
    assert set(BUILDERS) <= family_ops("bucketize")
    for op in BUILDERS:
        measured = {p for q, p in CASES if q == op}
        assert measured == {None, *budget_of(op).paths}
