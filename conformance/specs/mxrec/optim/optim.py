"""Specs of ``mxrec::fused_sgd`` and ``mxrec::fused_lazy_adam``.

No upstream kernel exists (Rec SDK has them for TensorFlow only): the float64 references of
``reference.py`` are the oracle.  Inputs: tables of 1-40 rows, 0-30 indices with duplicates,
negative and past-the-table indices, int32 / int64, ``[n]`` and ``[n, 1]``, float32 / float16,
lr 0-d or ``[1]``; one invalid example in ten (gradient width, lr shape).

Tolerances: float32 near-exact (the updates are a few roundings; m / v written as differences
add one); float16 a few roundings of the buffer.  Adam's ``m / sqrt(v)`` is ill-conditioned
where ``v`` is tiny: the scale is ``lr`` per element on var (the step is at most about
``lr / (1 - b1) * sqrt(1 - b2)`` ... bounded by ``lr * |m| / eps``), so var is compared with
``atol`` relative to ``lr``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.mxrec.optim.reference import fused_lazy_adam_reference, fused_sgd_reference

M = torch.ops.mxrec
TOL = {torch.float32: Tol(rtol=1e-5, atol=1e-5), torch.float16: Tol(rtol=4e-3, atol=4e-3)}


@st.composite
def _common(draw: st.DrawFn) -> dict[str, object]:
    rows, d = draw(st.integers(1, 40)), draw(st.sampled_from((1, 4, 8, 16)))
    n = draw(st.integers(0, 30))
    dtype = draw(st.sampled_from((torch.float32, torch.float16)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    idx = torch.randint(-2, rows + 2, (n,), generator=gen)
    if draw(st.booleans()):  # duplicates: a few rows only
        idx = torch.randint(0, min(rows, 3), (n,), generator=gen)
    idx = idx.to(draw(st.sampled_from((torch.int32, torch.int64))))
    if draw(st.booleans()):
        idx = idx.view(-1, 1)
    lr = torch.tensor(draw(st.sampled_from((0.1, 0.01, 1.0))))
    if draw(st.booleans()):
        lr = lr.view(1)
    grad = torch.randn(n, d, generator=gen).to(dtype)
    if draw(st.integers(0, 9)) == 9:
        grad = torch.randn(n, d + 1, generator=gen).to(dtype)
    if draw(st.integers(0, 19)) == 19:
        lr = torch.tensor([0.1, 0.2])
    var = torch.randn(rows, d, generator=gen).to(dtype)
    return {"var": var, "gradient": grad, "indices": idx, "lr": lr, "gen": gen}


@st.composite
def sgd_inputs(draw: st.DrawFn) -> dict[str, object]:
    kw = draw(_common())
    kw.pop("gen")
    kw["weight_decay"] = draw(st.sampled_from((0.0, 0.0, 0.01, 0.5)))
    return kw


@st.composite
def adam_inputs(draw: st.DrawFn) -> dict[str, object]:
    kw = draw(_common())
    gen = kw.pop("gen")
    var = kw["var"]
    kw["m"] = (torch.randn(var.shape, generator=gen) * 0.1).to(var.dtype)
    kw["v"] = torch.rand(var.shape, generator=gen).to(var.dtype)
    kw["beta1"], kw["beta2"] = draw(st.sampled_from(((0.9, 0.999), (0.5, 0.9))))
    return kw


def _sgd_path(weight_decay: float = 0.0, **_: object) -> str | None:
    return "weight_decay" if weight_decay != 0.0 else None


SPECS = [
    OpSpec(
        name="fused_sgd",
        op=lambda **kw: M.fused_sgd(**kw),
        inputs=sgd_inputs(),
        compare=Compare(TOL),
        budget=lambda **kw: BudgetUse(op="mxrec::fused_sgd", path=_sgd_path(**kw)),
        reference=fused_sgd_reference,
        notes="var updated in place and returned; duplicates add up, bad indices skipped",
    ),
    OpSpec(
        name="fused_lazy_adam",
        op=lambda **kw: M.fused_lazy_adam(**kw),
        inputs=adam_inputs(),
        compare=Compare(TOL),
        budget=BudgetUse(op="mxrec::fused_lazy_adam"),
        reference=fused_lazy_adam_reference,
        notes="(var, m, v) updated in place; duplicates summed first (TensorFlow's rule)",
    ),
]
