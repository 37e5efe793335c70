"""``mxrec::token_mixing``: Rec SDK's layer norm of a square token block plus its transpose,
with autograd (Rec SDK has none).

Schema (Rec SDK, ``token_mixing.cpp``)::

    token_mixing(Tensor x, Tensor gamma, Tensor beta, float epsilon=1e-7) -> Tensor

Math (``x`` ``[B, S, H]`` with ``S == H``, ``gamma``, ``beta`` ``[H]``)::

    s = x + x.transpose(1, 2)                                   [B, S, S]
    y = (s - mean_H(s)) / sqrt(var_H(s) + epsilon) * gamma + beta   (variance biased)

Backward (AutogradPrivateUse1 / AutogradCPU)::

    ds, dgamma, dbeta = layer_norm_backward(dy);   dx = ds + ds.transpose(1, 2)

dtypes: float32 (Rec SDK) and float16 / bfloat16 (torch's layer norm, float32 statistics
inside); ``gamma``, ``beta`` of ``x``'s dtype.  ``S == H`` is what the sum needs (Rec SDK's
README states it, its adapter does not check it: a non-square ``x`` is an error here).  Any
``B >= 0``, ``S = H >= 1``; ``epsilon`` finite and ``> 0``.

Launches: forward ``add`` and ``native_layer_norm`` (2); backward ``native_layer_norm_backward``
and ``add`` (2, path ``backward``).  Target 8: met.  No sync, no data check, no AI-CPU launch.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
)
from fbgemm_npu.native.mxrec.norm._utils import FLOATS, check_eps, check_row_params

__all__ = ["KERNELS", "SCHEMAS", "TOKEN_MIXING", "token_mixing"]

TOKEN_MIXING = "mxrec::token_mixing"
SCHEMAS = {
    TOKEN_MIXING: "token_mixing(Tensor x, Tensor gamma, Tensor beta, float epsilon=1e-7) -> Tensor"
}


def _check(
    x: object, gamma: object, beta: object, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    op = TOKEN_MIXING
    xt = check_dtype(op, "x", check_ndim(op, "x", check_tensor(op, "x", x), (3,)), FLOATS)
    if xt.size(1) != xt.size(2) or xt.size(2) == 0:
        raise ValueError(
            f"{op}: argument 'x' must be [B, S, H] with S == H >= 1 (x + x^T needs a square "
            f"block), got shape {tuple(xt.shape)}"
        )
    g, b = check_row_params(op, ("gamma", "beta"), (gamma, beta), xt)
    check_same_device(op, x=xt, gamma=g, beta=b)
    return xt, g, b, check_eps(op, "epsilon", epsilon)


def _mix(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    with allocation_of(TOKEN_MIXING, f"the {tuple(x.shape)} output of 'x'"):
        s = x + x.transpose(1, 2)
        return (s, *torch.native_layer_norm(s, [s.size(-1)], gamma, beta, eps))


def token_mixing(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, epsilon: float = 1e-7
) -> torch.Tensor:
    """PrivateUse1 / CPU: ``layer_norm(x + x^T)`` ``[B, H, S]`` (2 launches)."""
    return _mix(*_check(x, gamma, beta, epsilon))[1]


def _meta(x: object, gamma: object, beta: object, epsilon: float = 1e-7) -> torch.Tensor:
    xt = _check(x, gamma, beta, epsilon)[0]
    return xt.new_empty(xt.shape)


class _TokenMixing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gamma, beta, epsilon):  # type: ignore[override]
        s, y, mean, rstd = _mix(*_check(x, gamma, beta, epsilon))
        ctx.save_for_backward(s, gamma, beta, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        s, gamma, beta, mean, rstd = ctx.saved_tensors
        need = ctx.needs_input_grad
        ds, dgamma, dbeta = torch.ops.aten.native_layer_norm_backward(
            dy, s, [s.size(-1)], mean, rstd, gamma, beta, [need[0], need[1], need[2]]
        )
        dx = ds + ds.transpose(1, 2) if need[0] else None
        return dx, dgamma, dbeta, None


def _token_mixing_autograd(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, epsilon: float = 1e-7
) -> torch.Tensor:
    """AutogradPrivateUse1 / AutogradCPU: recorded when an input needs a gradient."""
    if not needs_grad(x, gamma, beta):
        return below_autograd(torch.ops.mxrec.token_mixing, x, gamma, beta, epsilon)
    return _TokenMixing.apply(x, gamma, beta, epsilon)


KERNELS = {
    TOKEN_MIXING: {
        "PrivateUse1": token_mixing,
        "CPU": token_mixing,
        "AutogradPrivateUse1": _token_mixing_autograd,
        "AutogradCPU": _token_mixing_autograd,
        "Meta": _meta,
    }
}
