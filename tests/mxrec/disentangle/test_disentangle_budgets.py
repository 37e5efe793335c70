"""The disentangle family's launch, AI-CPU and sync budgets, read from its ``budgets.py``: every
op and path at two sizes (b > 1: the count must not depend on b, n, s, d), the data checks off
and on (the family has none: the same counts), 0 AI-CPU launches, 0 syncs; and the autograd
backward is the backward op's main path."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget
from fbgemm_npu.testing.disentangle_inputs import disentangle_inputs

M = torch.ops.mxrec
FWD, BWD = "mxrec::disentangle_attention", "mxrec::disentangle_attention_backward"
SIZES = ((2, 2, 7, 8), (3, 4, 16, 4))  # (b, n, s, d)
Build = Callable[[int, int, int, int], Callable[[], object]]


def _inputs(b: int, n: int, s: int, d: int, rel_dtype: torch.dtype = torch.int64) -> list:
    a = disentangle_inputs(b, n, s, d, torch.float16, seed=s, rel_dtype=rel_dtype)
    return [t.to("npu") for t in a]


def _forward(kind: str, rel_dtype: torch.dtype = torch.int64) -> Build:
    def build(b: int, n: int, s: int, d: int) -> Callable[[], object]:
        a = _inputs(b, n, s, d, rel_dtype)
        return lambda: M.disentangle_attention(*a, kind, 0.3)

    return build


def _backward(kind: str, given: tuple[int, int, int], mask: bool,
              rel_dtype: torch.dtype = torch.int64) -> Build:  # fmt: skip
    def build(b: int, n: int, s: int, d: int) -> Callable[[], object]:
        a = _inputs(b, n, s, d, rel_dtype)
        outs = M.disentangle_attention(*a, kind, 0.3)
        gs = [torch.randn_like(o) if k else None for o, k in zip(outs, given, strict=True)]
        m = a[6] if mask else None
        return lambda: M.disentangle_attention_backward(*gs, *a[:6], m, outs[1], kind, 0.3)

    return build


I32 = torch.int32
CASES: list[tuple[str, str | None, str, Build]] = [
    (FWD, None, "fwd", _forward("c2p|p2c")),
    (FWD, "one_term", "fwd-c2p", _forward("c2p")),
    (FWD, "one_term", "fwd-p2c", _forward("p2c")),
    (FWD, "int32", "fwd-int32", _forward("c2p|p2c", I32)),
    (FWD, "one_term_int32", "fwd-p2c-int32", _forward("p2c", I32)),
    (BWD, None, "bwd", _backward("c2p|p2c", (1, 0, 0), False)),
    (BWD, "one_term", "bwd-c2p", _backward("c2p", (1, 0, 0), False)),
    (BWD, "one_term", "bwd-p2c", _backward("p2c", (1, 0, 0), False)),
    (BWD, "probs_grad", "bwd-probs", _backward("c2p|p2c", (1, 1, 0), False)),
    (BWD, "weights_grad", "bwd-weights", _backward("c2p|p2c", (1, 0, 1), False)),
    (BWD, "mask_grad", "bwd-mask", _backward("c2p|p2c", (1, 0, 0), True)),
    (BWD, "int32", "bwd-int32", _backward("c2p|p2c", (1, 0, 0), False, I32)),
    (BWD, "all_grads", "bwd-all", _backward("c2p|p2c", (1, 1, 1), True, I32)),
]  # fmt: skip
IDS = [c[2] for c in CASES]


def _measure(qualname: str, path: str | None, build: Build) -> None:
    for size in SIZES:
        c = assert_op_budget(build(*size), qualname, path=path, exact=True)
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
    """A loss of attn_output only: one call of the backward op on its main path, no more."""
    a = _inputs(2, 2, 7, 8)
    leaves = [t.requires_grad_() if t.is_floating_point() and i < 5 else t
              for i, t in enumerate(a)]  # fmt: skip
    out = M.disentangle_attention(*leaves, "c2p|p2c", 0.3)[0]
    g = torch.randn_like(out)
    fn = lambda: torch.autograd.grad(out, leaves[:5], g, retain_graph=True)  # noqa: E731
    c = assert_op_budget(fn, BWD, exact=True)
    assert [r.op for r in c.calls] == ["mxrec.disentangle_attention_backward.default"], c.summary()


def test_batch_of_one_costs_no_more() -> None:
    """b == 1: the head-broadcast positional tables are views (the note in budgets.py)."""
    assert_op_budget(_forward("c2p|p2c")(1, 2, 7, 8), FWD, exact=True)
    c = assert_op_budget(_backward("c2p|p2c", (1, 0, 0), False)(1, 2, 7, 8), BWD)
    assert c.launches == 18, c.summary()


def test_every_op_of_the_family_is_measured() -> None:
    assert_every_path_measured("disentangle", [(q, p) for q, p, _, _ in CASES])
