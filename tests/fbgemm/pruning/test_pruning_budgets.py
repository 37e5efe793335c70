"""The pruning family held to its BUDGETS table (``native/fbgemm/pruning/budgets.py``).

Each op is measured at two sizes, with the data checks off and on: the count must be the
table's exactly whatever the size, the AI-CPU count too (0).  Paths: int32 indices of an int64
table (the hash lookup's main path; ``int32_table``: an int32 table), int64 indices and table
(``int64``: the 64-bit hash); the array lookup: int32 indices of int64
remappings (main: a cast each way), ``one_cast`` (int32 remappings), ``int64`` (no cast); the
insert's ``int64`` path is int64 indices and table; empty indices (``empty``: no probe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.native._checks import validation_enabled
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget, budget_of

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (40, 3000)  # indices: the counts must not depend on them
LOOKUP = "fbgemm::pruned_hashmap_lookup"
ARRAY = "fbgemm::pruned_array_lookup"
INSERT = "fbgemm::pruned_hashmap_insert"
CASES = [
    (LOOKUP, None, torch.int32),
    (LOOKUP, "int32_table", torch.int32),
    (LOOKUP, "int64", torch.int64),
    (ARRAY, None, torch.int32),
    (ARRAY, "one_cast", torch.int32),
    (ARRAY, "one_cast", torch.int64),
    (ARRAY, "int64", torch.int64),
    (ARRAY, "empty", torch.int64),
    (INSERT, None, torch.int32),
    (INSERT, "int64", torch.int64),
]


def _layout(n: int, dtype: torch.dtype, empty: bool) -> tuple[torch.Tensor, ...]:
    """3 tables, B = 4: raw indices in [0, rows), rows = n // 6, capacities 2 rows (one 0)."""
    g = torch.Generator().manual_seed(n)
    T, B, rows = 3, 4, max(n // 6, 1)
    m = 0 if empty else n
    lengths = torch.zeros(T * B, dtype=torch.int64)
    if m:
        lengths = torch.distributions.Multinomial(m, torch.ones(T * B)).sample().long()
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(dtype)
    indices = torch.randint(0, rows, (m,), generator=g).to(dtype)
    return indices, offsets, torch.tensor(rows)


def _table(rows: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream's table (CPU insert) of 3 tables, the middle one unpruned (capacity 0)."""
    caps = [(2 * rows + 31) // 32 * 32, 0, (2 * rows + 31) // 32 * 32]
    hto = torch.tensor([0, caps[0], caps[0], caps[0] + caps[2]])
    table = torch.full((sum(caps), 2), -1, dtype=dtype)
    keys = torch.cat([torch.arange(rows)] * 3).to(dtype)
    dense = torch.where(keys % 3 == 0, -1, keys // 2).to(dtype)
    offsets = torch.tensor([0, rows, 2 * rows, 3 * rows]).to(dtype)
    F.pruned_hashmap_insert(keys, dense, offsets, table, hto)
    return table, hto


def _call(qualname: str, path: str | None, n: int, dtype: torch.dtype) -> Callable[[], Any]:
    indices, offsets, rows_t = _layout(n, dtype, path == "empty")
    rows = int(rows_t)
    if qualname == ARRAY:
        ro = torch.tensor([0, rows, rows, 2 * rows])
        # int64 remappings of int32 indices cast both ways (the main path); "one_cast": int32
        # remappings; "int64": int64 both, no cast
        wide = path in (None, "int64", "empty")
        remap = torch.randint(-1, rows, (2 * rows,)).to(torch.int64 if wide else torch.int32)
        a = [t.to(NPU) for t in (indices, offsets, remap, ro)]
        return lambda: F.pruned_array_lookup(*a)
    # the hash lookup's main path: int32 indices of an int64 table (the keys cast to int32 for
    # their hash, the values back); "int32_table": no cast; the insert's: an int32 table
    wide = path == "int64" or (qualname == LOOKUP and path is None)
    table, hto = _table(rows, torch.int64 if wide else torch.int32)
    if qualname == LOOKUP:
        a = [t.to(NPU) for t in (indices, offsets, table, hto)]
        return lambda: F.pruned_hashmap_lookup(*a)
    keys = torch.cat([torch.arange(rows)] * 3).to(dtype)
    dense = (keys // 2).to(dtype)
    off = torch.tensor([0, rows, 2 * rows, 3 * rows]).to(dtype)
    a = [t.to(NPU) for t in (keys, dense, off)]
    fresh, hto = torch.full_like(table, -1).to(NPU), hto.to(NPU)
    return lambda: F.pruned_hashmap_insert(*a, fresh, hto)


def _measure(qualname: str, path: str | None, dtype: torch.dtype) -> None:
    for n in SIZES:
        call = _call(qualname, path, n, dtype)
        call()  # warm the cached aranges (native/_index.py) at this size
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


@pytest.mark.parametrize("validate", [False, True])
def test_hash_lookup_empty_path(validate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """No index: the clone and the queued checks, no sync (the budget's one sync is the probe
    count of the main path)."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred" if validate else "0")
    entry = budget_of(LOOKUP)
    for n in SIZES:
        call = _call(LOOKUP, "empty", n, torch.int32)
        call()
        c = assert_op_budget(call, LOOKUP, path="empty")
        want = entry.launch_limit(validation_enabled(), path="empty")
        assert (c.launches, c.syncs + c.stalls) == (want, 0)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    measured = [(q, p) for q, p, _ in CASES] + [(LOOKUP, "empty")]
    assert_every_path_measured("pruning", measured)
