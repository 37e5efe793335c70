"""Specs of ``mxrec::ln_mul``, ``token_mixing``, ``norm_multiply_dropout`` (forward and autograd)
and ``norm_multiply_dropout_backward``.

No upstream CPU kernel exists (the CPU kernel is ours), so every value is checked against the
float64 references below, written from the formulas (Rec SDK's goldens: the layer norm with a
biased variance, the gate, the dropout ``keep / (1 - p)``; its backward golden ``dx = (g w -
(sum_C(g w) + x_hat sum_C(g w x_hat)) / C) / sqrt(var + eps)``, ``du = dy (w x_hat + b)``); the
autograd specs differentiate the forward references with torch's float64 autograd. The dropout
mask is the op's contract, ``torch.rand(x.shape)`` on the device after
``torch.manual_seed(seed)`` (``seed`` is drawn with the inputs; the reference draws the same
numbers on the same device, the simulated npu sharing the CPU generator), ``>= p``.

Inputs: float32 / float16 / bfloat16, ``u`` / weights in [-1, 1), ``x`` in [-1.5, 1.5) with a
ramp along the row, ``R`` / ``C`` >= 4, so a row's variance stays >= ~0.2 (a near-constant half
row makes ``1 / sqrt(var + eps)`` huge and its rounding visible in any half layer norm), one
invalid example in ten (a dtype, a shape). Tolerances (measured, then about doubled): float32
1e-4 (float32 statistics over <= 24 values, gradients through ``rstd <= ~2.5``), float16 2e-2 and
bfloat16 1e-1 (two or three roundings of values up to ~4 in the output dtype; the gradients sum
``C`` of them); specs per input dtype, so a tolerance is the input's.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

M = torch.ops.mxrec
TOLS = {
    torch.float32: Tol(rtol=1e-4, atol=1e-4),
    torch.float16: Tol(rtol=2e-2, atol=2e-2),
    torch.bfloat16: Tol(rtol=1e-1, atol=1e-1),
}
NPU = "npu:0"  # where ours runs (conformance's device): the reference draws its mask there


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    x = x.double()
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight.double() + bias.double()


def ln_mul_reference(x, u, gamma, beta):
    """float64 ``layer_norm(x; gamma, beta, 1e-5) * u``."""
    return _layer_norm(x, gamma, beta, 1e-5) * u.double()


def token_mixing_reference(x, gamma, beta, epsilon=1e-7):
    """float64 ``layer_norm(x + x^T; gamma, beta, epsilon)``."""
    x = x.double()
    return _layer_norm(x + x.transpose(1, 2), gamma, beta, epsilon)


def _keep(seed: int, shape: torch.Size, p: float) -> torch.Tensor:
    """float64 ``keep / (1 - p)``: the mask the contract draws from ``seed``."""
    if p <= 1e-10:
        return torch.ones(shape, dtype=torch.float64)
    torch.manual_seed(seed)
    keep = (torch.rand(shape, dtype=torch.float32, device=NPU) >= p).cpu().double()
    return keep * 0 if p >= 1 else keep / (1 - p)


def nmd_reference(seed, x, u, weight, bias, eps, dropout_ratio):
    """float64 ``[layer_norm(x) * u * keep / (1 - p)]``."""
    return [_layer_norm(x, weight, bias, eps) * u.double() * _keep(seed, x.shape, dropout_ratio)]


def nmd_backward_reference(grad, x, u, weight, bias, mask, eps, dropout_ratio):
    """float64 ``[dx, du, dweight, dbias]``, Rec SDK's backward golden with the mask first."""
    x, u, w, b = x.double(), u.double(), weight.double(), bias.double()
    dy = grad.double()
    p = dropout_ratio
    if p > 1e-10:
        dy = dy * mask.double() * (0.0 if p >= 1 else 1 / (1 - p))
    mean = x.mean(1, keepdim=True)
    var = ((x - mean) ** 2).mean(1, keepdim=True)
    rstd = 1 / torch.sqrt(var + eps)
    x_hat = (x - mean) * rstd
    g = dy * u
    gw = g * w
    c = x.size(1)
    dx = (gw - (gw.sum(1, keepdim=True) + x_hat * (gw * x_hat).sum(1, keepdim=True)) / c) * rstd
    return [dx, dy * (w * x_hat + b), (g * x_hat).sum(0), g.sum(0)]


def _seed(draw: st.DrawFn) -> torch.Generator:
    return torch.Generator().manual_seed(draw(st.integers(0, 2**16)))


def _u(gen: torch.Generator, *shape: int, dtype: torch.dtype) -> torch.Tensor:
    return (torch.rand(*shape, generator=gen) * 2 - 1).to(dtype)


def _x(gen: torch.Generator, *shape: int, dtype: torch.dtype) -> torch.Tensor:
    """Values in [-1.5, 1.5) with a ramp along the last dim: a row's variance >= ~0.2."""
    ramp = torch.linspace(-1, 1, shape[-1])
    return ((torch.rand(*shape, generator=gen) - 0.5) + ramp).to(dtype)


@st.composite
def ln_mul_inputs(draw: st.DrawFn, dtype: torch.dtype) -> dict[str, object]:
    a, r, gen = draw(st.integers(0, 5)), draw(st.integers(4, 24)), _seed(draw)
    x, u = _x(gen, a, r, dtype=dtype), _u(gen, a, r, dtype=dtype)
    g, b = _u(gen, r, dtype=dtype), _u(gen, r, dtype=dtype)
    bad = draw(st.integers(0, 9))
    if bad == 9:
        u = u.double()
    elif bad == 8:
        g = g[:-1]
    return {"x": x, "u": u, "gamma": g, "beta": b}


@st.composite
def token_mixing_inputs(draw: st.DrawFn, dtype: torch.dtype) -> dict[str, object]:
    bsz, s, gen = draw(st.integers(0, 3)), draw(st.integers(4, 12)), _seed(draw)
    x = _x(gen, bsz, s, s, dtype=dtype)
    g, b = _u(gen, s, dtype=dtype), _u(gen, s, dtype=dtype)
    eps = draw(st.sampled_from((1e-7, 1e-5)))
    bad = draw(st.integers(0, 9))
    if bad == 9:
        x = x[:, :, :-1]
    elif bad == 8:
        eps = 0.0
    return {"x": x, "gamma": g, "beta": b, "epsilon": eps}


@st.composite
def nmd_inputs(draw: st.DrawFn, dtype: torch.dtype) -> dict[str, object]:
    bsz, c, gen = draw(st.integers(0, 5)), draw(st.integers(4, 24)), _seed(draw)
    x, u = _x(gen, bsz, c, dtype=dtype), _u(gen, bsz, c, dtype=dtype)
    w, b = _u(gen, c, dtype=dtype), _u(gen, c, dtype=dtype)
    p = draw(st.sampled_from((0.0, 0.0, 0.3, 0.5, 1.0)))
    eps = draw(st.sampled_from((1e-5, 1e-10, 1e-4)))
    bad = draw(st.integers(0, 9))
    if bad == 9:
        p = 1.5
    elif bad == 8:
        w = w.double()
    return {"seed": draw(st.integers(0, 2**16)), "x": x, "u": u, "weight": w, "bias": b,
            "eps": eps, "dropout_ratio": p}  # fmt: skip


@st.composite
def nmd_backward_inputs(draw: st.DrawFn, dtype: torch.dtype) -> dict[str, object]:
    inputs = draw(nmd_inputs(dtype))
    seed = inputs.pop("seed")
    gen = torch.Generator().manual_seed(seed)
    x = inputs["x"]
    mask = torch.rand(x.shape, generator=gen) >= 0.4
    if draw(st.integers(0, 9)) == 9:
        mask = mask[:, :-1]
    grad = torch.randn(x.shape, generator=gen).to(dtype)
    return {"grad": grad, **inputs, "mask": mask}


def _nmd(seed: int, **kw: object) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    return M.norm_multiply_dropout(**kw)


def _nmd_path(dropout_ratio: float, **_: object) -> str | None:
    return "no_dropout" if dropout_ratio <= 1e-10 else None


def _specs(suffix: str, dtype: torch.dtype) -> list[OpSpec]:
    tol = Compare({torch.float32: TOLS[dtype], dtype: TOLS[dtype]})
    return [
        OpSpec(
            name="ln_mul" + suffix,
            op=lambda **kw: M.ln_mul(**kw),
            inputs=ln_mul_inputs(dtype),
            compare=tol,
            budget=BudgetUse(op="mxrec::ln_mul"),
            reference=ln_mul_reference,
            backward=True,
            grad_inputs=("x", "u", "gamma", "beta"),
        ),
        OpSpec(
            name="token_mixing" + suffix,
            op=lambda **kw: M.token_mixing(**kw),
            inputs=token_mixing_inputs(dtype),
            compare=tol,
            budget=BudgetUse(op="mxrec::token_mixing"),
            reference=token_mixing_reference,
            backward=True,
            grad_inputs=("x", "gamma", "beta"),
        ),
        OpSpec(
            name="norm_multiply_dropout" + suffix,
            op=_nmd,
            inputs=nmd_inputs(dtype),
            compare=tol,
            budget=lambda **kw: BudgetUse(op="mxrec::norm_multiply_dropout", path=_nmd_path(**kw)),
            reference=nmd_reference,
            backward=True,
            grad_inputs=("x", "u", "weight", "bias"),
        ),
        OpSpec(
            name="norm_multiply_dropout_backward" + suffix,
            op=lambda **kw: M.norm_multiply_dropout_backward(**kw),
            inputs=nmd_backward_inputs(dtype),
            compare=tol,
            budget=lambda **kw: BudgetUse(
                op="mxrec::norm_multiply_dropout_backward", path=_nmd_path(**kw)
            ),
            reference=nmd_backward_reference,
        ),
    ]


SPECS = [
    *_specs("", torch.float32),
    *_specs("[float16]", torch.float16),
    *_specs("[bfloat16]", torch.bfloat16),
]
