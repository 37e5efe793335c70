"""``mxrec::ln_mul``: Rec SDK's layer norm times a gate, with autograd (Rec SDK has none).

Schema (Rec SDK, ``ln_mul.cpp``)::

    ln_mul(Tensor x, Tensor u, Tensor gamma, Tensor beta) -> Tensor

Math (``x``, ``u`` ``[A, R]``, ``gamma``, ``beta`` ``[R]``, ``eps = 1e-5`` fixed as in Rec SDK's
tiling; the variance biased)::

    y = ((x - mean_R(x)) / sqrt(var_R(x) + 1e-5) * gamma + beta) * u

Backward (AutogradPrivateUse1 / AutogradCPU; ``ln`` = the layer norm, ``g = dy * u``)::

    du = dy * ln,    dx, dgamma, dbeta = layer_norm_backward(g)

dtypes: float32 (Rec SDK) and float16 / bfloat16 (torch's layer norm, float32 statistics
inside); every argument of ``x``'s dtype.  Shapes: Rec SDK's 2-D ``[A, R]``; any rank >= 1 too,
the norm over the last dim (``A = 0`` rows: an empty result; ``R >= 1``).

Launches: forward ``native_layer_norm`` and ``mul`` (2); backward ``mul`` (``g``),
``native_layer_norm_backward``, ``mul`` (``du``): 3 (path ``backward``).  Target 8: met.  No
sync, no data check, no AI-CPU launch.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_same_device,
    check_tensor,
)
from fbgemm_npu.native.mxrec.norm._utils import FLOATS, check_row_params, check_same_shape

__all__ = ["KERNELS", "LN_MUL", "SCHEMAS", "ln_mul"]

LN_MUL = "mxrec::ln_mul"
SCHEMAS = {LN_MUL: "ln_mul(Tensor x, Tensor u, Tensor gamma, Tensor beta) -> Tensor"}
EPS = 1e-5


def _check(
    x: object, u: object, gamma: object, beta: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    xt = check_dtype(LN_MUL, "x", check_tensor(LN_MUL, "x", x), FLOATS)
    if xt.dim() < 1 or xt.size(-1) == 0:
        raise ValueError(
            f"{LN_MUL}: argument 'x' must be [A, R] with R >= 1, got shape {tuple(xt.shape)}"
        )
    ut = check_same_shape(LN_MUL, "u", u, xt, "x")
    g, b = check_row_params(LN_MUL, ("gamma", "beta"), (gamma, beta), xt)
    check_same_device(LN_MUL, x=xt, u=ut, gamma=g, beta=b)
    return xt, ut, g, b


def _norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with allocation_of(LN_MUL, f"the {tuple(x.shape)} output of 'x'"):
        return torch.native_layer_norm(x, [x.size(-1)], gamma, beta, EPS)


def ln_mul(
    x: torch.Tensor, u: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    """PrivateUse1 / CPU: ``layer_norm(x) * u`` (2 launches)."""
    xt, ut, g, b = _check(x, u, gamma, beta)
    return _norm(xt, g, b)[0].mul_(ut)


def _meta(x: object, u: object, gamma: object, beta: object) -> torch.Tensor:
    xt = _check(x, u, gamma, beta)[0]
    return torch.empty_like(xt, memory_format=torch.contiguous_format)


class _LnMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, u, gamma, beta):  # type: ignore[override]
        xt, ut, g, b = _check(x, u, gamma, beta)
        ln, mean, rstd = _norm(xt, g, b)
        ctx.save_for_backward(xt, ut, g, b, ln, mean, rstd)
        return ln * ut

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        x, u, gamma, beta, ln, mean, rstd = ctx.saved_tensors
        need = ctx.needs_input_grad
        du = dy * ln if need[1] else None
        dx = dgamma = dbeta = None
        if need[0] or need[2] or need[3]:
            mask = [need[0], need[2], need[3]]
            dx, dgamma, dbeta = torch.ops.aten.native_layer_norm_backward(
                dy * u, x, [x.size(-1)], mean, rstd, gamma, beta, mask
            )
        return dx, du, dgamma, dbeta


def _ln_mul_autograd(
    x: torch.Tensor, u: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    """AutogradPrivateUse1 / AutogradCPU: recorded when an input needs a gradient."""
    if not needs_grad(x, u, gamma, beta):
        return below_autograd(torch.ops.mxrec.ln_mul, x, u, gamma, beta)
    return _LnMul.apply(x, u, gamma, beta)


KERNELS = {
    LN_MUL: {
        "PrivateUse1": ln_mul,
        "CPU": ln_mul,
        "AutogradPrivateUse1": _ln_mul_autograd,
        "AutogradCPU": _ln_mul_autograd,
        "Meta": _meta,
    }
}
