"""The pooled family off a 910B's AI CPU (docs/hardware.md): the host decisions that pick a
route, the kept layouts (keyed on host values, never stale, bounded), calls with bad index data
that stay inside their buffers until the queued check is read (values near 2**31 included), and
the edge cases the host settles without reading data.  Expected values come from upstream's CPU
kernels.  (The budget tests hold every path at 0 AI-CPU launches and 0 stalls.)
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native.fbgemm.pooled import _utils as plans
from fbgemm_npu.native.fbgemm.pooled.pooled import FLOAT_EXACT, sort_key_dtype
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.pooled_inputs import keyed, kt_permute_args, our_stalls, pooled_args, to_npu

F = torch.ops.fbgemm
NPU = "npu"
INT32_MAX = 2**31 - 1
TILING = "fbgemm::permute_multi_embedding: argument 'permutes' must copy inside the inputs"


@pytest.fixture
def deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks queued (the default), whatever the run's FBGEMM_NPU_VALIDATE: the call itself must
    not fail, only the read of its check."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "deferred")


def test_block_ranks_sort_as_float32_while_exact() -> None:
    """float32 holds every rank below 2**24 exactly (AI Core); from T = 2**24 on the ranks sort
    as int64 (AI CPU, the only route left there), decided from T alone."""
    assert FLOAT_EXACT == 2**24
    assert float(torch.tensor(FLOAT_EXACT - 1, dtype=torch.float32)) == FLOAT_EXACT - 1
    assert sort_key_dtype(2) == sort_key_dtype(FLOAT_EXACT - 1) == torch.float32
    assert sort_key_dtype(FLOAT_EXACT) == sort_key_dtype(2**31) == torch.int64


def test_permute_pooled_embs_launches_no_integer_sort_nor_search() -> None:
    x, *lists = to_npu(pooled_args(26, 16, 4))
    F.permute_pooled_embs(x, *lists)
    with count() as c:
        F.permute_pooled_embs(x, *lists)
    assert c.ai_cpu == 0 and not our_stalls(c), c.summary()
    assert not {"aten.searchsorted.Tensor", "aten.repeat_interleave.Tensor"} & set(c.launch_ops)


def _permute_multi(d: dict[str, Any], permutes: torch.Tensor, **kw: Any) -> list[torch.Tensor]:
    _, in_shapes, out_shapes, out_lengths = kt_permute_args(d)
    args = to_npu([d["values"], permutes, in_shapes, out_shapes])
    return F.permute_multi_embedding(*args, kw.get("out_lengths", out_lengths))


@pytest.mark.parametrize(
    ("column", "value"),
    [(2, INT32_MAX), (3, INT32_MAX), (4, INT32_MAX), (2, -(2**31)), (0, INT32_MAX), (1, -1)],
)
def test_bad_permutes_stay_inside_the_buffers_until_the_check_is_read(
    deferred: None, column: int, value: int
) -> None:
    """Offsets and lengths near 2**31 (int64 arithmetic: no wrap), ids out of range: the call
    gathers inside the inputs (no index error) and the queued check names 'permutes'."""
    d = keyed(4, 3, 2)
    bad = kt_permute_args(d)[0].clone()
    bad[1, column] = value
    outs = _permute_multi(d, bad)
    assert [o.shape for o in outs] == [(2, n) for n in kt_permute_args(d)[3]]
    with pytest.raises(RuntimeError, match=TILING):
        fbgemm_npu.check()


def test_bad_permutes_in_reverse_scatter_inside_the_buffers(deferred: None) -> None:
    d = keyed(4, 3, 2)
    permutes, in_shapes, out_shapes, out_lengths = kt_permute_args(d)
    bad = permutes.clone()
    bad[0, 3] = INT32_MAX  # an output offset: the scatter's index
    grads = [torch.randn(2, n) for n in out_lengths]
    widths = [v.size(1) for v in d["values"]]
    op = "fbgemm::permute_multi_embedding_function"
    args = to_npu([grads, bad, out_shapes, in_shapes])
    F.permute_multi_embedding_function(*args, widths, True)
    with pytest.raises(RuntimeError, match=f"{op}: argument 'permutes' must copy inside"):
        fbgemm_npu.check()


@pytest.mark.parametrize(
    ("off", "perm"),
    [
        ([0, -(2**62), 2**62, 5, 9], [3, 2, 1, 0]),
        ([0, 4, 2, 6, 9], [0, 1, 2, 2**40]),
        ([0, 2, 4, 6, 9], [-1, 0, 1, 2]),
        ([0, 2**31, 2**31 + 1, 2**32, 9], [1, 0, 3, 2**31]),
    ],
)
def test_bad_permute_lists_stay_inside_the_buffers(
    deferred: None, off: list[int], perm: list[int]
) -> None:
    x = torch.randn(3, 9)
    lists = [torch.tensor(off), torch.tensor(perm)] * 2
    assert F.permute_pooled_embs(*to_npu([x, *lists])).shape == x.shape
    with pytest.raises(RuntimeError, match="permute_pooled_embs: argument 'permute_list' must be"):
        fbgemm_npu.check()


def test_cut_points_past_2_31_match_upstream() -> None:
    """Cut points past the width (near and past 2**31) leave empty blocks, as upstream's; the
    segment ids clamp them into the columns (int32 ids, no wrap)."""
    x = torch.randn(3, 9)
    for off in ([0, 3, 2**31 - 1, 2**31, 9], [0, 0, 2**31, 2**32, 9]):
        lists = [torch.tensor(off), torch.tensor([1, 0, 3, 2])] * 2
        expected = F.permute_pooled_embs(x, *lists)
        assert torch.equal(F.permute_pooled_embs(*to_npu([x, *lists])).cpu(), expected)
    fbgemm_npu.check()


def test_no_rows_are_settled_on_the_host() -> None:
    """Rows that fill no columns: out_lengths of 0 give empty outputs as upstream's; any column
    asked for fails at the call, with no data read."""
    d = keyed(4, 3, 2)
    none = kt_permute_args(d)[0][:0]
    outs = _permute_multi(d, none, out_lengths=[0, 0])
    assert [tuple(o.shape) for o in outs] == [(2, 0), (2, 0)]
    expected = F.permute_multi_embedding(d["values"], none, *kt_permute_args(d)[1:3], [0, 0])
    assert [tuple(o.shape) for o in expected] == [(2, 0), (2, 0)]
    with pytest.raises(RuntimeError, match=f"{TILING}.*'out_lengths' asks for 3 columns"):
        _permute_multi(d, none, out_lengths=[1, 2])


def test_inputs_of_no_columns_with_columns_asked_for_fail_at_the_call() -> None:
    permutes = torch.tensor([[0, 0, 0, 0, 2, 0]], dtype=torch.int32)
    shapes = torch.tensor([0], dtype=torch.int32)
    args = to_npu([[torch.zeros(2, 0)], permutes, shapes, shapes])
    with pytest.raises(RuntimeError, match=f"{TILING}.*asks for 2 columns"):
        F.permute_multi_embedding(*args, [2])


def test_all_rows_empty_match_upstream() -> None:
    permutes = torch.tensor([[0, 0, 0, 0, 0, 0], [1, 1, 3, 0, 0, 0]], dtype=torch.int32)
    values = [torch.randn(2, 4), torch.randn(2, 3)]
    shapes = torch.tensor([4, 3], dtype=torch.int32)
    expected = F.permute_multi_embedding(values, permutes, shapes, shapes, [0, 0])
    got = F.permute_multi_embedding(*to_npu([values, permutes, shapes, shapes]), [0, 0])
    assert [o.shape for o in got] == [o.shape for o in expected]
    fbgemm_npu.check()


# Three regroupings of the same keys: the same output widths ([5, 4]) in other orders, and the
# same keys with other widths; each layout's kept plan must be its own.
_KEYS = [["a", "b"], ["c", "d"]]
_LAYOUTS = [
    ([[2, 2], [3, 2]], [["c", "a"], ["d", "b"]]),
    ([[2, 2], [3, 2]], [["a", "c"], ["b", "d"]]),
    ([[1, 3], [3, 2]], [["c", "a"], ["d", "b"]]),
]


def _values(lengths: list[list[int]]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(sum(map(sum, lengths)))
    return [torch.randn(3, sum(ns), generator=gen) for ns in lengths]


@pytest.mark.parametrize("op", ["regroup_keyed_tensor", "permute_multi_embedding"])
def test_kept_layouts_follow_every_layout(op: str) -> None:
    """Alternating layouts (same widths, other groups; same keys, other widths), each call equal
    to upstream's; a layout seen before launches one op fewer (its plan or table kept)."""
    plans.forget_layouts()
    launches: list[int] = []
    for lengths, groups in [*_LAYOUTS, *_LAYOUTS, _LAYOUTS[0]]:
        values = _values(lengths)
        expected = F.regroup_keyed_tensor(values, _KEYS, lengths, groups)
        with count() as c:
            if op == "regroup_keyed_tensor":
                got = F.regroup_keyed_tensor(to_npu(values), _KEYS, lengths, groups)
            else:
                args = F.kt_regroup_arguments(values[0], _KEYS, lengths, groups)
                got = F.permute_multi_embedding(to_npu(values), *to_npu(list(args[:3])), args[3])
        launches.append(c.launches)
        assert all(torch.equal(a.cpu(), b) for a, b in zip(got, expected, strict=True))
    fbgemm_npu.check()
    first = launches[0]
    # layouts 0 and 1 share widths: permute_multi_embedding's table is kept from the first call
    table_shared = op == "permute_multi_embedding"
    assert launches[:3] == [first, first - table_shared, first]
    assert launches[3:] == [first - 1] * 4


def test_kept_layouts_are_bounded() -> None:
    plans.forget_layouts()
    x = [torch.randn(2, 4, device=NPU)]
    for k in range(plans.CACHE_SIZE + 5):
        F.regroup_keyed_tensor(x, [[f"k{k}", "z"]], [[1, 3]], [["z", f"k{k}"]])
    assert len(plans._CACHE) == plans.CACHE_SIZE
    with count() as c:  # the oldest layout was dropped: its plan is uploaded again
        F.regroup_keyed_tensor(x, [["k0", "z"]], [[1, 3]], [["z", "k0"]])
    assert "aten._to_copy.default" in c.launch_ops
