"""The jagged family's slicing.py, select.py, accumulate.py and pack.py ops held to their
BUDGETS entries (``native/fbgemm/jagged/budgets.py``).

Each op is measured at two sizes, with the data checks off and on: the launch count must be the
table's exactly whatever the size, the sync count too (1 for the ops whose output size is data,
0 else), the AI-CPU count 0.  Paths: int32 lengths (no int32 cast), cast weights, int32 ids,
the presence mask, int64 values (their padding fill), a transposed backward input (its copy).
``test_jagged_budgets.py`` checks that these files together measure every op and path of the
family (its ``EXTRA_MEASURED``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.native._index import warm_caches
from fbgemm_npu.testing.budgets import assert_op_budget, budget_of

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (6, 700)  # segments: the counts must not depend on them
I32, I64 = torch.int32, torch.int64


def _lengths(g: torch.Generator, b: int, dtype: torch.dtype, most: int = 7) -> torch.Tensor:
    lengths = torch.randint(0, most, (b,), generator=g)
    lengths[0] = 3  # never all empty
    return lengths.to(dtype)


def _call(qualname: str, path: str | None, b: int) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(b)
    index = I32 if path == "int32_lengths" or path == "int32" else I64
    lengths = _lengths(g, b, index)
    n = int(lengths.sum())
    x = torch.randn(n, generator=g)
    dev = {"x": x.to(NPU), "l": lengths.to(NPU)}
    name = qualname.removeprefix("fbgemm::")
    fn = getattr(F, name)
    if name == "jagged_slice":
        start = (lengths // 3).to(NPU)
        return lambda: fn(dev["x"], dev["l"], start, 4)
    if name == "jagged_slice_forward":
        src = (lengths // 3).to(NPU)
        out_lengths = (lengths + 1).to(NPU)
        tgt = torch.ones(b, dtype=I64).to(NPU)
        return lambda: fn(dev["x"], dev["l"], src, out_lengths, tgt, n + b, 3, True)
    if name == "masked_select_jagged_1d":
        mask = (torch.rand(n, generator=g) < 0.5).to(NPU)
        return lambda: fn(dev["x"], dev["l"], mask)
    if name == "jagged_1d_to_truncated_values":
        return lambda: fn(dev["x"], dev["l"], 4)
    if name == "jagged_acc_weights_and_counts":
        w = x.to(torch.float32 if path is None else torch.float16).to(NPU)
        ids = torch.randint(0, b, (n,), generator=g).to(NPU)
        return lambda: fn(w, ids, b)
    if name == "jagged_hash_size_cumsum":
        offsets = torch.zeros(b + 1, dtype=index)
        offsets[1:] = torch.cumsum(lengths, 0)
        ids = torch.randint(0, 2**20, (n,), generator=g).to(index)
        if index == I64:
            ids[::3] += 2**40
        offsets, ids = offsets.to(NPU), ids.to(NPU)
        return lambda: fn(offsets, ids, 2)
    t_in = torch.randn(n, 3, generator=g).to(NPU)
    if name == "pack_segments":
        return lambda: fn(t_in, dev["l"], 5)
    if name == "pack_segments_v2":
        t_in = t_in.long() if path and path.startswith("int64_values") else t_in
        return lambda: fn(t_in, dev["l"], 5, False, bool(path and path.endswith("mask")))
    data = torch.randn(b, 5, 3, generator=g).to(NPU)
    if path == "strided_data":
        data = torch.randn(b, 3, 5, generator=g).to(NPU).transpose(1, 2)
    return lambda: fn(data, dev["l"], n, 5)


CASES = [
    ("fbgemm::jagged_slice", None),
    ("fbgemm::jagged_slice_forward", None),
    ("fbgemm::masked_select_jagged_1d", None),
    ("fbgemm::masked_select_jagged_1d", "int32_lengths"),
    ("fbgemm::jagged_1d_to_truncated_values", None),
    ("fbgemm::jagged_1d_to_truncated_values", "int32_lengths"),
    ("fbgemm::jagged_acc_weights_and_counts", None),
    ("fbgemm::jagged_acc_weights_and_counts", "cast"),
    ("fbgemm::jagged_hash_size_cumsum", None),
    ("fbgemm::jagged_hash_size_cumsum", "int32"),
    ("fbgemm::pack_segments", None),
    ("fbgemm::pack_segments", "int32_lengths"),
    ("fbgemm::pack_segments_v2", None),
    ("fbgemm::pack_segments_v2", "presence_mask"),
    ("fbgemm::pack_segments_v2", "int64_values"),
    ("fbgemm::pack_segments_v2", "int64_values_presence_mask"),
    ("fbgemm::pack_segments_backward", None),
    ("fbgemm::pack_segments_backward", "int32_lengths"),
    ("fbgemm::pack_segments_backward", "strided_data"),
]
MEASURED = sorted({q.removeprefix("fbgemm::") for q, _ in CASES})


def _measure(qualname: str, path: str | None) -> None:
    warm_caches(NPU)  # the cached arange / constants at both sizes: no growth is counted
    for b in SIZES:
        call = _call(qualname, path, b)
        call()  # warm-up
        c = assert_op_budget(call, qualname, path=path, exact=True)  # syncs included
        assert c.ai_cpu == 0, c.summary()
        assert [r.op for r in c.calls if r.depth == 0] == [qualname.replace("::", ".") + ".default"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_off(case: tuple[str, str | None], no_validation: None) -> None:
    _measure(*case)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_budget_with_the_checks_on(case: tuple[str, str | None]) -> None:
    _measure(*case)


def test_every_path_of_these_ops_is_measured() -> None:
    for name in MEASURED:
        qualname = f"fbgemm::{name}"
        paths = {p for q, p in CASES if q == qualname}
        assert paths == {None, *budget_of(qualname).paths}, (qualname, paths)
