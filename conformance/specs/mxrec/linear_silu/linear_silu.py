"""Specs of ``mxrec::in_linear_silu`` (forward and autograd), ``distance_in_linear_silu`` and
``in_linear_silu_backward``.

No upstream CPU kernel exists (the CPU kernel is ours), so every value is checked against the
float64 reference below, written from Rec SDK's formulas (``z = x W^T + b``, ``silu``, the
split; the backward golden ``dz = g * (s + z s (1 - s))``, ``s = sigmoid(z)``); the CPU side
gives the error behaviour, shapes and dtypes.  The autograd spec differentiates the reference
with torch's float64 autograd, every output (``linear_output`` too) given a gradient.  Inputs:
float32 / float16 / bfloat16, a float32 bias or one of x's dtype, any ``m, k`` and split widths
(zero ones too), one invalid example in ten (a bias dtype, a split sum, a weight width).

Tolerances (measured, then doubled): a dot product of ``k <= 12`` terms of values in [-1, 1]
rounds once in the output dtype (float32 ~1e-6 relative; float16 2**-11, bfloat16 2**-8 of
``|z|`` <= 13, plus the rounded bias and ``z`` feeding silu): atol / rtol 2e-5 float32, 1e-2
float16, 6e-2 bfloat16.  The gradients sum ``m <= 6`` or ``n <= 20`` such terms of a rounded
``dz``: the same tolerances hold.  On half inputs the float32 bias gradient sums a ``dz``
made from half ``z`` and half gradients: the input dtype's tolerance there (specs
``<op>[float16]``, ``<op>[bfloat16]``: the harness keys tolerances by output dtype, so each
input dtype has specs of its own).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

M = torch.ops.mxrec
TOL = {torch.float32: Tol(rtol=2e-5, atol=2e-5)}
# half inputs: the float32 bias gradient sums a dz computed from half z and gradients, so it
# gets the input dtype's tolerance
F16_TOL = {torch.float32: Tol(rtol=1e-2, atol=1e-2), torch.float16: Tol(rtol=1e-2, atol=1e-2)}
BF16_TOL = {torch.float32: Tol(rtol=6e-2, atol=6e-2), torch.bfloat16: Tol(rtol=6e-2, atol=6e-2)}


def forward_reference(x, weight, bias, attr_dict):
    """float64 ``[u, v, q, k, z]``: ``z = x W^T + b``, ``silu(z)`` split by ``attr_dict``."""
    z = x.double() @ weight.double().t() + bias.double()
    y = z * torch.sigmoid(z)
    return [*torch.split(y, list(attr_dict), dim=1), z]


def backward_reference(
    x, weight, bias, user_grad, value_grad, query_grad, key_grad, linear_output, attr_dict
):
    """float64 ``[x_grad, weight_grad, bias_grad | None, None]`` (Rec SDK's golden)."""
    z = linear_output.double()
    s = torch.sigmoid(z)
    g = torch.cat([t.double() for t in (user_grad, value_grad, query_grad, key_grad)], dim=1)
    dz = g * (s + z * s * (1 - s))
    bias_grad = None if bias is None else dz.sum(0)
    return [dz @ weight.double(), dz.t() @ x.double(), bias_grad, None]


@st.composite
def forward_inputs(draw: st.DrawFn, dtypes: tuple[torch.dtype, ...]) -> dict[str, object]:
    m, k = draw(st.integers(0, 6)), draw(st.integers(0, 12))
    widths = draw(st.lists(st.integers(0, 5), min_size=4, max_size=4))
    n = sum(widths)
    dtype = draw(st.sampled_from(dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = (torch.rand(m, k, generator=gen) * 2 - 1).to(dtype)
    w = (torch.rand(n, k, generator=gen) * 2 - 1).to(dtype)
    b = (torch.rand(n, generator=gen) * 2 - 1).to(draw(st.sampled_from((torch.float32, dtype))))
    bad = draw(st.integers(0, 9))
    if bad == 9:
        b = b.double()
    elif bad == 8:
        widths = [*widths[:3], widths[3] + 1]
    elif bad == 7:
        w = torch.zeros(n, k + 1, dtype=dtype)
    return {"x": x, "weight": w, "bias": b, "attr_dict": widths}


@st.composite
def backward_inputs(draw: st.DrawFn, dtypes: tuple[torch.dtype, ...]) -> dict[str, object]:
    inputs = draw(forward_inputs(dtypes))
    x, w, b, widths = (inputs[n] for n in ("x", "weight", "bias", "attr_dict"))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    m, n = x.size(0), w.size(0)
    grads = [torch.randn(m, h, generator=gen).to(x.dtype) for h in widths[:4]]
    if w.size(1) == x.size(1) and sum(widths) == n:  # a valid draw: z of the forward's shape
        z = (torch.randn(m, n, generator=gen) * 2).to(x.dtype)
    else:
        z = torch.randn(m, max(n, 0), generator=gen).to(x.dtype)
    names = ("user_grad", "value_grad", "query_grad", "key_grad")
    bias = None if draw(st.booleans()) else b
    return {"x": x, "weight": w, "bias": bias, **dict(zip(names, grads, strict=True)),
            "linear_output": z, "attr_dict": widths}  # fmt: skip


def _forward_path(x, weight, bias, attr_dict) -> str | None:
    return "float32" if bias.dtype == x.dtype else None


def _backward_path(x, weight, bias, **_: object) -> str | None:
    return "no_bias" if bias is None else None


def _specs(suffix: str, dtypes: tuple[torch.dtype, ...], tol: dict) -> list[OpSpec]:
    """The three ops' specs on inputs of ``dtypes`` (spec names ``<op><suffix>``)."""
    return [
        OpSpec(
            name="in_linear_silu" + suffix,
            op=lambda **kw: M.in_linear_silu(**kw),
            inputs=forward_inputs(dtypes),
            compare=Compare(tol),
            budget=lambda **kw: BudgetUse(op="mxrec::in_linear_silu", path=_forward_path(**kw)),
            reference=forward_reference,
            backward=True,
            grad_inputs=("x", "weight", "bias"),
        ),
        OpSpec(
            name="distance_in_linear_silu" + suffix,
            op=lambda **kw: M.distance_in_linear_silu(**kw),
            inputs=forward_inputs(dtypes),
            compare=Compare(tol),
            budget=lambda **kw: BudgetUse(
                op="mxrec::distance_in_linear_silu", path=_forward_path(**kw)
            ),
            reference=forward_reference,
        ),
        OpSpec(
            name="in_linear_silu_backward" + suffix,
            op=lambda **kw: M.in_linear_silu_backward(**kw),
            inputs=backward_inputs(dtypes),
            compare=Compare(tol),
            budget=lambda **kw: BudgetUse(
                op="mxrec::in_linear_silu_backward", path=_backward_path(**kw)
            ),
            reference=backward_reference,
        ),
    ]


SPECS = [
    *_specs("", (torch.float32,), TOL),
    *_specs("[float16]", (torch.float16,), F16_TOL),
    *_specs("[bfloat16]", (torch.bfloat16,), BF16_TOL),
]
