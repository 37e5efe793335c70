"""The permute family's later ops held to their BUDGETS (``native/fbgemm/permute/budgets.py``):
``permute_sequence_embeddings``, ``permute102_baddbmm_permute102``, the four duplicate pooled
permutes and the three embedding-gradient recats.

Each call is measured at two sizes, with the data checks off and on: the count must be the
table's exactly whatever the size, the AI-CPU count too.  The size-only paths (``int64_index``,
``wide``) are measured with ``_gather.INT32_LIMIT`` lowered below the test's sizes, as if they
passed 2**31.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

from fbgemm_npu.native.fbgemm.permute import _gather
from fbgemm_npu.testing.budgets import assert_op_budget as _assert_op_budget

F = torch.ops.fbgemm
NPU = "npu"
SIZES = (4, 300)  # batch (rows) and features scale with it: the counts must not
SEQUENCE = "fbgemm::permute_sequence_embeddings"
BADDBMM = "fbgemm::permute102_baddbmm_permute102"
DUPLICATES = [
    "permute_duplicate_pooled_embs",
    "permute_duplicate_pooled_embs_split",
    "permute_duplicate_pooled_embs_auto_grad",
    "permute_duplicate_pooled_embs_auto_grad_split",
]
RECATS = [
    "recat_embedding_grad_output",
    "recat_embedding_grad_output_mixed_D",
    "recat_embedding_grad_output_mixed_D_batch",
]
# measured here; test_permute_budgets.py checks the rest of the family
MEASURED = {SEQUENCE, BADDBMM, *(f"fbgemm::{op}" for op in DUPLICATES + RECATS)}


@pytest.fixture(params=["checks_off", "checks_on"])
def validation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0" if request.param == "checks_off" else "1")


def assert_op_budget(fn: Callable[[], Any], qualname: str, **kw: Any) -> Any:
    """After one warm-up call (the cached index constants grow once at a new size)."""
    fn()
    return _assert_op_budget(fn, qualname, exact=True, **kw)


def _sequence(n: int, dtype: torch.dtype, strided: bool = False) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(n)
    lengths = torch.randint(0, 4, (n, 3), generator=g).to(dtype)
    perm = torch.randperm(n, generator=g).to(torch.int32)
    emb = torch.randn(int(lengths.sum()), generator=g)
    dev_lengths = lengths.t().contiguous().to(NPU).t() if strided else lengths.to(NPU)
    p, e = perm.to(NPU), emb.to(NPU)
    return lambda: F.permute_sequence_embeddings(p, dev_lengths, e)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_permute_sequence_embeddings(validation: None, dtype: torch.dtype) -> None:
    for n in SIZES:
        assert_op_budget(_sequence(n, dtype), SEQUENCE)
        assert_op_budget(_sequence(n, dtype, strided=True), SEQUENCE, path="strided_lengths")


def test_permute_sequence_embeddings_size_paths(
    validation: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``wide``: the output could pass the int32 range (``T * values.numel()``) but does not;
    ``int64_index``: it does."""
    lengths = torch.tensor([[1, 2], [0, 3], [2, 2]], dtype=torch.int32).to(NPU)
    emb = torch.arange(10.0).to(NPU)
    pair = torch.tensor([1, 0], dtype=torch.int32).to(NPU)  # 6 values of 10 available
    monkeypatch.setattr(_gather, "INT32_LIMIT", 12)  # 2 * 10 >= 12 > 10
    assert_op_budget(
        lambda: F.permute_sequence_embeddings(pair, lengths, emb), SEQUENCE, path="wide"
    )
    monkeypatch.setattr(_gather, "INT32_LIMIT", 5)
    call = lambda: F.permute_sequence_embeddings(pair, lengths, emb)  # noqa: E731
    assert_op_budget(call, SEQUENCE, path="int64_index")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_permute102_baddbmm_permute102(dtype: torch.dtype) -> None:
    for n in SIZES:
        args = [torch.randn(*shape).to(dtype).to(NPU) for shape in ((3, 5), (n, 3, 8), (3, 8, 5))]
        assert_op_budget(partial(F.permute102_baddbmm_permute102, *args), BADDBMM)


def _duplicate(op: str, n: int) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(n)
    widths = torch.randint(0, 6, (n,), generator=g)
    off = torch.cat([torch.zeros(1, dtype=torch.int64), widths.cumsum(0)])
    perm = torch.randint(0, n, (2 * n,), generator=g)  # repeats and drops
    x = torch.randn(5, int(off[-1]), generator=g)
    dev = [t.to(NPU) for t in (x, off, perm)]
    return lambda: getattr(F, op)(dev[0], dev[1], dev[2], dev[1], dev[2])


@pytest.mark.parametrize("op", DUPLICATES)
def test_permute_duplicate_pooled_embs(validation: None, op: str) -> None:
    for n in SIZES:
        assert_op_budget(_duplicate(op, n), f"fbgemm::{op}")


@pytest.mark.parametrize("op", DUPLICATES)
def test_permute_duplicate_pooled_embs_int64(
    validation: None, op: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_gather, "INT32_LIMIT", 8)  # permute_list.numel() * width >= 8
    assert_op_budget(_duplicate(op, 4), f"fbgemm::{op}", path="int64_index")


def _recat(op: str, n: int) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(n)
    ranks = torch.randint(0, 7, (8,), generator=g)
    ranks[2] = 0  # an empty rank
    if op == "recat_embedding_grad_output":
        grad = torch.randn(n, int(ranks.sum()), 4, generator=g).to(NPU)
        return lambda: F.recat_embedding_grad_output(grad, ranks.tolist())
    grad = torch.randn(n, int(ranks.sum()), generator=g).to(NPU)
    if op == "recat_embedding_grad_output_mixed_D":
        return lambda: F.recat_embedding_grad_output_mixed_D(grad, ranks.tolist())
    starts = (ranks.cumsum(0) - ranks).to(NPU)
    dims = ranks.to(NPU)
    return lambda: F.recat_embedding_grad_output_mixed_D_batch(grad, dims, starts)


@pytest.mark.parametrize("op", RECATS)
def test_recat_embedding_grad_output(validation: None, op: str) -> None:
    for n in SIZES:
        assert_op_budget(_recat(op, n), f"fbgemm::{op}")
