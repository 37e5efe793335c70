"""The pooled family's budgets (``fbgemm_npu/native/fbgemm/pooled/budgets.py``): every path of
every op, measured exactly at two sizes (batch, features, rows: the counts must not change) with
the data checks on and off, AI-CPU launches held at the entry's ``ai_cpu`` (0) and no stall; the
cross-device ops within their per-input ceilings.  Each call is measured after a warm-up call (the
shared index caches grow on a first call) with the kept layouts dropped, so the count is a first
call's with a layout; ``"same layout again"`` keeps them.  The results are compared with
upstream's CPU kernels on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.native.fbgemm.pooled import _utils as plans
from fbgemm_npu.testing.budgets import assert_op_budget, budget_of, family_ops
from fbgemm_npu.testing.pooled_inputs import (
    keyed,
    kt_permute_args,
    our_stalls,
    pooled_args,
    spread,
    to_npu,
)

F = torch.ops.fbgemm
NPU = "npu"
SIZES = ((3, 5, 2), (26, 128, 512))  # (features, dim, batch): counts must not depend on them
PERMUTE_OPS = (
    "permute_pooled_embs",
    "permute_pooled_embs_split",
    "permute_pooled_embs_auto_grad",
    "permute_pooled_embs_auto_grad_split",
)
BLOCKS = {None: None, "one block": 1, "two blocks": 2}
AGAIN = "same layout again"  # measured with the kept layouts of the warm-up call
MULTI_KINDS = ("", AGAIN, "after kt_regroup_arguments", "reverse", "backward")
REGROUP_KINDS = ("", AGAIN, "backward")
# (inputs, groups) of a path's suffix; the longest suffix first
GROUPS = {"one input + one output": (1, 1), "one input": (1, 3), "one output": (2, 1)}
Size = tuple[int, int, int]


def _permute_call(op: str, path: str | None, size: Size) -> Callable[[], Any]:
    n_feat, dim, batch = size
    if path not in BLOCKS:
        raise ValueError(f"no call for the {op} path {path!r}")
    args = to_npu(pooled_args(BLOCKS[path] or n_feat, dim, batch))
    fn = getattr(F, op)
    return lambda: fn(*args)


def _shape(path: str | None) -> tuple[str, tuple[int, int]]:
    """A path's kind and (inputs, groups): ``"after kt_regroup_arguments + one input"`` ->
    ``("after kt_regroup_arguments", (1, 3))``."""
    for suffix, groups in GROUPS.items():
        if path is not None and path.endswith(suffix):
            return path.removesuffix(suffix).removesuffix(" + ") or "", groups
    return path or "", (2, 3)


def _multi_call(op: str, path: str | None, size: Size) -> Callable[[], Any]:
    """permute_multi_embedding(_function) on ``path``: permutes from upstream (main), after our
    kt_regroup_arguments (torchrec's sequence), reverse, backward."""
    kind, (inputs, groups) = _shape(path)
    if kind not in MULTI_KINDS:
        raise ValueError(f"no call for the {op} path {path!r}")
    d = keyed(*size, inputs=inputs, groups=groups)
    values, args = to_npu(d["values"]), to_npu(kt_permute_args(d))
    fn = getattr(F, op)
    if kind == "after kt_regroup_arguments":
        return lambda: fn(values, *F.kt_regroup_arguments(values[0], *_keyed_args(d)))
    elif kind == "reverse":  # the outputs' gradients back to the inputs' widths
        permutes, in_shapes, out_shapes, out_lengths = args
        grads = [torch.randn(size[2], w).to(NPU) for w in out_lengths]
        widths = [v.size(1) for v in values]
        return lambda: fn(grads, permutes, out_shapes, in_shapes, widths, True)
    elif kind == "backward":
        return _backward(lambda vs: fn(vs, *args), values)
    if op.endswith("_function"):
        return lambda: fn(values, *args, False)
    return lambda: fn(values, *args)


def _keyed_args(d: dict[str, Any]) -> tuple[Any, Any, Any]:
    return d["keys"], d["lengths"], d["groups"]


def _backward(forward: Callable[[list[torch.Tensor]], Any], values: list[torch.Tensor]) -> Any:
    """The gradient's call of ``forward(values)``; the grads are on npu before counting."""
    leaves = [v.clone().requires_grad_() for v in values]
    outs = forward(leaves)
    grads = [torch.randn(o.shape).to(NPU) for o in outs]
    return lambda: torch.autograd.grad(outs, leaves, grads, retain_graph=True)


def _regroup_call(op: str, path: str | None, size: Size) -> Callable[[], Any]:
    kind, (inputs, groups) = _shape(path)
    if kind not in REGROUP_KINDS:
        raise ValueError(f"no call for the {op} path {path!r}")
    d = keyed(*size, inputs=inputs, groups=groups)
    values = to_npu(d["values"])
    if op == "kt_regroup_arguments":
        return lambda: F.kt_regroup_arguments(values[0], *_keyed_args(d))
    if kind == "backward":
        return _backward(lambda vs: F.regroup_keyed_tensor(vs, *_keyed_args(d)), values)
    return lambda: F.regroup_keyed_tensor(values, *_keyed_args(d))


BUILDERS = {
    **{op: _permute_call for op in PERMUTE_OPS},
    "permute_multi_embedding": _multi_call,
    "permute_multi_embedding_function": _multi_call,
    "kt_regroup_arguments": _regroup_call,
    "regroup_keyed_tensor": _regroup_call,
}
CASES = [(op, path) for op in BUILDERS for path in (None, *budget_of(f"fbgemm::{op}").paths)]
CROSS: dict[str, Callable[[list[torch.Tensor]], Any]] = {
    "merge_pooled_embeddings": lambda ts: F.merge_pooled_embeddings(
        ts, ts[0].size(0), torch.device(NPU, 0)
    ),
    "all_to_one_device": lambda ts: F.all_to_one_device(ts, torch.device(NPU, 0)),
    "sum_reduce_to_one": lambda ts: F.sum_reduce_to_one(ts, torch.device(NPU, 0)),
}


@pytest.fixture(autouse=True)
def default_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data checks at their default (``FBGEMM_NPU_VALIDATE=1``: ``assert`` today), whatever
    the environment running the suite says: the ``checks`` counts are the default's (a deferred
    check is one launch cheaper).  ``no_validation`` switches them off after this."""
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "1")


def _id(value: Any) -> str:
    return "main" if value is None else str(value)


def test_every_op_of_the_family_has_a_budget_and_a_test() -> None:
    ops = family_ops("pooled")
    assert ops == {f"fbgemm::{op}" for op in (*BUILDERS, *CROSS)}
    assert ops <= set(REGISTRY.budgets)


def _measured(op: str, path: str | None, size: Size) -> Any:
    """``op``'s call on ``path`` held exactly to its budget: after a warm-up call, its queued
    checks read, the kept layouts dropped (but on ``"same layout again"``)."""
    call = BUILDERS[op](op, path, size)
    call()
    fbgemm_npu.check()
    if path is None or not path.startswith(AGAIN):
        plans.forget_layouts()
    c = assert_op_budget(call, f"fbgemm::{op}", path=path, exact=True)
    assert c.ai_cpu == 0 and not our_stalls(c), c.summary()
    return c


@pytest.mark.parametrize(("op", "path"), CASES, ids=_id)
def test_kernel_budget(no_validation: None, op: str, path: str | None) -> None:
    for size in SIZES:
        _measured(op, path, size)


@pytest.mark.parametrize(("op", "path"), CASES, ids=_id)
def test_checks_cost(op: str, path: str | None) -> None:
    """The data checks run where a plan is derived on the device (permute_list a permutation,
    cut points non-decreasing; permutes inside the inputs, tiling the outputs)."""
    for size in SIZES:
        _measured(op, path, size)


@pytest.mark.parametrize("op", ["permute_pooled_embs", "permute_multi_embedding"])
def test_a_second_call_with_the_same_index_tensors_derives_its_plan_again(op: str) -> None:
    """No plan is kept beside the index tensors (it could go stale, see test_pooled_parity.py):
    PermutePooledEmbeddings and KTRegroupAsDict, which pass the same tensors each call, pay the
    plan every call; only what host values decide (the widths' table) is kept."""
    first = _measured(op, None, (26, 128, 64))
    second = _measured(op, AGAIN if op == "permute_multi_embedding" else None, (26, 128, 64))
    expected = list(first.launch_ops)
    if op == "permute_multi_embedding":
        expected.remove("aten._to_copy.default")  # the widths' table, uploaded on the first call
    assert second.launch_ops == expected


@pytest.mark.parametrize(
    "op", ["permute_pooled_embs_auto_grad", "permute_pooled_embs_auto_grad_split"]
)
def test_permute_pooled_backward_budget_and_grad(op: str) -> None:
    """Backward = the non-autograd permute with the inverse lists (upstream's formula): its
    budget, plan and check included."""
    base = f"fbgemm::{op.replace('_auto_grad', '')}"
    for size in SIZES:
        cpu = pooled_args(*size)
        x, *lists = to_npu(cpu)
        xg = x.clone().requires_grad_()
        y = getattr(F, op)(xg, *lists)
        g = torch.randn(y.shape)
        gd = g.to(NPU)
        c = assert_op_budget(lambda: torch.autograd.grad(y, xg, gd), base, exact=True)  # noqa: B023
        xc = cpu[0].clone().requires_grad_()
        (expected,) = torch.autograd.grad(getattr(F, op)(xc, *cpu[1:]), xc, g)
        assert torch.equal(c.result[0].cpu(), expected)


def test_kt_regroup_arguments_match_upstream() -> None:
    for size in SIZES:
        d = keyed(*size)
        ours = F.kt_regroup_arguments(d["values"][0].to(NPU), *_keyed_args(d))
        assert [t.device.type for t in ours[:3]] == [NPU] * 3
        for a, b in zip(ours, kt_permute_args(d), strict=True):
            assert torch.equal(a.cpu(), b) if isinstance(b, torch.Tensor) else a == b


def _regroup(values: list[torch.Tensor], d: dict[str, Any]) -> list[torch.Tensor]:
    return F.regroup_keyed_tensor(values, *_keyed_args(d))


def _multi(values: list[torch.Tensor], d: dict[str, Any]) -> list[torch.Tensor]:
    args = kt_permute_args(d)
    return F.permute_multi_embedding(values, *to_npu(args, str(values[0].device)))


@pytest.mark.parametrize("forward", [_regroup, _multi], ids=["regroup", "multi"])
def test_regroup_results_match_upstream(forward: Any) -> None:
    """Outputs and gradients (a key used twice sums its gradients) equal upstream's."""
    for size in SIZES:
        d = keyed(*size)
        ours_in = [t.to(NPU).requires_grad_() for t in d["values"]]
        up_in = [t.clone().requires_grad_() for t in d["values"]]
        ours, up = forward(ours_in, d), forward(up_in, d)
        for a, b in zip(ours, up, strict=True):
            assert torch.equal(a.detach().cpu(), b.detach())
        gs = [torch.randn(o.shape) for o in up]
        got = torch.autograd.grad(ours, ours_in, [g.to(NPU) for g in gs])
        for a, b in zip(got, torch.autograd.grad(up, up_in, gs), strict=True):
            assert torch.equal(a.cpu(), b)


@pytest.mark.parametrize("op", list(CROSS))
def test_cross_device_budget(op: str) -> None:
    """Within the per-input ceiling (a copy from npu:1, a cat / add); values as upstream's."""
    for n, batch, dim in ((2, 4, 8), (4, 512, 256)):
        ts = spread(n, batch, dim)
        out = assert_op_budget(lambda: CROSS[op](ts), f"fbgemm::{op}", units=n).result  # noqa: B023
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


@pytest.mark.parametrize(("op", "n"), [("all_to_one_device", 3), ("merge_pooled_embeddings", 1)])
def test_cross_device_ceiling_is_reached(op: str, n: int) -> None:
    """Every input on the other device: all_to_one_device copies each, merge one input and
    cats (sum_reduce_to_one does not reach it: its first input is copied, never added)."""
    ts = spread(n, 4, 8, devices=(1,))
    assert_op_budget(lambda: CROSS[op](ts), f"fbgemm::{op}", units=n, exact=True)
