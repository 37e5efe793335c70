"""The linear_silu family's launch, AI-CPU and sync budgets, read from its ``budgets.py``:
every op and path at two sizes (the count must not depend on them), the data checks off and
on (the family has none: the same counts), 0 AI-CPU launches, 0 syncs.  The autograd
backward with ``linear_output``'s own gradient is the path ``linear_output_grad``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

M = torch.ops.mxrec
SIZES = ((1, 16), (40, 64))  # (m, k); n = 4k
Build = Callable[[int, int], Callable[[], object]]


def _xwb(m: int, k: int, dtype: torch.dtype, bias_dtype: torch.dtype):
    x = torch.randn(m, k, device="npu").to(dtype)
    w = torch.randn(4 * k, k, device="npu").to(dtype)
    return x, w, torch.randn(4 * k, device="npu").to(bias_dtype)


def _forward(op: str, dtype: torch.dtype) -> Build:
    def build(m: int, k: int) -> Callable[[], object]:
        x, w, b = _xwb(m, k, dtype, torch.float32)
        return lambda: getattr(M, op)(x, w, b, [k] * 4)

    return build


def _backward(bias: bool) -> Build:
    def build(m: int, k: int) -> Callable[[], object]:
        x, w, b = _xwb(m, k, torch.float16, torch.float32)
        g = [torch.randn(m, k, device="npu").half() for _ in range(4)]
        z = torch.randn(m, 4 * k, device="npu").half()
        return lambda: M.in_linear_silu_backward(x, w, b if bias else None, *g, z, [k] * 4)

    return build


def _autograd_with_z(m: int, k: int) -> Callable[[], object]:
    x, w, b = (t.requires_grad_() for t in _xwb(m, k, torch.float16, torch.float32))
    outs = M.in_linear_silu(x, w, b, [k] * 4)
    gs = [torch.randn_like(o) for o in outs]
    return lambda: torch.autograd.grad(outs, (x, w, b), gs, retain_graph=True)


CASES: list[tuple[str, str | None, str, Build]] = [
    ("mxrec::in_linear_silu", None, "fwd-f16", _forward("in_linear_silu", torch.float16)),
    ("mxrec::in_linear_silu", None, "fwd-bf16", _forward("in_linear_silu", torch.bfloat16)),
    ("mxrec::in_linear_silu", "float32", "fwd-f32", _forward("in_linear_silu", torch.float32)),
    ("mxrec::distance_in_linear_silu", None, "dist-f16",
     _forward("distance_in_linear_silu", torch.float16)),
    ("mxrec::distance_in_linear_silu", "float32", "dist-f32",
     _forward("distance_in_linear_silu", torch.float32)),
    ("mxrec::in_linear_silu_backward", None, "bwd", _backward(True)),
    ("mxrec::in_linear_silu_backward", "no_bias", "bwd-no-bias", _backward(False)),
    ("mxrec::in_linear_silu_backward", "linear_output_grad", "autograd-z", _autograd_with_z),
]  # fmt: skip
IDS = [c[2] for c in CASES]


def _measure(qualname: str, path: str | None, build: Build) -> None:
    for m, k in SIZES:
        fn = build(m, k)
        c = assert_op_budget(fn, qualname, path=path, exact=True)
        assert c.ai_cpu == 0 and c.syncs == 0 and c.stalls == 0, (c.launch_ops, c.sync_ops)


@pytest.mark.parametrize(("qualname", "path", "label", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_off(
    qualname: str, path: str | None, label: str, build: Build, no_validation: None
) -> None:
    _measure(qualname, path, build)


@pytest.mark.parametrize(("qualname", "path", "label", "build"), CASES, ids=IDS)
def test_budget_with_the_checks_on(
    qualname: str, path: str | None, label: str, build: Build
) -> None:
    _measure(qualname, path, build)


def test_autograd_backward_is_the_backward_op() -> None:
    """Rec SDK's usage (a loss of u, v, q, k only): the backward op's 5 launches, no more."""
    x, w, b = (t.requires_grad_() for t in _xwb(8, 16, torch.float16, torch.float32))
    u, v, q, k, _ = M.in_linear_silu(x, w, b, [16] * 4)
    gs = [torch.randn_like(t) for t in (u, v, q, k)]
    fn = lambda: torch.autograd.grad((u, v, q, k), (x, w, b), gs, retain_graph=True)  # noqa: E731
    c = assert_op_budget(fn, "mxrec::in_linear_silu_backward", exact=True)
    assert [r.op for r in c.calls] == ["mxrec.in_linear_silu_backward.default"], c.summary()


def test_every_op_of_the_family_is_measured() -> None:
    assert_every_path_measured("linear_silu", [(q, p) for q, p, _, _ in CASES])
