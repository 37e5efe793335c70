"""The permute family held to its BUDGETS table (``native/fbgemm/permute/budgets.py``).

Each call is measured at two sizes (features x batch): with the data checks off and on, the count
must be the table's exactly, whatever the size, and the AI-CPU count too (0 everywhere but the
``int64_index`` path).  The sparse-data permutes are measured with int64 and int32 lengths (the
route of a scan depends on its dtype); the size-only paths (``int64_index``, ``wide``) with
``_gather.INT32_LIMIT`` lowered below the test's sizes, as if they passed 2**31.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch

from fbgemm_npu.native.fbgemm.permute import _gather
from fbgemm_npu.testing.budgets import assert_op_budget as _assert_op_budget
from fbgemm_npu.testing.budgets import family_ops
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.permute_inputs import on_npu, sparse_batch

F = torch.ops.fbgemm
SIZES = ((3, 4), (26, 512))  # (features, batch): the count must not depend on them
P2D = "fbgemm::permute_2D_sparse_data"
INVERT, EXPAND = "fbgemm::invert_permute", "fbgemm::expand_into_jagged_permute"
UNSIZED = "no_permuted_lengths_sum"
LATER_OPS = ("permute_sequence", "permute102", "permute_duplicate", "recat_embedding")


@pytest.fixture
def with_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data checks at their default (``FBGEMM_NPU_VALIDATE=1``: ``assert`` today),
    whatever the environment running the suite says: the ``checks`` counts are the default's (a
    deferred check is one launch cheaper)."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "1")


LENGTH_DTYPES = (torch.int64, torch.int32)


def assert_op_budget(fn: Callable[[], Any], qualname: str, **kw: Any) -> Any:
    """The budget after one warm-up call: the cached index constants (``native/_index.py``)
    grow at a new size or dtype once, which is not a launch of the op's call."""
    fn()
    return _assert_op_budget(fn, qualname, **kw)


def _call_2d(d: dict[str, Any], given: bool) -> Callable[[], Any]:
    pls = int(d["lengths"][d["permute"].long()].sum()) if given else None
    dev = on_npu(d)
    return lambda: F.permute_2D_sparse_data(
        dev["permute"], dev["lengths"], dev["values"], dev.get("weights"), pls
    )


def _path(weights: bool, given: bool) -> str | None:
    """The budget path: weights and the length sum given is the main one."""
    parts = [*([] if weights else ["no_weights"]), *([] if given else [UNSIZED])]
    return " + ".join(parts) or None


def _batch(t_in: int, b: int, weights: bool, dtype: torch.dtype) -> dict[str, Any]:
    d = sparse_batch(t_in, b, weights=weights)
    d["lengths"] = d["lengths"].to(dtype)
    return d


def _hold_2d(weights: bool, given: bool) -> None:
    for dtype in LENGTH_DTYPES:
        for t_in, b in SIZES:
            fn = _call_2d(_batch(t_in, b, weights, dtype), given)
            assert_op_budget(fn, P2D, path=_path(weights, given), sized=given, exact=True)


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
@pytest.mark.parametrize("weights", [False, True], ids=["unweighted", "weighted"])
def test_permute_2d_kernel_budget(no_validation: None, weights: bool, given: bool) -> None:
    _hold_2d(weights, given)


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
@pytest.mark.parametrize("weights", [False, True], ids=["unweighted", "weighted"])
def test_permute_2d_checks_cost(with_validation: None, weights: bool, given: bool) -> None:
    _hold_2d(weights, given)


def _other_call(op: str, t_in: int, b: int) -> Callable[[], Any]:
    d = on_npu(sparse_batch(t_in, b, weights=True))
    if op == "permute_1D_sparse_data":
        perm = torch.randperm(t_in * b).to(torch.int32).to("npu")
        return lambda: F.permute_1D_sparse_data(
            perm, d["lengths"].view(-1), d["values"], d["weights"]
        )
    if op == "permute_2D_sparse_data_input1D":
        return lambda: F.permute_2D_sparse_data_input1D(
            d["permute"], d["lengths"].view(-1), d["values"], b, d["weights"]
        )
    return lambda: getattr(F, op)(d["permute"], d["lengths"], d["values"], d["weights"])


OTHER_OPS = [
    "permute_1D_sparse_data",
    "permute_2D_sparse_data_input1D",
    "permute_sparse_features",
    "permute_sparse_data",
    "permute_2D_sparse_preallocated_out",
]


def _hold_other(op: str) -> None:
    """Weighted, without the length sum (permute_sparse_features has no such argument: its
    main path reads the size back)."""
    path = None if op == "permute_sparse_features" else UNSIZED
    for t_in, b in SIZES:
        assert_op_budget(
            _other_call(op, t_in, b), f"fbgemm::{op}", path=path, sized=False, exact=True
        )


@pytest.mark.parametrize("op", OTHER_OPS)
def test_other_sparse_permutes_budget(no_validation: None, op: str) -> None:
    _hold_other(op)


@pytest.mark.parametrize("op", OTHER_OPS)
def test_other_sparse_permutes_checks(with_validation: None, op: str) -> None:
    _hold_other(op)


@pytest.mark.parametrize("op", ["permute_2D_sparse_data", "permute_sparse_features"])
def test_strided_lengths_are_copied_once(no_validation: None, op: str) -> None:
    for t_in, b in SIZES:
        d = sparse_batch(t_in, b, weights=True)
        dev = on_npu(d)
        transposed = d["lengths"].t().contiguous().to("npu").t()  # no view flattens it
        fn = partial(getattr(F, op), dev["permute"], transposed, dev["values"], dev["weights"])
        assert_op_budget(fn, f"fbgemm::{op}", path="strided_lengths", sized=False, exact=True)


def test_invert_and_expand_budget(with_validation: None) -> None:
    """With the checks on (the permutation check; offsets from 0 to output_size without
    decreasing); expand in int64 (main path) and int32."""
    for n in (5, 4000):
        perm = torch.randperm(n).to("npu")
        assert_op_budget(partial(F.invert_permute, perm), INVERT, exact=True)
        lengths = torch.randint(0, 5, (n,))
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to("npu")
        for dtype, path in ((torch.int64, None), (torch.int32, "int32")):
            o, p = offsets.to(dtype), perm.to(dtype)
            expand = partial(F.expand_into_jagged_permute, p, o, o, int(lengths.sum()))
            assert_op_budget(expand, EXPAND, path=path, exact=True)


def test_expand_and_invert_kernel_budget(no_validation: None) -> None:
    for n in (5, 4000):
        perm = torch.randperm(n).to("npu")
        offsets = torch.arange(n + 1).to("npu")
        for dtype, path in ((torch.int64, None), (torch.int32, "int32")):
            o, p = offsets.to(dtype), perm.to(dtype)
            expand = partial(F.expand_into_jagged_permute, p, o, o, n)
            assert_op_budget(expand, EXPAND, path=path, exact=True)
        assert_op_budget(partial(F.invert_permute, perm), INVERT, exact=True)
        transposed = torch.randperm(2 * n).view(2, n).t().contiguous().to("npu").t()
        assert_op_budget(partial(F.invert_permute, transposed), INVERT, path="strided", exact=True)


def test_budget_table_covers_the_family() -> None:
    # the later ops (sequence, duplicate pooled, recat) are measured in test_permute_more_budgets
    family = family_ops("permute") - {
        op for op in family_ops("permute") if op.split("::")[1].startswith(LATER_OPS)
    }
    measured = {P2D, INVERT, EXPAND}
    assert family == measured | {f"fbgemm::{op}" for op in OTHER_OPS}


def test_empty_outputs_cost_nothing() -> None:
    """No feature to read: the kernel returns empty outputs before any launch or check."""
    call = _call_2d(sparse_batch(3, 0, weights=True), given=False)
    with count() as c:
        lengths, values, weights = call()
    assert (c.launches, c.syncs) == (0, 0), c.summary()
    assert lengths.shape == (3, 0) and values.shape == (0,) and weights.shape == (0,)


# --- the paths only sizes reach (values or output past 2**31) ---------------------------------


def _limited(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(_gather, "INT32_LIMIT", limit)


@pytest.mark.parametrize("validate", ["0", "1"], ids=["checks_off", "checks_on"])
@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
def test_int64_index_path(monkeypatch: pytest.MonkeyPatch, validate: str, given: bool) -> None:
    """Values past the limit: the same program in int64 (its AI-CPU launches held), the same
    result."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", validate)
    for t_in, b in SIZES:
        d = sparse_batch(t_in, b, weights=True)
        expected = _call_2d(d, given)()
        _limited(monkeypatch, d["values"].numel())
        fn = _call_2d(d, given)
        path = "int64_index" if given else f"{UNSIZED} + int64_index"  # the wide read first
        c = assert_op_budget(fn, P2D, path=path, sized=given, exact=True)
        assert c.ai_cpu == 5, c.summary()
        for got, want in zip(fn(), expected, strict=True):
            assert torch.equal(got.cpu(), want.cpu())
        monkeypatch.undo()
        monkeypatch.setenv("FBGEMM_NPU_VALIDATE", validate)


@pytest.mark.parametrize("validate", ["0", "1"], ids=["checks_off", "checks_on"])
def test_wide_unsized_path(monkeypatch: pytest.MonkeyPatch, validate: str) -> None:
    """No length sum and T_out * values.numel() past the limit (the values and the output
    below it): the exact size is read first by an int64 sum, then the int32 route (AI CPU 0)."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", validate)
    for t_in, b in SIZES:
        d = sparse_batch(t_in, b, weights=True)
        expected = _call_2d(d, given=False)()
        monkeypatch.setattr(_gather, "INT32_LIMIT", d["values"].numel() + 1)
        fn = _call_2d(d, given=False)
        c = assert_op_budget(fn, P2D, path=f"{UNSIZED} + wide", sized=False, exact=True)
        assert c.ai_cpu == 0, c.summary()
        for got, want in zip(fn(), expected, strict=True):
            assert torch.equal(got.cpu(), want.cpu())
        dev = on_npu(d)
        features = partial(
            F.permute_sparse_features, dev["permute"], dev["lengths"], dev["values"], dev["weights"]
        )
        assert_op_budget(features, "fbgemm::permute_sparse_features", path="wide", sized=False)
        _limited(monkeypatch, d["values"].numel())
        c = assert_op_budget(
            features, "fbgemm::permute_sparse_features", path="int64_index", sized=False
        )
        assert c.ai_cpu == 5, c.summary()
        monkeypatch.setattr(_gather, "INT32_LIMIT", 2**31)
