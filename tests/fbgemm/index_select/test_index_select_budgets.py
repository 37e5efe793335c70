"""The index-select family held to its BUDGETS table (``native/fbgemm/index_select/budgets.py``).

Each call is measured at two sizes that differ in batch, features and rows: with the data checks
off and on, the count must be the table's exactly, whatever the size, and the launches a 910B
runs on its AI CPU at most the table's (``ai_cpu`` / ``path_ai_cpu``), and no upload stalls the
host.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_op_budget, family_ops
from fbgemm_npu.testing.index_select_inputs import generator, to_npu

F = torch.ops.fbgemm
SIZES = ((3, 4, 2), (26, 64, 8))  # (features / tables, batch, columns)


@dataclass(frozen=True)
class Case:
    """Which budget a call is held to (see :meth:`Budget.launch_limit`)."""

    op: str
    path: str | None = None
    sized: bool = True
    units: int = 1


def _op(name: str) -> str:
    return f"fbgemm::{name}"


JIS, V2 = _op("jagged_index_select"), _op("jagged_index_select_2d_forward_v2")
KEYED, BIS, GIS = (
    _op("keyed_jagged_index_select_dim1"),
    _op("batch_index_select_dim0"),
    _op("group_index_select_dim0"),
)
BIST = _op("batch_index_select_dim0_tensor")
NO_ROWS, NO_SUM = "no_num_dense_output_rows", "no_selected_lengths_sum"
CASES: dict[str, Case] = {
    "jagged_index_select": Case(JIS, NO_ROWS, sized=False),
    "jagged_index_select[size]": Case(JIS),
    "jagged_index_select_2d_forward_v2": Case(V2, NO_ROWS, sized=False),
    "jagged_index_select_2d_forward_v2[size]": Case(V2),
    "jagged_index_add_2d_forward_v2": Case(_op("jagged_index_add_2d_forward_v2")),
    "jagged_index_add_2d_forward_v2[int64]": Case(
        _op("jagged_index_add_2d_forward_v2"), "int64_values"
    ),
    "keyed_jagged_index_select_dim1": Case(KEYED, f"no_weights + {NO_SUM}", sized=False),
    "keyed_jagged_index_select_dim1[weights]": Case(KEYED, NO_SUM, sized=False),
    "keyed_jagged_index_select_dim1[size]": Case(KEYED, "no_weights"),
    "keyed_jagged_index_select_dim1[weights, size]": Case(KEYED),
    "batch_index_select_dim0": Case(BIS),
    "index_select_dim0": Case(_op("index_select_dim0")),
    "batch_index_select_dim0[permuted]": Case(BIS, "permuted"),
    "batch_index_select_dim0[one width]": Case(BIS, "one_width"),
    "batch_index_select_dim0[one width, permuted]": Case(BIS, "one_width_permuted"),
    "batch_index_select_dim0_tensor": Case(BIST),
    "batch_index_select_dim0_tensor[one width, permuted]": Case(BIST, "one_width_permuted"),
    "group_index_select_dim0[one width]": Case(GIS, "one_width"),
    "group_index_select_dim0[mixed widths]": Case(GIS),
    "group_index_select_dim0[one member]": Case(GIS, "one_member"),
    "group_index_select_dim0[transposed members]": Case(GIS, "transposed_members"),
    "offsets_range": Case(_op("offsets_range")),
    "lengths_range": Case(_op("lengths_range"), "no_shape", sized=False),
    "lengths_range[shape]": Case(_op("lengths_range")),
    "lengths_range_out": Case(_op("lengths_range_out"), "no_shape", sized=False),
    "lengths_range_out[shape]": Case(_op("lengths_range_out")),
    "segment_sum_csr": Case(_op("segment_sum_csr"), "no_cast"),
    "segment_sum_csr[float16]": Case(_op("segment_sum_csr")),
    "segment_sum_csr[no segments]": Case(_op("segment_sum_csr"), "no_segments"),
    "segment_sum_csr[int64]": Case(_op("segment_sum_csr"), "int64_values"),
    "jagged_unique_indices": Case(_op("jagged_unique_indices")),
    "jagged_unique_indices[strided offsets]": Case(_op("jagged_unique_indices"), "strided_offsets"),
}


def _jagged_calls(t: int, b: int, d: int) -> dict[str, Callable[[], Any]]:
    g = generator(0)
    lengths = torch.randint(0, 6, (t * b,), generator=g)
    values = torch.randn(int(lengths.sum()), d, generator=g)
    indices = torch.randint(0, t * b, (t * b // 2 + 1,), generator=g)
    total = int(lengths[indices].sum())
    v, ln, ix, io, oo = to_npu(
        values, lengths, indices, lengths.cumsum(0), lengths[indices].cumsum(0)
    )
    grad = torch.randn(total, d, generator=generator(1)).to("npu")
    grad_i64 = torch.randint(-9, 9, (total, d), generator=generator(1)).to("npu")
    kl = torch.randint(0, 4, (t * b,), generator=g)
    koffsets = torch.cat([torch.zeros(1, dtype=torch.int64), kl.cumsum(0)])
    kvals = torch.randn(int(kl.sum()), generator=g)
    ksel = torch.randint(0, b, (b // 2 + 1,), generator=g)
    ktotal = int(sum(kl[n * b + j] for n in range(t) for j in ksel))
    kv, klen, koff, ks = to_npu(kvals, kl, koffsets, ksel)
    keyed = "keyed_jagged_index_select_dim1"
    return {
        "jagged_index_select": lambda: F.jagged_index_select(v, ln, ix),
        "jagged_index_select[size]": lambda: F.jagged_index_select(v, ln, ix, total),
        "jagged_index_select_2d_forward_v2": (
            lambda: F.jagged_index_select_2d_forward_v2(v, ix, io, oo)
        ),
        "jagged_index_select_2d_forward_v2[size]": (
            lambda: F.jagged_index_select_2d_forward_v2(v, ix, io, oo, total)
        ),
        "jagged_index_add_2d_forward_v2": (
            lambda: F.jagged_index_add_2d_forward_v2(grad, ix, oo, io, v.size(0), total)
        ),
        "jagged_index_add_2d_forward_v2[int64]": (
            lambda: F.jagged_index_add_2d_forward_v2(grad_i64, ix, oo, io, v.size(0), total)
        ),
        keyed: lambda: F.keyed_jagged_index_select_dim1(kv, klen, koff, ks, b),
        f"{keyed}[weights]": lambda: F.keyed_jagged_index_select_dim1(kv, klen, koff, ks, b, kv),
        f"{keyed}[size]": (
            lambda: F.keyed_jagged_index_select_dim1(kv, klen, koff, ks, b, None, ktotal)
        ),
        f"{keyed}[weights, size]": (
            lambda: F.keyed_jagged_index_select_dim1(kv, klen, koff, ks, b, kv, ktotal)
        ),
    }


def sizes(*lists: list[int]) -> tuple[torch.Tensor, ...]:
    """``batch_index_select_dim0_tensor``'s size arguments: int64 tensors on the CPU."""
    return tuple(torch.tensor(v, dtype=torch.int64) for v in lists)


def _table_calls(t: int, b: int, d: int) -> dict[str, Callable[[], Any]]:
    g = generator(1)
    rows, cols = [5 + i % 3 for i in range(t)], [1 + i % 4 for i in range(t)]
    counts = [b] * t
    flat = torch.randn(sum(r * c for r, c in zip(rows, cols, strict=True)), generator=g)
    bidx = torch.cat([torch.randint(0, r, (b,), generator=g) for r in rows])
    same = torch.randn(sum(rows) * d, generator=g)
    members = [torch.randn(r, d, generator=g) for r in rows]
    mixed = [torch.randn(r, c, generator=g) for r, c in zip(rows, cols, strict=True)]
    gidx = [torch.randint(0, r, (b,), generator=g) for r in rows]
    # four members stored transposed (not viewable as rows), each of its own width
    transposed = [torch.randn(2 + i, 5 + i, generator=g).to("npu").t() for i in range(4)]
    tidx = [torch.randint(0, 5 + i, (b,), generator=g) for i in range(4)]
    flat, bidx, same, members, mixed, gidx, tidx = to_npu(
        flat, bidx, same, members, mixed, gidx, tidx
    )
    return {
        "batch_index_select_dim0": (
            lambda: F.batch_index_select_dim0(flat, bidx, counts, rows, cols)
        ),
        "batch_index_select_dim0[permuted]": (
            lambda: F.batch_index_select_dim0(flat, bidx, counts, rows, cols, True)
        ),
        "batch_index_select_dim0[one width]": (
            lambda: F.batch_index_select_dim0(same, bidx, counts, rows, [d] * t)
        ),
        "batch_index_select_dim0[one width, permuted]": (
            lambda: F.batch_index_select_dim0(same, bidx, counts, rows, [d] * t, True)
        ),
        # the size tensors on the CPU (upstream's usage): no sync
        "batch_index_select_dim0_tensor": (
            lambda: F.batch_index_select_dim0_tensor(flat, bidx, *sizes(counts, rows, cols))
        ),
        "batch_index_select_dim0_tensor[one width, permuted]": (
            lambda: F.batch_index_select_dim0_tensor(
                same, bidx, *sizes(counts, rows, [d] * t), True
            )
        ),
        "group_index_select_dim0[one width]": lambda: F.group_index_select_dim0(members, gidx),
        "group_index_select_dim0[mixed widths]": lambda: F.group_index_select_dim0(mixed, gidx),
        "group_index_select_dim0[one member]": (
            lambda: F.group_index_select_dim0(members[:1], gidx[:1])
        ),
        "group_index_select_dim0[transposed members]": (
            lambda: F.group_index_select_dim0(transposed, tidx)
        ),
    }


def _range_calls(t: int, b: int, d: int) -> dict[str, Callable[[], Any]]:
    g = generator(2)
    csr = torch.cat(
        [torch.zeros(1, dtype=torch.int64), torch.randint(0, 4, (t * b,), generator=g).cumsum(0)]
    )
    seg_vals = torch.randn(int(csr[-1]) * 2, generator=g)
    csr_n, seg_n, seg_h, seg_i, one = to_npu(
        csr, seg_vals, seg_vals.half(), (seg_vals * 8).long(), csr[:1]
    )
    lengths = torch.randint(0, 5, (t * b,), generator=g)
    total = int(lengths.sum())
    rl = lengths.to("npu")
    ro = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]]).to("npu")
    out = torch.empty(total, dtype=torch.int64, device="npu")
    return {
        "offsets_range": lambda: F.offsets_range(ro, total),
        "lengths_range": lambda: F.lengths_range(rl),
        "lengths_range[shape]": lambda: F.lengths_range(rl, [total]),
        "lengths_range_out": lambda: F.lengths_range_out(out, rl),
        "lengths_range_out[shape]": lambda: F.lengths_range_out(out, rl, [total]),
        "segment_sum_csr": lambda: F.segment_sum_csr(2, csr_n, seg_n),
        "segment_sum_csr[float16]": lambda: F.segment_sum_csr(2, csr_n, seg_h),
        "segment_sum_csr[no segments]": lambda: F.segment_sum_csr(2, one, seg_n),
        "segment_sum_csr[int64]": lambda: F.segment_sum_csr(2, csr_n, seg_i),
    }


def _unique_calls(t: int, b: int, d: int) -> dict[str, Callable[[], Any]]:
    g = generator(3)
    sizes = torch.randint(1, 50, (t,), generator=g)
    lengths = torch.randint(0, 4, (t * b,), generator=g)
    feat = torch.arange(t).repeat_interleave(b).repeat_interleave(lengths)
    indices = (torch.rand(int(lengths.sum()), generator=g) * sizes[feat]).long()
    hsc = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    args = to_npu(hsc, torch.arange(t + 1), offsets, indices)
    strided = torch.stack([offsets, offsets], 1).reshape(-1).to("npu")[::2]
    return {
        "jagged_unique_indices": lambda: F.jagged_unique_indices(*args),
        "jagged_unique_indices[strided offsets]": (
            lambda: F.jagged_unique_indices(args[0], args[1], strided, args[3])
        ),
    }


def _dim0_calls(t: int, b: int, d: int) -> dict[str, Callable[[], Any]]:
    g = generator(4)
    x, idx = to_npu(torch.randn(t * b, d, generator=g), torch.randint(0, t * b, (b,), generator=g))
    return {"index_select_dim0": lambda: F.index_select_dim0(x, idx)}


def _calls(t: int, b: int, d: int) -> dict[str, Callable[[], Any]]:
    """Case name -> the call on npu tensors of that size (inputs moved there beforehand)."""
    return {
        **_jagged_calls(t, b, d),
        **_table_calls(t, b, d),
        **_range_calls(t, b, d),
        **_unique_calls(t, b, d),
        **_dim0_calls(t, b, d),
    }


def _hold(case: Case, fn: Callable[[], Any]) -> Any:
    """``fn`` held to exactly its case's budget (data checks as the environment says), after one
    uncounted call: the shared index caches (cached ``arange``s, int32 zeros and ones) fill or
    grow once per size, not on every call."""
    fn()
    c = assert_op_budget(
        fn, case.op, path=case.path, units=case.units, sized=case.sized, exact=True
    )
    # no upload that stalls the host (the data checks' _assert_async is the checks' own)
    stalls = [e.name for e in c.events if e.stall and "_assert_async" not in e.name]
    assert not stalls, stalls
    return c


def test_every_case_has_a_call() -> None:
    assert set(_calls(*SIZES[0])) == set(CASES)


def test_every_op_of_the_family_is_measured() -> None:
    family = family_ops("index_select")
    assert family == {case.op for case in CASES.values()}


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_budget(no_validation: None, name: str) -> None:
    for size in SIZES:
        _hold(CASES[name], _calls(*size)[name])


@pytest.mark.parametrize("name", list(CASES))
def test_checks_cost(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "1")
    for size in SIZES:
        _hold(CASES[name], _calls(*size)[name])


def _backward_calls(t: int, b: int, d: int) -> dict[str, tuple[str, Callable[[], Any]]]:
    """Backward name -> (its budget path, the backward of a forward already run)."""
    g = generator(5)
    lengths = torch.randint(0, 6, (t * b,), generator=g)
    indices = torch.randint(0, t * b, (t * b // 2 + 1,), generator=g)
    total = int(lengths[indices].sum())
    values = torch.randn(int(lengths.sum()), d, generator=g)
    kl = torch.randint(0, 4, (t * b,), generator=g)
    koffsets = torch.cat([torch.zeros(1, dtype=torch.int64), kl.cumsum(0)])
    ksel = torch.randint(0, b, (b // 2 + 1,), generator=g)
    ktotal = int(sum(kl[n * b + j] for n in range(t) for j in ksel))
    kvals = torch.randn(int(kl.sum()), generator=g)
    ln, ix, klen, koff, ks, bidx = to_npu(
        lengths, indices, kl, koffsets, ksel, torch.tensor([2, 0, 1, 3, 3])
    )
    v, kv = values.to("npu").requires_grad_(), kvals.to("npu").requires_grad_()
    flat = torch.randn(18, device="npu", requires_grad=True)
    keyed = F.keyed_jagged_index_select_dim1
    rows = torch.randn(t * b, d, generator=g).to("npu").requires_grad_()
    forwards = {
        "index_select_dim0": ("backward", rows, lambda: F.index_select_dim0(rows, ix)),
        "batch_index_select_dim0": (
            "backward",
            flat,
            lambda: F.batch_index_select_dim0(flat, bidx, [2, 3], [3, 4], [2, 3]),
        ),
        "batch_index_select_dim0_tensor": (
            "backward",
            flat,
            lambda: F.batch_index_select_dim0_tensor(flat, bidx, *sizes([2, 3], [3, 4], [2, 3])),
        ),
        "jagged_index_select[size]": (
            "backward",
            v,
            lambda: F.jagged_index_select(v, ln, ix, total)[0],
        ),
        "jagged_index_select": ("backward_unsized", v, lambda: F.jagged_index_select(v, ln, ix)[0]),
        "keyed_jagged_index_select_dim1[size]": (
            "backward",
            kv,
            lambda: keyed(kv, klen, koff, ks, b, None, ktotal)[0],
        ),
        "keyed_jagged_index_select_dim1": (
            "backward_unsized",
            kv,
            lambda: keyed(kv, klen, koff, ks, b)[0],
        ),
    }
    calls = {}
    for name, (path, leaf, forward) in forwards.items():
        out = forward()
        calls[name] = (
            path,
            functools.partial(torch.autograd.grad, out, leaf, torch.ones_like(out)),
        )
    return calls


BACKWARDS = (
    "index_select_dim0",
    "batch_index_select_dim0",
    "batch_index_select_dim0_tensor",
    "jagged_index_select[size]",
    "jagged_index_select",
    "keyed_jagged_index_select_dim1[size]",
    "keyed_jagged_index_select_dim1",
)


@pytest.mark.parametrize("name", BACKWARDS)
def test_backward_budget(name: str) -> None:
    """The backward of each autograd kernel, sized and not (the unsized forward is the op itself,
    so its backward rebuilds the gather index), exact at two sizes."""
    for size in SIZES:
        path, backward = _backward_calls(*size)[name]
        assert_op_budget(backward, _op(name.partition("[")[0]), path=path, exact=True)
