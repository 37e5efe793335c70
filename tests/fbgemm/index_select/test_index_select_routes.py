"""The index-select family off a 910B's AI CPU (issue 10, docs/hardware.md "AI-CPU routes").

Every op, with int32 and with int64 offsets / lengths / indices (the route depends on the dtype),
launches nothing the route table (``fbgemm_npu/testing/routes_910b.py``) sends to the AI CPU --
but ``jagged_unique_indices``' one ``_unique2`` (its budget note says why) -- and no upload that
stalls the host; each result equals upstream's CPU kernel or the family's reference.  The host
decisions behind the int32 arithmetic are tested at their bounds (2**31 - 1 and 2**31) without
tensors of that size, and the int64 route they fall back to is run on small inputs by lowering
the bound, against upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fbgemm_npu.native.fbgemm.index_select import _tables, _utils, index_select, keyed
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.index_select_inputs import (
    generator,
    keyed_reference,
    to_npu,
    unique_reference,
)

F = torch.ops.fbgemm
NPU = "npu"
HOST_STALL = "_assert_async"  # the data checks' host fallback: the lead's, not a kernel's


def _jagged(dt: torch.dtype) -> dict[str, tuple[Callable[..., Any], tuple, int, Any]]:
    """Name -> (op, CPU args, AI-CPU launches allowed, reference or None for upstream)."""
    g = generator(7)
    lengths = torch.randint(0, 5, (12,), generator=g)
    values = torch.randn(int(lengths.sum()), 3, generator=g)
    idx = torch.randint(0, 12, (7,), generator=g)
    total = int(lengths[idx].sum())
    inc, outc = lengths.cumsum(0), lengths[idx].cumsum(0)
    grad = torch.randn(total, 3, generator=g)
    kl = torch.randint(0, 4, (12,), generator=g)
    koff = torch.cat([torch.zeros(1, dtype=torch.int64), kl.cumsum(0)])
    kv = torch.randn(int(kl.sum()), generator=g)
    ksel = torch.tensor([3, 0, 3])
    ktotal = len(keyed_reference(kv, kl, koff, ksel, 4)[0])
    L, I = lengths.to(dt), idx.to(dt)  # noqa: E741
    return {
        "jagged_index_select": (F.jagged_index_select, (values, L, I), 0, None),
        "jagged_index_select[size]": (F.jagged_index_select, (values, L, I, total - 1), 0, None),
        "v2": (F.jagged_index_select_2d_forward_v2, (values, I, inc, outc), 0, None),
        "v2[size]": (F.jagged_index_select_2d_forward_v2, (values, I, inc, outc, total), 0, None),
        "add_v2": (
            F.jagged_index_add_2d_forward_v2,
            (grad, I, outc, inc, values.size(0), total),
            0,
            None,
        ),
        "keyed": (
            F.keyed_jagged_index_select_dim1,
            (kv, kl.to(dt), koff.to(dt), ksel.to(dt), 4, kv),
            0,
            keyed_reference,
        ),
        "keyed[size]": (
            F.keyed_jagged_index_select_dim1,
            (kv, kl.to(dt), koff.to(dt), ksel.to(dt), 4, None, ktotal),
            0,
            keyed_reference,
        ),
    }


def _tables_calls(dt: torch.dtype) -> dict[str, tuple[Callable[..., Any], tuple, int, Any]]:
    g = generator(8)
    rows, cols, n = [5, 7, 6], [2, 4, 6], 4
    flat = torch.randn(sum(r * c for r, c in zip(rows, cols, strict=True)), generator=g)
    same = torch.randn(sum(rows) * 3, generator=g)
    idx = torch.cat([torch.randint(0, r, (n,), generator=g) for r in rows]).to(dt)
    mixed = [torch.randn(r, c, generator=g) for r, c in zip(rows, cols, strict=True)]
    gidx = [torch.randint(0, r, (n + i,), generator=g).to(dt) for i, r in enumerate(rows)]
    counts = [n] * 3
    bis = F.batch_index_select_dim0
    return {
        "batch": (bis, (flat, idx, counts, rows, cols), 0, None),
        "batch[permuted]": (bis, (flat, idx, counts, rows, cols, True), 0, None),
        "batch[one width]": (bis, (same, idx, counts, rows, [3] * 3), 0, None),
        "batch[one width, permuted]": (bis, (same, idx, counts, rows, [3] * 3, True), 0, None),
        "group": (F.group_index_select_dim0, (mixed, gidx), 0, None),
        "group[one width]": (F.group_index_select_dim0, ([m[:, :2] for m in mixed], gidx), 0, None),
    }


def _range_calls(dt: torch.dtype) -> dict[str, tuple[Callable[..., Any], tuple, int, Any]]:
    g = generator(9)
    lengths = torch.randint(0, 5, (10,), generator=g)
    total = int(lengths.sum())
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]])
    csr = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    vals = torch.randn(total * 2 + 1, generator=g)
    sizes = torch.tensor([7, 1, 12])
    ul = torch.randint(0, 4, (3 * 4,), generator=g)
    feat = torch.arange(3).repeat_interleave(4).repeat_interleave(ul)
    uidx = (torch.rand(int(ul.sum()), generator=g) * sizes[feat]).long()
    hsc = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    uoff = torch.cat([torch.zeros(1, dtype=torch.int64), ul.cumsum(0)])
    unique = (hsc.to(dt), torch.tensor([0, 2, 3, 3], dtype=dt), uoff.to(dt), uidx.to(dt))
    return {
        "offsets_range": (F.offsets_range, (offsets.to(dt), total + 2), 0, None),
        "lengths_range": (F.lengths_range, (lengths.to(dt),), 0, None),
        "lengths_range[shape]": (F.lengths_range, (lengths.to(dt), [total]), 0, None),
        "segment_sum_csr": (F.segment_sum_csr, (2, csr.to(dt), vals), 0, None),
        "segment_sum_csr[half]": (F.segment_sum_csr, (2, csr.to(dt), vals.half()), 0, None),
        # _unique2 stays on the AI CPU (budgets.py: its note)
        "jagged_unique_indices": (F.jagged_unique_indices, unique, 1, unique_reference),
    }


def _all(dt: torch.dtype) -> dict[str, tuple[Callable[..., Any], tuple, int, Any]]:
    return {**_jagged(dt), **_tables_calls(dt), **_range_calls(dt)}


def _close(got: Any, want: Any) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype, (got, want)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-2, atol=1e-2)
        return
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        _close(a, b)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("name", list(_all(torch.int64)))
def test_every_op_stays_off_the_ai_cpu(name: str, dtype: torch.dtype) -> None:
    op, args, ai_cpu, reference = _all(dtype)[name]
    want = (reference or op)(*args)
    placed = to_npu(*args)
    op(*placed)  # the shared index caches filled
    with counters.count() as c:
        got = op(*placed)
    assert c.ai_cpu == ai_cpu, [e.name for e in c.events if e.ai_cpu]
    assert not [e.name for e in c.events if e.stall and HOST_STALL not in e.name]
    _close(got, want)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_count_le_equals_searchsorted(dtype: torch.dtype) -> None:
    """Empty segments, points below 0 and past ``n``, no points, no items; clamped or not
    (points the host keeps inside ``[0, n]``): ``searchsorted(points, arange(n), right=True)``."""
    cases = [
        ([2, 2, 5, 5, 5, 7], 9, True),
        ([0, 0], 4, True),
        ([-3, -1, 2, 6], 6, True),
        ([3, 12, 40], 10, True),
        ([], 5, True),
        ([0, 0], 0, True),
        ([0, 4, 8, 8, 12], 12, False),
    ]
    for points, n, clamp in cases:
        p = torch.tensor(points, dtype=dtype)
        want = torch.searchsorted(p, torch.arange(n, dtype=dtype), right=True)
        with counters.count() as c:
            got = _utils.count_le(p.to(NPU), n, clamp=clamp)
        assert got.dtype == torch.int32 and c.ai_cpu == 0
        torch.testing.assert_close(got.cpu().long(), want.long(), rtol=0, atol=0)


def test_int32_chosen_below_2_31_and_int64_above() -> None:
    """The host decides from sizes alone (no data read): the bounds at 2**31 - 1 and 2**31."""
    top = 2**31
    assert _utils.scan_dtype(top - 1, 0) == torch.int32
    assert _utils.scan_dtype(top - 1, top) == torch.int64
    # jagged_index_select: values.size(0) for the input scan, len(indices) * it for the output's
    assert index_select._scan_dtypes(2**20, 2**11 - 1, None) == (torch.int32, torch.int32)
    assert index_select._scan_dtypes(2**20, 2**11, None) == (torch.int32, torch.int64)
    assert index_select._scan_dtypes(top, 1, 5) == (torch.int64, torch.int64)
    assert index_select._scan_dtypes(8, 2, top) == (torch.int32, torch.int64)
    # keyed: the selected sum given, else len(indices) * values.numel()
    meta = torch.empty(2**20, device="meta")
    assert keyed._scan_dtype(meta, 2**11 - 1, None) == torch.int32
    assert keyed._scan_dtype(meta, 2**11, None) == torch.int64
    assert keyed._scan_dtype(meta, 2**11, top - 1) == torch.int32
    assert keyed._scan_dtype(meta, 1, top) == torch.int64


def test_segment_table_widens_values_past_int32() -> None:
    """Per-table constants (or their steps) of 2**31 and more (tables past 2**31 rows, which the
    host sees) reach the rows in int64, exactly; below, in int32 (AI Core)."""
    counts = [2, 0, 3, 1]
    top = 2**31 - 1
    for columns, dtype in (
        ([[0, 5, top, 7], [1, 3, 2, top]], torch.int32),
        ([[0, 5, top, 7], [1, -top, 2, top]], torch.int64),  # a step of 2**31 + 1
        ([[0, 5, 2**31, 7], [1, 3, 2, 0]], torch.int64),
        ([[0, 5, 2**40, 7], [1, -(2**40), 2, 0]], torch.int64),
    ):
        got = _tables.segment_table(columns, counts, torch.device(NPU))
        want = torch.tensor(columns).repeat_interleave(torch.tensor(counts), dim=1).t()
        assert got.dtype == dtype
        assert torch.equal(got.cpu().long(), want)


INT64_ROUTE = [
    "jagged_index_select",
    "jagged_index_select[size]",
    "keyed",
    "keyed[size]",
    "lengths_range",
    "lengths_range[shape]",
]


@pytest.mark.parametrize("name", INT64_ROUTE)
def test_int64_route_matches_upstream(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """With the int32 bound lowered to 4, the small inputs take the int64 route that sizes of
    2**31 and more take: the same results (it runs its scans on the AI CPU, as stated)."""
    monkeypatch.setattr(_utils, "INT32_LIMIT", 4)
    op, args, _, reference = _all(torch.int64)[name]
    want = (reference or op)(*args)
    with counters.count() as c:
        got = op(*to_npu(*args))
    assert c.ai_cpu > 0  # the int64 scans
    _close(got, want)
