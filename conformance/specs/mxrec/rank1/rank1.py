"""Specs of ``mxrec::gather_for_rank1`` (forward and backward through autograd) and
``mxrec::index_select_for_rank1_backward``.

No upstream CPU kernel exists (the CPU kernel is ours): values are checked against float64
references written from the formulas (``y[i] = x[index[i]]``, ``grad_x[e] = sum over index[i]
== e of grad[i]``); the CPU side gives the error behaviour, shapes and dtypes.  Inputs:
float16 / float32 / bfloat16 ``x``, int32 / int64 indices (repeats, empty batches), one invalid
example in ten (an index dtype, a rank).

Tolerances: the gather copies values (exact); the scatter-add sums in float32, so float32 is
held to ``1e-5`` relative to ``sum |grad|`` per slot, half dtypes to one rounding of the result.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

M = torch.ops.mxrec
TOL = {
    torch.float32: Tol(rtol=1e-5, atol=1e-6),
    torch.float16: Tol(rtol=1e-3, atol=1e-3),
    torch.bfloat16: Tol(rtol=8e-3, atol=8e-3),
}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def gather_reference(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """float64 ``y[i] = x[index[i]]`` (differentiable: the backward spec's oracle)."""
    return (
        torch.stack([x.double()[int(k)] for k in index.tolist()])
        if index.numel()
        else (x.double()[:0])
    )


def backward_reference(grad: torch.Tensor, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """float64 ``grad_x[e] = sum over i with index[i] == e of grad[i]`` (the list's first
    element; the second, the index's gradient, is None)."""
    out = [0.0] * x.numel()
    for g, k in zip(grad.double().reshape(-1).tolist(), index.reshape(-1).tolist(), strict=True):
        out[k] += g
    return torch.tensor(out, dtype=torch.float64)


@st.composite
def gather_inputs(draw: st.DrawFn, requires_grad: bool = False) -> dict[str, object]:
    e, n = draw(st.integers(1, 40)), draw(st.integers(0, 30))
    dtype = draw(st.sampled_from(DTYPES))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = torch.randn(e, generator=gen).to(dtype).requires_grad_(requires_grad)
    index = torch.randint(0, e, (n,), generator=gen).to(
        draw(st.sampled_from((torch.int32, torch.int64)))
    )
    if not requires_grad and draw(st.integers(0, 9)) == 9:
        index = index.float() if draw(st.booleans()) else index.view(1, -1)
    return {"x": x, "index": index}


@st.composite
def backward_inputs(draw: st.DrawFn) -> dict[str, object]:
    e = draw(st.integers(1, 40))
    shape = draw(st.sampled_from(((0,), (1,), (17,), (3, 5))))
    dtype = draw(st.sampled_from(DTYPES))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    grad = torch.randn(shape, generator=gen).to(dtype)
    index = torch.randint(0, e, shape, generator=gen)
    if draw(st.integers(0, 9)) == 9:
        index = index.reshape(-1)[:-1] if index.numel() else index.float()
    return {"grad": grad, "x": torch.randn(e, generator=gen).to(dtype), "index": index}


def _backward_scale(grad: torch.Tensor, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return backward_reference(grad.abs(), x, index)


def _backward_path(grad: torch.Tensor, **_: object) -> BudgetUse:
    path = None if grad.dtype == torch.float32 else "half"
    return BudgetUse(op="mxrec::index_select_for_rank1_backward", path=path)


SPECS = [
    OpSpec(
        name="gather_for_rank1",
        op=lambda **kw: M.gather_for_rank1(**kw),
        inputs=gather_inputs(),
        compare=Compare(TOL),
        budget=BudgetUse(op="mxrec::gather_for_rank1"),
        reference=gather_reference,
    ),
    OpSpec(
        name="gather_for_rank1[grad]",
        op=lambda **kw: M.gather_for_rank1(**kw),
        inputs=gather_inputs(requires_grad=True),
        compare=Compare(TOL),
        budget=BudgetUse(op="mxrec::gather_for_rank1"),
        reference=gather_reference,
        backward=True,
        grad_inputs=("x",),
    ),
    OpSpec(
        name="index_select_for_rank1_backward",
        op=lambda **kw: M.index_select_for_rank1_backward(**kw)[0],
        inputs=backward_inputs(),
        compare=Compare(TOL, scale=_backward_scale),
        budget=_backward_path,
        reference=backward_reference,
    ),
]
