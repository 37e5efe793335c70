"""``mxrec::in_linear_silu_backward`` and the autograd of ``mxrec::in_linear_silu``.

Schema (Rec SDK, ``in_linear_silu.cpp``; the result as ``Tensor?[]``, see below)::

    in_linear_silu_backward(Tensor x, Tensor weight, Tensor ? bias, Tensor user_grad,
        Tensor value_grad, Tensor query_grad, Tensor key_grad, Tensor linear_output,
        int[] attr_dict) -> Tensor?[]

Math (Rec SDK's golden; ``z`` = ``linear_output``, ``s = sigmoid(z)``)::

    dz          = cat(user_grad, value_grad, query_grad, key_grad, dim=1) * (s + z * s * (1 - s))
    x_grad      = dz @ weight                   [m, k], x's dtype
    weight_grad = dz^T @ x                      [n, k], weight's dtype
    bias_grad   = sum over rows of dz           [n],    bias's dtype (float32 in Rec SDK)

returned as ``[x_grad, weight_grad, bias_grad, None]`` (``bias_grad`` ``None`` without a bias).
Rec SDK's C++ puts undefined tensors there, which a Python ``Tensor[]`` cannot carry (torch
refuses ``None`` in one), so our schema says ``Tensor?[]``, the one change to Rec SDK's text (as
``index_select_for_rank1_backward``'s).  dtypes and sizes as the forward (:mod:`.forward`); the
gradients in ``x``'s dtype, ``[m, H_i]`` each, ``linear_output`` ``[m, n]``.

Launches: ``cat`` of the four gradients, ``silu_backward`` (torch_npu's fused kernel, one
launch; float32 arithmetic inside for half inputs), two ``mm`` (float32 accumulation), the
float32 ``sum`` of ``bias_grad`` (fused with its cast): 5, 4 without a bias.  No sync.

Autograd (AutogradPrivateUse1 / AutogradCPU of ``in_linear_silu``): saves ``x``, ``weight``,
``bias`` and ``z``; the backward is this op.  Where ``linear_output`` itself is used downstream,
its gradient is added to ``dz`` (one ``add_``, the private path below): Rec SDK's autograd
drops that gradient silently; ours is the derivative of what the op returns.  An unused split
gets zeros (one ``zeros`` each).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_ndim,
    check_same_device,
    check_same_dtype,
    check_tensor,
)
from fbgemm_npu.native.mxrec.linear_silu.forward import check_linear

__all__ = ["AUTOGRAD", "IN_LINEAR_SILU_BACKWARD", "KERNELS", "SCHEMAS", "in_linear_silu_backward"]

IN_LINEAR_SILU_BACKWARD = "mxrec::in_linear_silu_backward"
SCHEMAS = {
    IN_LINEAR_SILU_BACKWARD: "in_linear_silu_backward(Tensor x, Tensor weight, Tensor ? bias, "
    "Tensor user_grad, Tensor value_grad, Tensor query_grad, Tensor key_grad, "
    "Tensor linear_output, int[] attr_dict) -> Tensor?[]",
}
GRAD_NAMES = ("user_grad", "value_grad", "query_grad", "key_grad")


def _check(
    x: object,
    weight: object,
    bias: object | None,
    grads: Sequence[object],
    linear_output: object,
    attr_dict: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, list[torch.Tensor], torch.Tensor]:
    """Host checks (no launch): the forward's, then four ``[m, H_i]`` gradients and ``[m, n]``
    ``linear_output`` in ``x``'s dtype on its device."""
    op = IN_LINEAR_SILU_BACKWARD
    xt, w, b, widths = check_linear(op, x, weight, bias, attr_dict)
    m, n = xt.size(0), w.size(0)
    gs = []
    for name, g, h in zip(GRAD_NAMES, grads, widths, strict=True):
        g = check_ndim(op, name, check_tensor(op, name, g), (2,))
        if tuple(g.shape) != (m, h):
            raise ValueError(
                f"{op}: argument '{name}' must be [m, H] = {[m, h]} (x's rows, attr_dict's "
                f"width), got shape {tuple(g.shape)}"
            )
        gs.append(g)
    z = check_ndim(op, "linear_output", check_tensor(op, "linear_output", linear_output), (2,))
    if tuple(z.shape) != (m, n):
        raise ValueError(
            f"{op}: argument 'linear_output' must be [m, n] = {[m, n]}, got shape {tuple(z.shape)}"
        )
    named = dict(zip(GRAD_NAMES, gs, strict=True))
    check_same_dtype(op, x=xt, **named, linear_output=z)
    check_same_device(op, x=xt, **named, linear_output=z)
    return xt, w, b, gs, z


def _grads(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    grads: Sequence[torch.Tensor],
    z: torch.Tensor,
    z_grad: torch.Tensor | None = None,
) -> list[torch.Tensor | None]:
    """The math of the module docstring; ``z_grad`` (autograd only) is added to ``dz``."""
    what = f"the [m, n] = {list(z.shape)} gradient of 'linear_output'"
    with allocation_of(IN_LINEAR_SILU_BACKWARD, what):
        dz = torch.ops.aten.silu_backward(torch.cat(list(grads), dim=1), z)
        if z_grad is not None:
            dz.add_(z_grad)
        x_grad = torch.mm(dz, weight)
        weight_grad = torch.mm(dz.t(), x)
        bias_grad = None if bias is None else dz.sum(0, dtype=bias.dtype)
    return [x_grad, weight_grad, bias_grad, None]


def in_linear_silu_backward(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    user_grad: torch.Tensor,
    value_grad: torch.Tensor,
    query_grad: torch.Tensor,
    key_grad: torch.Tensor,
    linear_output: torch.Tensor,
    attr_dict: Sequence[int],
) -> list[torch.Tensor | None]:
    """PrivateUse1 / CPU: ``[x_grad, weight_grad, bias_grad, None]`` (5 launches)."""
    grads = (user_grad, value_grad, query_grad, key_grad)
    xt, w, b, gs, z = _check(x, weight, bias, grads, linear_output, attr_dict)
    return _grads(xt, w, b, gs, z)


def _backward_meta(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    user_grad: torch.Tensor,
    value_grad: torch.Tensor,
    query_grad: torch.Tensor,
    key_grad: torch.Tensor,
    z: torch.Tensor,
    attr_dict: Sequence[int],
) -> list[torch.Tensor | None]:
    grads = (user_grad, value_grad, query_grad, key_grad)
    xt, w, b, _, _ = _check(x, weight, bias, grads, z, attr_dict)
    return [
        torch.empty_like(xt),
        torch.empty_like(w),
        None if b is None else b.new_empty(b.shape),
        None,
    ]


class _InLinearSilu(torch.autograd.Function):
    """The forward op below autograd; the backward op (or, where ``linear_output``'s own
    gradient is given, the same math with it added)."""

    @staticmethod
    def forward(ctx, x, weight, bias, attr_dict):  # type: ignore[override]
        outs = below_autograd(torch.ops.mxrec.in_linear_silu, x, weight, bias, attr_dict)
        ctx.save_for_backward(x, weight, bias, outs[4])
        ctx.attr_dict = list(attr_dict)
        ctx.set_materialize_grads(False)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):  # type: ignore[override]
        x, weight, bias, z = ctx.saved_tensors
        if all(g is None for g in grads):
            return None, None, None, None
        m = z.size(0)
        splits = [
            g if g is not None else z.new_zeros((m, h))
            for g, h in zip(grads[:4], ctx.attr_dict, strict=True)
        ]
        if grads[4] is None:
            out = torch.ops.mxrec.in_linear_silu_backward(
                x, weight, bias, *splits, z, ctx.attr_dict
            )
        else:
            # below autograd, as the op would run: silu_backward is then torch_npu's one kernel
            # (above it, a backend without one decomposes it into its CompositeImplicit parts)
            out = below_autograd(_grads, x, weight, bias, splits, z, grads[4])
        need = ctx.needs_input_grad
        return tuple(g if need[i] else None for i, g in enumerate(out[:3])) + (None,)


def _in_linear_silu_autograd(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, attr_dict: Sequence[int]
) -> list[torch.Tensor]:
    """AutogradPrivateUse1 / AutogradCPU: recorded when x, weight or bias need a gradient."""
    if not needs_grad(x, weight, bias):
        return below_autograd(torch.ops.mxrec.in_linear_silu, x, weight, bias, attr_dict)
    return list(_InLinearSilu.apply(x, weight, bias, list(attr_dict)))


# in_linear_silu's autograd keys, merged into the forward module's entry by the package
AUTOGRAD = {
    "AutogradPrivateUse1": _in_linear_silu_autograd,
    "AutogradCPU": _in_linear_silu_autograd,
}
KERNELS = {
    IN_LINEAR_SILU_BACKWARD: {
        "PrivateUse1": in_linear_silu_backward,
        "CPU": in_linear_silu_backward,
        "Meta": _backward_meta,
    },
}
