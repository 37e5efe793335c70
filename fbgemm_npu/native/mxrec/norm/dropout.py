"""``mxrec::norm_multiply_dropout`` and ``mxrec::norm_multiply_dropout_backward``: Rec SDK's
fused layer norm, gate and dropout, with autograd.

Schemas (the forward Rec SDK's, ``norm_multiply_dropout.cpp``; the backward ours: Rec SDK runs
its backward kernel inside its autograd only, with no torch op)::

    norm_multiply_dropout(Tensor x, Tensor u, Tensor weight, Tensor bias, float eps,
        float dropout_ratio) -> Tensor[]
    norm_multiply_dropout_backward(Tensor grad, Tensor x, Tensor u, Tensor weight, Tensor bias,
        Tensor? mask, float eps, float dropout_ratio) -> Tensor[]

Forward (``x``, ``u`` ``[B, C]``, ``weight``, ``bias`` ``[C]``, ``p = dropout_ratio``; the
variance biased)::

    ln   = (x - mean_C(x)) / sqrt(var_C(x) + eps) * weight + bias
    keep = rand(B, C) >= p                          (drawn only where p > 1e-10)
    y    = ln * u * keep / (1 - p)                  (y = ln * u where p <= 1e-10; 0 where p = 1)

returned as the one-element list ``[y]`` (Rec SDK's).  ``rand`` is torch's ``torch.rand`` on
``x``'s device in float32, from that device's default generator, so ``torch.manual_seed``
reproduces the mask; on the simulated npu it is the CPU generator, so the same seed gives the
same mask on npu and CPU (tested).  On a real NPU torch_npu's own generator draws it
(reproducible from the seed on that device, but not the CPU's numbers: another generator).  Rec
SDK seeds its mask from ``std::random_device`` (not reproducible at all).

Backward (``gd = grad * keep / (1 - p)``, ``g = gd * u``)::

    d_u = gd * ln;   d_x, d_weight, d_bias = layer_norm_backward(g)

returned as ``[d_x, d_u, d_weight, d_bias]`` (Rec SDK's kernel order).  ``mask`` is the bool
``keep`` ``[B, C]`` of the forward (required where ``p > 1e-10``, ignored otherwise); the layer
norm's statistics are recomputed from ``x`` (one launch, which saves keeping ``ln``, mean and
variance between the passes).  ``d_weight`` / ``d_bias`` come in ``weight``'s dtype (Rec SDK's
kernel writes float32; torch's layer-norm backward sums in float32 either way).  Autograd
(AutogradPrivateUse1 / AutogradCPU): saves ``x``, ``u``, ``weight``, ``bias`` and ``keep``; its
backward is this op.

dtypes: float32 / float16 / bfloat16 (Rec SDK's; 950: no float32), every tensor of ``x``'s
dtype; half inputs computed by torch's half kernels (float32 statistics inside), as Rec SDK's
"small ops" pole.  Ranges: Rec SDK's ``B`` in [1, 1e6], ``C`` in {512, 1024} and ``eps`` in
[1e-10, 1e-4] are its kernel's tiling limits; the math allows any ``B >= 0``, ``C >= 1``, finite
``eps > 0``, which we accept.  ``dropout_ratio`` in [0, 1] (as Rec SDK).  float64 is refused,
as Rec SDK's test expects.

Launches: forward ``native_layer_norm``, ``mul`` (2 without dropout); with dropout + ``rand``
(one ``uniform_``), ``ge``, the mask ``mul_``, the scale ``mul_`` (6).
Backward ``native_layer_norm``, (dropout: mask ``mul``, scale ``mul_``), two ``mul``,
``native_layer_norm_backward``: 4 / 6.  Target 8: met.  No sync, no data check, no AI-CPU.
"""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._autograd import needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    dtype_name,
)
from fbgemm_npu.native.mxrec.norm._utils import (
    FLOATS,
    check_eps,
    check_row_params,
    check_same_shape,
)

__all__ = [
    "KERNELS",
    "NORM_MULTIPLY_DROPOUT",
    "NORM_MULTIPLY_DROPOUT_BACKWARD",
    "SCHEMAS",
    "norm_multiply_dropout",
    "norm_multiply_dropout_backward",
]

NORM_MULTIPLY_DROPOUT = "mxrec::norm_multiply_dropout"
NORM_MULTIPLY_DROPOUT_BACKWARD = "mxrec::norm_multiply_dropout_backward"
SCHEMAS = {
    NORM_MULTIPLY_DROPOUT: "norm_multiply_dropout(Tensor x, Tensor u, Tensor weight, "
    "Tensor bias, float eps, float dropout_ratio) -> Tensor[]",
    NORM_MULTIPLY_DROPOUT_BACKWARD: "norm_multiply_dropout_backward(Tensor grad, Tensor x, "
    "Tensor u, Tensor weight, Tensor bias, Tensor? mask, float eps, float dropout_ratio) "
    "-> Tensor[]",
}
T = torch.Tensor
NO_DROPOUT = 1e-10  # Rec SDK: |p| <= 1e-10 means no dropout


def _check(
    op: str, x: object, u: object, weight: object, bias: object, eps: float, p: float
) -> tuple[T, T, T, T, float, float]:
    """Host checks (no launch): 2-D float ``x``, ``u`` of its shape and dtype, ``[C]`` weight
    and bias of its dtype, one device, ``eps`` finite > 0, ``dropout_ratio`` in [0, 1]."""
    xt = check_dtype(op, "x", check_ndim(op, "x", check_tensor(op, "x", x), (2,)), FLOATS)
    if xt.size(1) == 0:
        raise ValueError(f"{op}: argument 'x' must be [B, C] with C >= 1, got shape (B, 0)")
    ut = check_same_shape(op, "u", u, xt, "x")
    w, b = check_row_params(op, ("weight", "bias"), (weight, bias), xt)
    check_same_device(op, x=xt, u=ut, weight=w, bias=b)
    if not (math.isfinite(p) and 0.0 <= p <= 1.0):
        raise ValueError(f"{op}: argument 'dropout_ratio' must be in [0, 1], got {p}")
    return xt, ut, w, b, check_eps(op, "eps", eps), float(p)


def _scale_(t: torch.Tensor, p: float) -> torch.Tensor:
    """``t / (1 - p)`` in place, ``t`` already times the keep mask; ``0`` at ``p = 1``, where
    nothing is kept (whatever mask a backward caller passes).  1 launch."""
    return t.mul_(0.0 if p >= 1.0 else 1.0 / (1.0 - p))


def _forward(x: T, u: T, weight: T, bias: T, eps: float, p: float) -> tuple[T, T | None]:
    """``(y, keep)``; ``keep`` ``None`` without dropout."""
    what = f"the [B, C] = {list(x.shape)} output of 'x'"
    with allocation_of(NORM_MULTIPLY_DROPOUT, what):
        y = torch.native_layer_norm(x, [x.size(1)], weight, bias, eps)[0].mul_(u)
        if p <= NO_DROPOUT:
            return y, None
        # float32 whatever x's dtype: one seed, one mask for every dtype and device
        keep = torch.ge(torch.rand(x.shape, dtype=torch.float32, device=x.device), p)
        return _scale_(y.mul_(keep), p), keep


def norm_multiply_dropout(
    x: T, u: T, weight: T, bias: T, eps: float, dropout_ratio: float
) -> list[T]:
    """PrivateUse1 / CPU: ``[y]`` (2 launches; 6 with dropout)."""
    args = _check(NORM_MULTIPLY_DROPOUT, x, u, weight, bias, eps, dropout_ratio)
    return [_forward(*args)[0]]


def _forward_meta(x: T, u: T, weight: T, bias: T, eps: float, dropout_ratio: float) -> list[T]:
    xt = _check(NORM_MULTIPLY_DROPOUT, x, u, weight, bias, eps, dropout_ratio)[0]
    return [xt.new_empty(xt.shape)]


def _check_backward(
    grad: T, x: T, u: T, weight: T, bias: T, mask: T | None, eps: float, p: float
) -> tuple[T, T, T, T, T, T | None, float, float]:
    op = NORM_MULTIPLY_DROPOUT_BACKWARD
    xt, ut, w, b, eps, p = _check(op, x, u, weight, bias, eps, p)
    g = check_same_shape(op, "grad", grad, xt, "x")
    check_same_device(op, x=xt, grad=g, mask=mask)
    if p <= NO_DROPOUT:
        return g, xt, ut, w, b, None, eps, p
    if mask is None:
        raise ValueError(
            f"{op}: argument 'mask' (the forward's bool keep mask) is required where "
            f"dropout_ratio = {p} > 1e-10"
        )
    m = check_tensor(op, "mask", mask)
    if m.dtype != torch.bool or m.shape != xt.shape:
        raise ValueError(
            f"{op}: argument 'mask' must be a bool tensor of x's shape {tuple(xt.shape)}, got "
            f"{dtype_name(m.dtype)} {tuple(m.shape)}"
        )
    return g, xt, ut, w, b, m, eps, p


def _backward(
    grad: T, x: T, u: T, weight: T, bias: T, keep: T | None, eps: float, p: float
) -> list[T]:
    what = f"the [B, C] = {list(x.shape)} gradients of 'x' and 'u'"
    with allocation_of(NORM_MULTIPLY_DROPOUT_BACKWARD, what):
        ln, mean, rstd = torch.native_layer_norm(x, [x.size(1)], weight, bias, eps)
        gd = grad if keep is None else _scale_(grad * keep, p)
        d_u = gd * ln
        d_x, d_w, d_b = torch.ops.aten.native_layer_norm_backward(
            gd * u, x, [x.size(1)], mean, rstd, weight, bias, [True, True, True]
        )
    return [d_x, d_u, d_w, d_b]


def norm_multiply_dropout_backward(
    grad, x, u, weight, bias, mask, eps: float, dropout_ratio: float
):
    """PrivateUse1 / CPU: ``[d_x, d_u, d_weight, d_bias]`` (4 launches; 6 with dropout)."""
    return _backward(*_check_backward(grad, x, u, weight, bias, mask, eps, dropout_ratio))


def _backward_meta(
    grad: T, x: T, u: T, weight: T, bias: T, mask: T | None, eps: float, dropout_ratio: float
) -> list[T]:
    _, xt, ut, w, b, _, _, _ = _check_backward(grad, x, u, weight, bias, mask, eps, dropout_ratio)
    return [
        xt.new_empty(xt.shape),
        ut.new_empty(ut.shape),
        w.new_empty(w.shape),
        b.new_empty(b.shape),
    ]


class _NormMultiplyDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, u, weight, bias, eps, dropout_ratio):  # type: ignore[override]
        args = _check(NORM_MULTIPLY_DROPOUT, x, u, weight, bias, eps, dropout_ratio)
        y, keep = _forward(*args)
        ctx.save_for_backward(*args[:4], keep)
        ctx.eps, ctx.p = args[4], args[5]
        return y

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        x, u, weight, bias, keep = ctx.saved_tensors
        grads = torch.ops.mxrec.norm_multiply_dropout_backward(
            dy, x, u, weight, bias, keep, ctx.eps, ctx.p
        )
        need = ctx.needs_input_grad
        return (*(g if need[i] else None for i, g in enumerate(grads)), None, None)


def _autograd(x: T, u: T, weight: T, bias: T, eps: float, dropout_ratio: float) -> list[T]:
    """AutogradPrivateUse1 / AutogradCPU: ``[y]``, recorded when an input needs a gradient."""
    if not needs_grad(x, u, weight, bias):
        with torch._C._AutoDispatchBelowAutograd():
            return torch.ops.mxrec.norm_multiply_dropout(x, u, weight, bias, eps, dropout_ratio)
    return [_NormMultiplyDropout.apply(x, u, weight, bias, eps, dropout_ratio)]


KERNELS = {
    NORM_MULTIPLY_DROPOUT: {
        "PrivateUse1": norm_multiply_dropout,
        "CPU": norm_multiply_dropout,
        "AutogradPrivateUse1": _autograd,
        "AutogradCPU": _autograd,
        "Meta": _forward_meta,
    },
    NORM_MULTIPLY_DROPOUT_BACKWARD: {
        "PrivateUse1": norm_multiply_dropout_backward,
        "CPU": norm_multiply_dropout_backward,
        "Meta": _backward_meta,
    },
}
