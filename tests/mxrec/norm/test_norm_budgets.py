"""The norm family's launch, AI-CPU and sync budgets, read from its ``budgets.py``: every op
and path at two sizes (the count must not depend on them), in float32 and float16, the data
checks off and on (the family has none: the same counts), 0 AI-CPU launches, 0 syncs.  Path
``backward``: the autograd backward of ln_mul / token_mixing (no backward op of their own),
counted over ``torch.autograd.grad``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_every_path_measured, assert_op_budget

M = torch.ops.mxrec
SIZES = ((1, 4), (16, 64))  # (rows, C)
Build = Callable[[int, int, torch.dtype], Callable[[], object]]


def _r(*shape: int, dtype: torch.dtype, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, device="npu").to(dtype).requires_grad_(grad)


def _ln_mul(backward: bool) -> Build:
    def build(a: int, r: int, dtype: torch.dtype) -> Callable[[], object]:
        args = [_r(a, r, dtype=dtype, grad=backward), _r(a, r, dtype=dtype, grad=backward),
                _r(r, dtype=dtype, grad=backward), _r(r, dtype=dtype, grad=backward)]  # fmt: skip
        if not backward:
            return lambda: M.ln_mul(*args)
        y = M.ln_mul(*args)
        dy = torch.randn_like(y)
        return lambda: torch.autograd.grad(y, args, dy, retain_graph=True)

    return build


def _token_mixing(backward: bool) -> Build:
    def build(bsz: int, s: int, dtype: torch.dtype) -> Callable[[], object]:
        args = [_r(bsz, s, s, dtype=dtype, grad=backward), _r(s, dtype=dtype, grad=backward),
                _r(s, dtype=dtype, grad=backward)]  # fmt: skip
        if not backward:
            return lambda: M.token_mixing(*args)
        y = M.token_mixing(*args)
        dy = torch.randn_like(y)
        return lambda: torch.autograd.grad(y, args, dy, retain_graph=True)

    return build


def _nmd(p: float) -> Build:
    def build(bsz: int, c: int, dtype: torch.dtype) -> Callable[[], object]:
        args = [_r(bsz, c, dtype=dtype), _r(bsz, c, dtype=dtype), _r(c, dtype=dtype),
                _r(c, dtype=dtype)]  # fmt: skip
        return lambda: M.norm_multiply_dropout(*args, 1e-5, p)

    return build


def _nmd_backward(p: float) -> Build:
    def build(bsz: int, c: int, dtype: torch.dtype) -> Callable[[], object]:
        g, x, u = (_r(bsz, c, dtype=dtype) for _ in range(3))
        w, b = _r(c, dtype=dtype), _r(c, dtype=dtype)
        keep = torch.rand(bsz, c, device="npu") >= 0.5
        return lambda: M.norm_multiply_dropout_backward(g, x, u, w, b, keep, 1e-5, p)

    return build


def _nmd_autograd(bsz: int, c: int, dtype: torch.dtype) -> Callable[[], object]:
    """The autograd backward: the backward op's launches, nothing else."""
    args = [_r(bsz, c, dtype=dtype, grad=True), _r(bsz, c, dtype=dtype, grad=True),
            _r(c, dtype=dtype, grad=True), _r(c, dtype=dtype, grad=True)]  # fmt: skip
    (y,) = M.norm_multiply_dropout(*args, 1e-5, 0.3)
    dy = torch.randn_like(y)
    return lambda: torch.autograd.grad(y, args, dy, retain_graph=True)


NMD, NMDB = "mxrec::norm_multiply_dropout", "mxrec::norm_multiply_dropout_backward"
CASES: list[tuple[str, str | None, str, Build]] = [
    ("mxrec::ln_mul", None, "ln_mul", _ln_mul(False)),
    ("mxrec::ln_mul", "backward", "ln_mul-bwd", _ln_mul(True)),
    ("mxrec::token_mixing", None, "token_mixing", _token_mixing(False)),
    ("mxrec::token_mixing", "backward", "token_mixing-bwd", _token_mixing(True)),
    (NMD, None, "nmd", _nmd(0.3)),
    (NMD, None, "nmd-p1", _nmd(1.0)),
    (NMD, "no_dropout", "nmd-p0", _nmd(0.0)),
    (NMDB, None, "nmd-bwd", _nmd_backward(0.3)),
    (NMDB, "no_dropout", "nmd-bwd-p0", _nmd_backward(0.0)),
    (NMDB, None, "nmd-autograd", _nmd_autograd),
]
IDS = [c[2] for c in CASES]


def _measure(qualname: str, path: str | None, build: Build) -> None:
    for dtype in (torch.float32, torch.float16):
        for rows, c in SIZES:
            fn = build(rows, c, dtype)
            c_ = assert_op_budget(fn, qualname, path=path, exact=True)
            assert c_.ai_cpu == 0 and c_.syncs == 0 and c_.stalls == 0, c_.summary()


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


def test_every_op_of_the_family_is_measured() -> None:
    assert_every_path_measured("norm", [(q, p) for q, p, _, _ in CASES])
