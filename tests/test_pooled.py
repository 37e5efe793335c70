"""The pooled-embedding family on npu: budgets, bad inputs, gradients, plan memo, torchrec paths.

Expected values come from upstream's CPU kernels, never from ours.  Budgets (OPS.md: permutes and
regrouping 6 launches, cross-device 4 per input, 0 syncs) are measured at two sizes (batch,
features, rows) and the counts must be equal.  Where ours needs more than OPS.md, the count and
the reason are stated beside the test (``README`` of the family: the module docstrings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import torch

from fbgemm_npu.native.fbgemm.pooled import merge, pooled
from fbgemm_npu.native.fbgemm.pooled import regroup as pooled_regroup
from fbgemm_npu.testing.counters import Counter, assert_budget, count

F = torch.ops.fbgemm
NPU = "npu"
SIZES = ((3, 5, 2), (26, 128, 512))  # (features, dim, batch): counts must not depend on them


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    yield


def _pooled_args(n_feat: int, dim: int, batch: int, seed: int = 0) -> list[torch.Tensor]:
    """PermutePooledEmbeddings' arguments for mixed dims (dim, dim // 2, ...), on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    dims = [dim // (1 + k % 2) for k in range(n_feat)]
    perm = torch.randperm(n_feat, generator=gen)
    offsets = torch.tensor([0, *torch.tensor(dims).cumsum(0).tolist()])
    inv_dims = torch.tensor(dims)[perm]
    inv_offsets = torch.tensor([0, *inv_dims.cumsum(0).tolist()])
    x = torch.randn(batch, sum(dims), generator=gen)
    return [x, offsets, perm, inv_offsets, torch.argsort(perm)]


def _measure(fn: Callable[..., Any], *args: Any, launches: int) -> Counter:
    """``fn(*args)`` within ``launches`` launches and no sync; the counter has its result."""
    return assert_budget(partial(fn, *args), launches=launches, syncs=0)


def _npu(ts: list[Any]) -> list[Any]:
    return [t.to(NPU) if isinstance(t, torch.Tensor) else t for t in ts]


# ---- budgets: permute_pooled_embs family ---------------------------------------------------------

PERMUTE_OPS = ("permute_pooled_embs", "permute_pooled_embs_split",
               "permute_pooled_embs_auto_grad", "permute_pooled_embs_auto_grad_split")  # fmt: skip
# The plan (arange, searchsorted, 2 sorts, index_select) + the gather: OPS.md's 6.
PERMUTE_KERNEL = 6
# The data check: permute_list a permutation, cut points non-negative and non-decreasing (three
# comparisons into one bool buffer, all, _assert_async).  With it the first call costs 11, over
# OPS.md's 6: ATen has no op that checks a permutation in fewer launches; a fused kernel would.
PERMUTE_CHECKS = 5


@pytest.mark.parametrize("op", PERMUTE_OPS)
def test_permute_pooled_budget(no_validation: None, op: str) -> None:
    counts = set()
    for size in SIZES:
        args = _npu(_pooled_args(*size))
        c = _measure(getattr(F, op), *args, launches=PERMUTE_KERNEL)
        counts.add(c.launches)
    assert counts == {PERMUTE_KERNEL}


@pytest.mark.parametrize("op", PERMUTE_OPS)
def test_permute_pooled_checks_cost(op: str) -> None:
    counts = set()
    for size in SIZES:
        args = _npu(_pooled_args(*size))
        c = _measure(getattr(F, op), *args, launches=PERMUTE_KERNEL + PERMUTE_CHECKS)
        counts.add(c.launches)
    assert counts == {PERMUTE_KERNEL + PERMUTE_CHECKS}


def test_permute_pooled_plan_is_memoised() -> None:
    """PermutePooledEmbeddings passes the same index tensors each call: 1 launch after the first."""
    x, *lists = _npu(_pooled_args(26, 128, 64))
    F.permute_pooled_embs(x, *lists)
    c = _measure(F.permute_pooled_embs, x, *lists, launches=1)
    assert c.launch_ops == ["aten.index_select.default"]


def test_permute_pooled_memo_sees_in_place_changes() -> None:
    cpu = _pooled_args(4, 3, 2)
    x, off, perm, inv_off, inv_perm = _npu(cpu)
    F.permute_pooled_embs(x, off, perm, inv_off, inv_perm)
    perm.copy_(perm.flip(0))  # a new permutation, in place: the memoised plan is stale
    expected = F.permute_pooled_embs(cpu[0], cpu[1], cpu[2].flip(0), cpu[3], cpu[4])
    assert torch.equal(F.permute_pooled_embs(x, off, perm, inv_off, inv_perm).cpu(), expected)


@pytest.mark.parametrize(
    "op", ["permute_pooled_embs_auto_grad", "permute_pooled_embs_auto_grad_split"]
)
def test_permute_pooled_backward_budget_and_grad(op: str) -> None:
    """Backward = the permute with the inverse lists: 11 launches (6 + 5 checks), as forward."""
    for size in SIZES:
        cpu = _pooled_args(*size)
        x, *lists = _npu(cpu)
        xg = x.clone().requires_grad_()
        y = getattr(F, op)(xg, *lists)
        g = torch.randn(y.shape)
        # + 1 launch: g's copy to npu
        c = _measure(torch.autograd.grad, y, xg, g.to(NPU),
                     launches=PERMUTE_KERNEL + PERMUTE_CHECKS)  # fmt: skip
        xc = cpu[0].clone().requires_grad_()
        (expected,) = torch.autograd.grad(getattr(F, op)(xc, *cpu[1:]), xc, g)
        assert torch.equal(c.result[0].cpu(), expected)


# ---- budgets: regrouping -------------------------------------------------------------------------


def _keyed(n_feat: int, dim: int, batch: int) -> dict[str, Any]:
    """Two KeyedTensors of n_feat/2 features each, regrouped into 3 groups (one repeats keys)."""
    half = n_feat // 2 or 1
    keys = [[f"a{k}" for k in range(half)], [f"b{k}" for k in range(n_feat - half)]]
    lengths = [[dim] * len(ks) for ks in keys]
    flat = keys[0] + keys[1]
    groups = [flat[0::2], flat[1::2], flat[:2]]
    gen = torch.Generator().manual_seed(n_feat)
    values = [torch.randn(batch, dim * len(ks), generator=gen) for ks in keys]
    return {"values": values, "keys": keys, "lengths": lengths, "groups": groups}


def _permute_args(d: dict[str, Any]) -> list[Any]:
    return list(F.kt_regroup_arguments(d["values"][0], d["keys"], d["lengths"], d["groups"]))


def test_kt_regroup_arguments_budget() -> None:
    for size in SIZES:
        d = _keyed(*size)
        v = _npu(d["values"])
        c = _measure(F.kt_regroup_arguments, v[0], d["keys"], d["lengths"], d["groups"],
                     launches=3)  # fmt: skip
        assert [t.device.type for t in c.result[:3]] == [NPU] * 3
        for ours, up in zip(c.result, _permute_args(d), strict=True):
            assert torch.equal(ours.cpu(), up) if isinstance(up, torch.Tensor) else ours == up


def test_regroup_keyed_tensor_budget_forward_and_backward() -> None:
    """4 launches each way: upload the plan, cat, index_select, split (backward: cat, zeros,
    index_add, split; the grads' copies to npu are made before counting)."""
    for size in SIZES:
        d = _keyed(*size)
        v = [t.to(NPU).requires_grad_() for t in d["values"]]
        c = _measure(F.regroup_keyed_tensor, v, d["keys"], d["lengths"], d["groups"], launches=4)
        outs = c.result
        gs = [torch.randn(o.shape) for o in outs]
        cb = _measure(
            torch.autograd.grad, outs, v, [g.to(NPU) for g in gs], launches=4
        )  # fmt: skip  (+ the grads' copies)
        vc = [t.clone().requires_grad_() for t in d["values"]]
        up = F.regroup_keyed_tensor(vc, d["keys"], d["lengths"], d["groups"])
        for a, b in zip(outs, up, strict=True):
            assert torch.equal(a.detach().cpu(), b)
        for a, b in zip(cb.result, torch.autograd.grad(up, vc, gs), strict=True):
            assert torch.equal(a.cpu(), b)


# permute_multi_embedding with permutes it has not seen: the plan is derived on the device (9
# launches) and checked (8: ends, cumsum, 4 comparisons, all, _assert_async), then gathered (3):
# 20, over OPS.md's 6: ATen needs that many ops to turn the rows into a column index (a fused
# kernel would read the rows directly).  Memoised for the permutes tensor, so a module holding it
# (torchrec's KTRegroupAsDict) pays 3 from the second call on; permutes made by our
# kt_regroup_arguments carry their host rows: 4 on first use (1 upload), then 3.
MULTI_DEVICE_PLAN, MULTI_CHECKS, MULTI_GATHER = 9, 8, 3


def test_permute_multi_embedding_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    for size in SIZES:
        d = _keyed(*size)
        v = _npu(d["values"])
        args = _npu(_permute_args(d))
        full = MULTI_DEVICE_PLAN + MULTI_CHECKS + MULTI_GATHER
        _measure(F.permute_multi_embedding, v, *args, launches=full)
        c = _measure(F.permute_multi_embedding, v, *args, launches=3)
        assert c.launches == MULTI_GATHER  # memoised
        ours_args = F.kt_regroup_arguments(v[0], d["keys"], d["lengths"], d["groups"])
        c = _measure(F.permute_multi_embedding, v, *ours_args, launches=4)
        assert c.launches == MULTI_GATHER + 1
        monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
        fresh = _npu(_permute_args(d))
        c = _measure(
            F.permute_multi_embedding, v, *fresh, launches=MULTI_DEVICE_PLAN + MULTI_GATHER
        )
        monkeypatch.delenv("FBGEMM_NPU_VALIDATE")
        for a, b in zip(c.result, F.permute_multi_embedding(d["values"], *_permute_args(d)),
                        strict=True):  # fmt: skip
            assert torch.equal(a.cpu(), b)


def test_permute_multi_embedding_backward_budget() -> None:
    for size in SIZES:
        d = _keyed(*size)
        v = [t.to(NPU).requires_grad_() for t in d["values"]]
        args = _npu(_permute_args(d))
        outs = F.permute_multi_embedding(v, *args)
        gs = [torch.randn(o.shape).to(NPU) for o in outs]
        c = _measure(torch.autograd.grad, outs, v, gs, launches=4)
        vc = [t.clone().requires_grad_() for t in d["values"]]
        up = F.permute_multi_embedding(vc, *_permute_args(d))
        for a, b in zip(c.result, torch.autograd.grad(up, vc, [g.cpu() for g in gs]), strict=True):
            assert torch.equal(a.cpu(), b)


# ---- budgets: cross-device -----------------------------------------------------------------------


def _spread(n: int, batch: int, dim: int) -> list[torch.Tensor]:
    """n pooled outputs alternating between npu:0 and npu:1."""
    gen = torch.Generator().manual_seed(n)
    return [torch.randn(batch, dim, generator=gen).to(f"{NPU}:{k % 2}") for k in range(n)]


CROSS: dict[str, Callable[[list[torch.Tensor]], Any]] = {
    "merge_pooled_embeddings": lambda ts: F.merge_pooled_embeddings(ts, ts[0].size(0),
                                                                    torch.device(NPU, 0)),
    "all_to_one_device": lambda ts: F.all_to_one_device(ts, torch.device(NPU, 0)),
    "sum_reduce_to_one": lambda ts: F.sum_reduce_to_one(ts, torch.device(NPU, 0)),
}  # fmt: skip


@pytest.mark.parametrize("op", list(CROSS))
def test_cross_device_budget(op: str) -> None:
    """At most 2 launches per input (OPS.md: 4): a copy from npu:1, a cat / add."""
    for n, batch, dim in ((2, 4, 8), (4, 512, 256)):
        ts = _spread(n, batch, dim)
        out = _measure(CROSS[op], ts, launches=2 * n).result
        cpu = [t.cpu() for t in ts]
        if op == "merge_pooled_embeddings":
            expected = [torch.cat(cpu, 1)]
        elif op == "sum_reduce_to_one":
            expected = [sum(cpu[1:], cpu[0].clone())]
        else:
            expected = cpu
        for a, b in zip(out if isinstance(out, list) else [out], expected, strict=True):
            assert a.device == torch.device(NPU, 0)
            assert torch.equal(a.cpu(), b)


def test_sum_reduce_leaves_inputs_alone() -> None:
    ts = _spread(3, 2, 3)
    before = [t.cpu() for t in ts]
    F.sum_reduce_to_one(ts, torch.device(NPU, 0))
    assert all(torch.equal(t.cpu(), b) for t, b in zip(ts, before, strict=True))


def test_all_to_one_device_returns_inputs_already_there() -> None:
    ts = _spread(2, 2, 3)
    out = F.all_to_one_device(ts, torch.device(NPU, 0))
    assert out[0] is ts[0] and out[1] is not ts[1]


def test_target_without_index_is_the_current_device() -> None:
    ts = _spread(2, 2, 3)
    assert F.merge_pooled_embeddings(ts, 2, torch.device(NPU)).device == torch.device(NPU, 0)


def test_merge_to_cpu_target() -> None:
    ts = _spread(2, 2, 3)
    out = F.merge_pooled_embeddings(ts, 2, torch.device("cpu"), 0)
    assert out.device.type == "cpu" and torch.equal(out, torch.cat([t.cpu() for t in ts], 0))


# ---- bad inputs ----------------------------------------------------------------------------------


def _permute_case(case: str) -> tuple[list[Any], type[Exception], str]:
    x, off, perm, inv_off, inv_perm = _pooled_args(4, 4, 2)
    data = "permute_list' must be a permutation"
    cases: dict[str, tuple[list[Any], type[Exception], str]] = {
        "decreasing": ([x, torch.tensor([0, 4, 2, 6, 12]), perm, inv_off, inv_perm],
                       RuntimeError, data),
        "negative": ([x, torch.tensor([0, -2, 4, 6, 12]), perm, inv_off, inv_perm],
                     RuntimeError, data),
        "duplicate": ([x, off, torch.tensor([0, 0, 1, 2]), inv_off, inv_perm], RuntimeError, data),
        "out_of_range": ([x, off, torch.tensor([0, 1, 2, 7]), inv_off, inv_perm],
                         RuntimeError, data),
        "too_long": ([x, off, torch.arange(6), inv_off, inv_perm], ValueError,
                     "'offset_dim_list' must have at least"),
        "empty": ([x, off, perm[:0], inv_off, inv_perm], ValueError, "'permute_list' must not"),
        "int32_offsets": ([x, off.int(), perm, inv_off, inv_perm], ValueError,
                          "'offset_dim_list' must have dtype int64"),
        "int32_permute": ([x, off, perm.int(), inv_off, inv_perm], ValueError,
                          "'permute_list' must have dtype int64"),
        "rank1": ([x[0], off, perm, inv_off, inv_perm], ValueError, "'pooled_embs' must be at"),
    }  # fmt: skip
    return cases[case]


PERMUTE_CASES = ("decreasing", "negative", "duplicate", "out_of_range", "too_long", "empty",
                 "int32_offsets", "int32_permute", "rank1")  # fmt: skip


@pytest.mark.parametrize("case", PERMUTE_CASES)
@pytest.mark.parametrize("op", PERMUTE_OPS)
def test_permute_pooled_bad_inputs(op: str, case: str) -> None:
    args, exc, match = _permute_case(case)
    with pytest.raises(exc, match=f"fbgemm::{op}: .*{match}"):
        getattr(F, op)(*_npu(args))


def test_permute_pooled_devices_must_agree() -> None:
    x, *lists = _pooled_args(3, 2, 2)
    with pytest.raises(RuntimeError, match="permute_pooled_embs: arguments 'pooled_embs' .*"
                       "'permute_list' \\(cpu\\) must be on the same device"):  # fmt: skip
        F.permute_pooled_embs(x.to(NPU), lists[0].to(NPU), lists[1], *_npu(lists[2:]))


def test_permute_pooled_upstream_accepted_forms_match() -> None:
    """Upstream's CPU kernel ignores offset_dim_list[0] and [-1], cuts only at the first T - 1
    offsets of a short permute, takes any dtype and rank >= 2, and returns empty input as is."""
    x = torch.arange(30.0).view(2, 15)
    perm = torch.tensor([2, 0, 1])
    forms = [
        [x, torch.tensor([3, 2, 5, 11]), perm],  # first offset not 0, last not the width
        [x, torch.tensor([0, 2, 5, 9, 15]), torch.tensor([1, 0])],  # short permute
        [x, torch.tensor([-3, 4, 20, 25]), perm],  # cut points past the width: empty blocks
        [x.to(torch.int32).view(2, 5, 3), torch.tensor([0, 1, 3, 5]), perm],  # int, 3-D
        [x.bool(), torch.tensor([0, 4, 4, 15]), perm],  # bool, an empty block
    ]
    for pooled_embs, off, p in forms:
        args = [pooled_embs, off, p, off, p]
        assert torch.equal(F.permute_pooled_embs(*_npu(args)).cpu(), F.permute_pooled_embs(*args))
    empty = torch.zeros(0, 4, device=NPU)
    assert (
        F.permute_pooled_embs(empty, *_npu([torch.tensor([0, 1]), torch.tensor([5])] * 2)) is empty
    )


def test_validation_off_skips_only_data_checks(no_validation: None) -> None:
    args, _, _ = _permute_case("int32_offsets")
    with pytest.raises(ValueError, match="offset_dim_list"):
        F.permute_pooled_embs(*_npu(args))
    args, _, _ = _permute_case("duplicate")
    F.permute_pooled_embs(*_npu(args))  # trusted: no check, no error


def _multi_case(case: str) -> tuple[list[Any], type[Exception], str]:
    d = _keyed(4, 3, 2)
    v = d["values"]
    permutes, in_shapes, out_shapes, out_lengths = _permute_args(d)
    bad = permutes.clone()
    rows = "'permutes' must copy inside the inputs and tile every output"
    if case == "in_tensor":
        bad[0, 0] = 5
    elif case == "in_offset":
        bad[1, 2] = 100
    elif case == "negative":
        bad[0, 4] = -1
    elif case == "order":
        bad = bad.flip(0)

    def mk(p: torch.Tensor, lengths: list[int] = out_lengths) -> list[Any]:
        return [v, p, in_shapes, out_shapes, lengths]

    cases: dict[str, tuple[list[Any], type[Exception], str]] = {
        "in_tensor": (mk(bad), RuntimeError, rows),
        "in_offset": (mk(bad), RuntimeError, rows),
        "negative": (mk(bad), RuntimeError, rows),
        "order": (mk(bad), RuntimeError, rows),
        "gap": (mk(permutes, [w + 1 for w in out_lengths]), RuntimeError, rows),
        "int64": (mk(permutes.long()), ValueError, "'permutes' must have dtype int32"),
        "columns": (mk(permutes[:, :5]), ValueError, "'permutes' must be 2-D with 6 columns"),
        "float64": ([[t.double() for t in v], permutes, in_shapes, out_shapes, out_lengths],
                    ValueError, "'pooled_embs\\[0\\]' must have dtype float32, float16"),
        "dtypes": ([[v[0], v[1].half()], permutes, in_shapes, out_shapes, out_lengths],
                   ValueError, "'pooled_embs\\[0\\]' \\(float32\\) and 'pooled_embs\\[1\\]'"),
        "rows": ([[v[0], v[1][:1]], permutes, in_shapes, out_shapes, out_lengths], ValueError,
                 "'pooled_embs\\[1\\]' must be at least 2-D with at least 2 rows"),
        "negative_length": (mk(permutes, [-1, *out_lengths[1:]]), ValueError,
                            "'out_lengths' must be non-negative"),
    }  # fmt: skip
    return cases[case]


MULTI_CASES = ("in_tensor", "in_offset", "negative", "order", "gap", "int64", "columns",
               "float64", "dtypes", "rows", "negative_length")  # fmt: skip


@pytest.mark.parametrize("case", MULTI_CASES)
def test_permute_multi_embedding_bad_inputs(case: str) -> None:
    args, exc, match = _multi_case(case)
    with pytest.raises(exc, match=f"fbgemm::permute_multi_embedding: .*{match}"):
        F.permute_multi_embedding(*_npu_nested(args))


def _npu_nested(args: list[Any]) -> list[Any]:
    return [_npu(a) if isinstance(a, list) else a.to(NPU) if isinstance(a, torch.Tensor) else a
            for a in args]  # fmt: skip


def test_permute_multi_embedding_devices_must_agree() -> None:
    d = _keyed(4, 3, 2)
    args = _npu_nested([d["values"], *_permute_args(d)])
    with pytest.raises(
        RuntimeError,
        match="permute_multi_embedding: arguments 'pooled_embs\\[0\\]' \\(npu:0\\) and "
        "'permutes' \\(cpu\\)",
    ):
        F.permute_multi_embedding(args[0], args[1].cpu(), *args[2:])
    with pytest.raises(RuntimeError, match="'pooled_embs\\[0\\]' \\(npu:0\\) and 'pooled_embs"):
        F.permute_multi_embedding([args[0][0], args[0][1].to(f"{NPU}:1")], *args[1:])


def test_host_plan_errors_name_the_row() -> None:
    """Permutes from our kt_regroup_arguments are checked on the host, with exact messages."""
    d = _keyed(4, 3, 2)
    v = _npu(d["values"])
    args = F.kt_regroup_arguments(v[0], d["keys"], d["lengths"], d["groups"])
    with pytest.raises(ValueError, match="'out_lengths' \\[6, 6, 7\\] asks for 19 columns but "
                       "'permutes' fills 18"):  # fmt: skip
        F.permute_multi_embedding(v, *args[:3], [6, 6, 7])
    narrow = [v[0][:, :5], v[1]]
    with pytest.raises(ValueError, match="row 2 \\[0, 1, 3, 0, 3, 5\\] of permutes, which reads "
                       "outside its input"):  # fmt: skip
        F.permute_multi_embedding(narrow, *args)


@pytest.mark.parametrize(
    ("keys", "lengths", "groups", "match"),
    [
        ([["a"]], [[2]], [["a", "zz"]], "'groups\\[0\\]' names key 'zz', not in keys"),
        ([["a"]], [[2, 3]], [["a"]], "'lengths\\[0\\]' has 2 entries but 'keys\\[0\\]' names only"),
        ([["a"], ["b"]], [[2]], [["a"]], "'lengths' must have one list per list of 'keys'"),
    ],
)
def test_keyed_argument_errors(keys: Any, lengths: Any, groups: Any, match: str) -> None:
    v = [torch.zeros(2, 5, device=NPU) for _ in keys]
    for op in ("kt_regroup_arguments", "regroup_keyed_tensor"):
        with pytest.raises(ValueError, match=f"fbgemm::{op}: argument {match}"):
            if op == "kt_regroup_arguments":
                F.kt_regroup_arguments(v[0], keys, lengths, groups)
            else:
                F.regroup_keyed_tensor(v, keys, lengths, groups)


def test_regroup_lengths_beyond_the_values() -> None:
    """Upstream reads past the input here; ours names 'lengths' and the row."""
    v = [torch.zeros(2, 5, device=NPU)]
    with pytest.raises(ValueError, match="regroup_keyed_tensor: argument 'lengths' gives row 1"):
        F.regroup_keyed_tensor(v, [["a", "b"]], [[3, 3]], [["a", "b"]])


def test_cross_device_bad_inputs() -> None:
    ts = _spread(2, 2, 3)
    with pytest.raises(RuntimeError, match="sum_reduce_to_one: argument 'input_tensors\\[1\\]' is "
                       "on cpu but 'input_tensors\\[0\\]' on npu:0"):  # fmt: skip
        F.sum_reduce_to_one([ts[0], ts[1].cpu()], torch.device(NPU, 0))
    with pytest.raises(ValueError, match="all_to_one_device: argument 'target_device' must be an"):
        F.all_to_one_device(ts, torch.device("cpu"))
    with pytest.raises(ValueError, match="sum_reduce_to_one: argument 'target_device' is npu:5"):
        F.sum_reduce_to_one(ts, torch.device(NPU, 5))
    with pytest.raises(ValueError, match="sum_reduce_to_one: argument 'input_tensors\\[1\\]' "
                       "\\(torch.float32\\) cannot be added"):  # fmt: skip
        F.sum_reduce_to_one([ts[0].long(), ts[1]], torch.device(NPU, 0))
    with pytest.raises(ValueError, match="sum_reduce_to_one: argument 'input_tensors\\[1\\]' of "
                       "shape \\(2, 4\\) does not broadcast"):  # fmt: skip
        F.sum_reduce_to_one([ts[0], torch.zeros(2, 4, device=NPU)], torch.device(NPU, 0))
    with pytest.raises(ValueError, match="merge_pooled_embeddings: argument 'pooled_embeddings' "
                       "cannot be concatenated along cat_dim=0"):  # fmt: skip
        F.merge_pooled_embeddings(
            [ts[0], torch.zeros(2, 4, device=NPU)], 2, torch.device(NPU, 0), 0
        )


# ---- torchrec on npu, CPU calls, Meta ------------------------------------------------------------


def test_torchrec_keyed_tensor_regroup_paths() -> None:
    """KeyedTensor.regroup (permute_pooled_embs_auto_grad), torchrec's permute_multi_embedding
    (kt_regroup_arguments + permute_multi_embedding) and KTRegroupAsDict, gradients included."""
    from torchrec.modules.regroup import KTRegroupAsDict
    from torchrec.sparse.jagged_tensor import KeyedTensor, permute_multi_embedding

    d = _keyed(6, 4, 3)
    keys, lengths = d["keys"], d["lengths"]
    groups = [keys[0] + keys[1][:1], keys[1][1:]]

    def run(device: str) -> tuple[list[torch.Tensor], ...]:
        vals = [v.to(device).requires_grad_() for v in d["values"]]
        kts = [KeyedTensor(keys=k, length_per_key=n, values=x)
               for k, n, x in zip(keys, lengths, vals, strict=True)]  # fmt: skip
        module = KTRegroupAsDict(groups=groups, keys=["x", "y"])
        outs = [KeyedTensor.regroup(kts, groups), permute_multi_embedding(kts, groups),
                list(module(kts).values()), list(module(kts).values())]  # fmt: skip
        flat = [o for group in outs for o in group]
        grads = torch.autograd.grad(sum((o * (k + 1)).sum() for k, o in enumerate(flat)), vals)
        return [o.detach().cpu() for o in flat], [g.cpu() for g in grads]

    ours, expected = run(NPU), run("cpu")
    for a, b in zip([*ours[0], *ours[1]], [*expected[0], *expected[1]], strict=True):
        assert torch.equal(a, b)


def test_fbgemm_permute_pooled_embeddings_module_on_npu() -> None:
    from fbgemm_gpu.permute_pooled_embedding_modules import PermutePooledEmbeddings

    module = PermutePooledEmbeddings([4, 4, 8, 2], [2, 0, 3, 1], device=torch.device(NPU))
    x = torch.randn(3, 18)
    expected = PermutePooledEmbeddings([4, 4, 8, 2], [2, 0, 3, 1])(x)
    assert torch.equal(module(x.to(NPU)).cpu(), expected)
    with count() as c:
        module(x.to(NPU))
    assert c.launches == 2  # the input's copy and the gather: the plan is memoised


def test_kernels_run_on_cpu_tensors() -> None:
    """Our kernels are device-generic: called directly on CPU tensors they agree with upstream."""
    args = _pooled_args(5, 4, 3)
    assert torch.equal(pooled.permute_pooled_embs_npu(*args), F.permute_pooled_embs(*args))
    d = _keyed(4, 3, 2)
    got = pooled_regroup.regroup_keyed_tensor_npu(d["values"], d["keys"], d["lengths"], d["groups"])
    up = F.regroup_keyed_tensor(d["values"], d["keys"], d["lengths"], d["groups"])
    assert all(torch.equal(a, b) for a, b in zip(got, up, strict=True))
    assert merge.KERNELS.keys() >= {"fbgemm::merge_pooled_embeddings"}


def test_meta_of_auto_grad_split() -> None:
    x = torch.empty(4, 10, device="meta")
    lists = [torch.empty(3, dtype=torch.int64, device="meta")] * 4
    assert F.permute_pooled_embs_auto_grad_split(x, *lists).shape == (4, 10)


def test_every_op_is_covered_on_npu() -> None:
    from fbgemm_npu._registry import REGISTRY

    keys = dict(REGISTRY.coverage())
    autograd = {"permute_pooled_embs_auto_grad", "permute_pooled_embs_auto_grad_split",
                "permute_multi_embedding", "regroup_keyed_tensor"}  # fmt: skip
    for op in (*PERMUTE_OPS, "permute_multi_embedding", "regroup_keyed_tensor",
               "kt_regroup_arguments", *CROSS):  # fmt: skip
        want = {"PrivateUse1"} | ({"AutogradPrivateUse1"} if op in autograd else set())
        assert want <= set(keys[f"fbgemm::{op}"]), op


def test_memoised_tensors_still_pickle() -> None:
    """The plan memo lives beside the index tensors, not in them: torch.save still works."""
    import io

    x, *lists = _npu(_pooled_args(3, 2, 2))
    F.permute_pooled_embs(x, *lists)
    torch.save(lists, io.BytesIO())
