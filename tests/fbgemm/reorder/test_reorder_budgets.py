"""The reorder family held to its BUDGETS table (``native/fbgemm/reorder/budgets.py``).

Each op and path is measured at two batch sizes, with the data checks off and on: the count
must be the table's exactly whatever B, T and NA, the AI-CPU count too (0).  int32 offsets on
the main paths, int64 ones (and int64 batch offsets where upstream takes them) on a second case
of each op, which must cost the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from conformance.specs.fbgemm.reorder.inputs import make_batch, split_by_request
from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (([2, 0, 1], 2), ([3, 1, 4, 0, 2, 5, 1, 2, 3, 3] * 4, 9))  # must not change the counts
LENGTHS = "fbgemm::reorder_batched_ad_lengths"
INDICES = "fbgemm::reorder_batched_ad_indices"
SEQUENCE = "fbgemm::reorder_batched_sequence_embeddings"
CAT = "fbgemm::cat_reorder_batched_ad_indices"
I32, I64 = torch.int32, torch.int64
CASES = [
    (LENGTHS, None, I32),
    (LENGTHS, None, I64),
    (LENGTHS, "broadcast_lengths", I32),
    (LENGTHS, "max_batch_size", I64),
    (INDICES, None, I32),
    (INDICES, None, I64),
    (INDICES, "broadcast_indices", I32),
    (SEQUENCE, None, I32),
    (SEQUENCE, None, I64),
    (CAT, None, I32),
    (CAT, None, I64),
    (CAT, "broadcast_indices", I32),
    (CAT, "max_batch_size", I32),
    (CAT, "broadcast_indices + max_batch_size", I64),
]


def _call(qualname: str, path: str | None, dtype: torch.dtype, size: int) -> Callable[[], Any]:
    nbs, tables = SIZES[size]
    broadcast = path is not None and path.startswith("broadcast")
    mbs = sum(nbs) + 2 if path is not None and path.endswith("max_batch_size") else 0
    b = make_batch(
        nbs,
        tables,
        broadcast,
        seed=size,
        offsets_dtype=dtype,
        dim=4 if qualname == SEQUENCE else 0,
        values_dtype=torch.float32 if qualname == SEQUENCE else torch.int64,
        max_batch_size=mbs,
    )
    bo = b.batch_offsets.to(dtype if qualname in (LENGTHS, SEQUENCE) else I32).to(NPU)
    c, r, values, lengths = (t.to(NPU) for t in (b.offsets, b.reordered, b.values, b.lengths))
    na = b.num_ads
    if qualname == LENGTHS:
        return lambda: F.reorder_batched_ad_lengths(lengths, bo, na, broadcast, mbs)
    if qualname == INDICES:
        n = b.total if broadcast else -1
        return lambda: F.reorder_batched_ad_indices(c, values, r, bo, na, broadcast, n)
    if qualname == SEQUENCE:
        return lambda: F.reorder_batched_sequence_embeddings(c, values, r, bo, na)
    parts = [p.to(NPU) for p in split_by_request(b)]
    return lambda: F.cat_reorder_batched_ad_indices(
        c, parts, r, bo, na, broadcast, b.total, False, mbs
    )


def _measure(qualname: str, path: str | None, dtype: torch.dtype) -> None:
    for size in range(len(SIZES)):
        call = _call(qualname, path, dtype, size)
        call()  # warm the cached constants (native/_index.py) at this size
        c = assert_op_budget(call, qualname, path=path, exact=True)
        assert [r.op for r in c.calls] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple, no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple) -> None:
    _measure(*case)


def test_every_op_and_path_of_the_family_is_measured() -> None:
    assert_every_path_measured("reorder", [(q, p) for q, p, _ in CASES])
