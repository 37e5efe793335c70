"""``mxrec::disentangle_attention_backward`` and the autograd of ``disentangle_attention``.

Rec SDK has no backward (forward only); ours is a schema of our own::

    disentangle_attention_backward(Tensor? grad_attn_output, Tensor? grad_attn_probs,
        Tensor? grad_attn_weights, Tensor query_layer, Tensor key_layer, Tensor value_layer,
        Tensor pos_key_layer, Tensor pos_query_layer, Tensor relative_pos, Tensor? attn_mask,
        Tensor attn_probs, str pos_attr_type, float score_scale) -> Tensor?[]

returning ``[dQ, dK, dV, dP_k | None, dP_q | None, d_mask | None]``: ``dP_k`` only with c2p,
``dP_q`` only with p2c, ``d_mask`` only when ``attn_mask`` is passed (the mask is read for its
shape alone).  All three outputs of the forward carry gradients, as a composite would: with
``G_o, G_p, G_w`` the gradients of out, probs, weights (``None`` = zero), ``P`` = probs, ``c`` =
score_scale, ``idx`` the forward's clamped index::

    dV  = P^T G_o,    dP = G_o V^T + G_p
    dW  = P * (dP - rowsum(dP * P)) + G_w             (softmax backward)
    dS  = c dW,       dQ = dS K + dA P_k,   dK = dS^T Q + dB P_q
    dA[b, h, i, idx[i, j]] += dS[b, h, i, j]          (c2p: scatter_add_ into (b, n, s, 2s))
    dB[b, h, j, idx[j, i]] += dS[b, h, i, j]          (p2c)
    dP_k[:, h] = sum_b dA[b, h]^T Q[b, h],   dP_q[:, h] = sum_b dB[b, h]^T K[b, h]
    d_mask = sum over heads of dW                     (the mask's shape: (b, s, s) / (b, 1, s, s))

The mask's gradient is given (an additive mask is a bias a model may learn), computed only when
the mask requires one.  ``relative_pos`` has none (integers).  Not twice differentiable.

Launches (contiguous, b > 1, only ``G_o``): the index 2, ``dV`` 1, ``dP`` 1, softmax backward 1,
``dS`` 1, ``dQ`` and ``dK`` 2, per positional term the zeroed ``(b, n, s, 2s)`` buffer, one
``scatter_add_``, the head-broadcast ``P`` copied and one ``baddbmm_`` into ``dQ`` / ``dK``, the
``matmul`` and the batch sum of ``dP``: 20 for ``"c2p|p2c"``, 14 for one term (b == 1: the
broadcast ``P`` is a view, 1 fewer per term); ``G_p``, ``G_w``, the mask's gradient, int32
positions + 1 each (budgets.py).  No sync, nothing on a 910B's AI CPU (float
``scatter_add_``, float ``gather``).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import allocation_of, check_dtype, check_tensor
from fbgemm_npu.native.mxrec.disentangle._checks import Inputs, check_inputs
from fbgemm_npu.native.mxrec.disentangle.attention import positions

__all__ = ["AUTOGRAD", "DISENTANGLE_ATTENTION_BACKWARD", "KERNELS", "SCHEMAS"]

DISENTANGLE_ATTENTION_BACKWARD = "mxrec::disentangle_attention_backward"
SCHEMAS = {
    DISENTANGLE_ATTENTION_BACKWARD: "disentangle_attention_backward(Tensor? grad_attn_output, "
    "Tensor? grad_attn_probs, Tensor? grad_attn_weights, Tensor query_layer, Tensor key_layer, "
    "Tensor value_layer, Tensor pos_key_layer, Tensor pos_query_layer, Tensor relative_pos, "
    "Tensor? attn_mask, Tensor attn_probs, str pos_attr_type, float score_scale) -> Tensor?[]"
}
_GRADS = ("grad_attn_output", "grad_attn_probs", "grad_attn_weights")


def _check(op: str, grads: tuple[object, ...], args: tuple[object, ...], probs: object) -> Inputs:
    """The forward's checks (mask optional), then the gradients' and probs' shapes / dtypes."""
    a = check_inputs(op, *args, mask_optional=True)
    b, n, s, d = a.q.shape
    shapes = ((b, n, s, d), (b, n, s, s), (b, n, s, s))
    checked = zip((*_GRADS, "attn_probs"), (*grads, probs), (*shapes, shapes[1]), strict=True)
    for arg, g, shape in checked:
        if g is None and arg != "attn_probs":
            continue
        g = check_dtype(op, arg, check_tensor(op, arg, g), (a.q.dtype,))
        if tuple(g.shape) != shape:
            raise ValueError(
                f"{op}: argument '{arg}' must have shape {shape}, got {tuple(g.shape)}"
            )
        if g.device != a.q.device:
            raise RuntimeError(
                f"{op}: arguments 'query_layer' ({a.q.device}) and '{arg}' ({g.device}) must be "
                "on the same device"
            )
    return a


def _pos_grads(
    ds: torch.Tensor, x: torch.Tensor, pos: torch.Tensor, idx: torch.Tensor, dx: torch.Tensor
) -> torch.Tensor:
    """One positional term's backward: ``dx += dA P`` in place; returns ``dP`` ``(2s, n, d)``,
    ``dA[.., i, idx[i, j]] += ds[.., i, j]``."""
    b, n, s, d = x.shape
    da = torch.zeros((b, n, s, 2 * s), dtype=ds.dtype, device=ds.device)
    da.scatter_add_(-1, idx.expand(b, n, s, s), ds)
    pos_b = pos.permute(1, 0, 2).expand(b, n, 2 * s, d).reshape(b * n, 2 * s, d)
    dx.view(b * n, s, d).baddbmm_(da.view(b * n, s, 2 * s), pos_b)
    out = torch.empty((2 * s, n, d), dtype=x.dtype, device=x.device)
    torch.sum(torch.matmul(da.transpose(-1, -2), x), 0, out=out.permute(1, 0, 2))
    return out


def backward(
    a: Inputs,
    go: torch.Tensor | None,
    gp: torch.Tensor | None,
    gw: torch.Tensor | None,
    probs: torch.Tensor,
    score_scale: float,
) -> list[torch.Tensor | None]:
    """The tensor program on checked inputs (module docstring)."""
    b, n, s, d = a.q.shape
    idx = positions(a.rel, s)
    dv = torch.zeros_like(a.v) if go is None else torch.matmul(probs.transpose(-1, -2), go)
    dp = gp if go is None else torch.matmul(go, a.v.transpose(-1, -2))
    if go is not None and gp is not None:
        dp = dp.add_(gp)
    if dp is None:
        dw = torch.zeros_like(probs) if gw is None else gw
    else:
        dw = torch._softmax_backward_data(dp, probs, -1, probs.dtype)
        if gw is not None:
            dw = dw.add_(gw)
    ds = dw * score_scale
    dq = torch.matmul(ds, a.k)
    dk = torch.matmul(ds.transpose(-1, -2), a.q)
    dpk = _pos_grads(ds, a.q, a.pos_key, idx, dq) if a.c2p else None
    dpq = _pos_grads(ds.transpose(-1, -2), a.k, a.pos_query, idx, dk) if a.p2c else None
    dmask = None
    if a.mask is not None:
        dmask = dw.sum(1, keepdim=a.mask.dim() == 4)
    return [dq, dk, dv, dpk, dpq, dmask]


def disentangle_attention_backward(
    grad_attn_output: torch.Tensor | None,
    grad_attn_probs: torch.Tensor | None,
    grad_attn_weights: torch.Tensor | None,
    query_layer: torch.Tensor,
    key_layer: torch.Tensor,
    value_layer: torch.Tensor,
    pos_key_layer: torch.Tensor,
    pos_query_layer: torch.Tensor,
    relative_pos: torch.Tensor,
    attn_mask: torch.Tensor | None,
    attn_probs: torch.Tensor,
    pos_attr_type: str,
    score_scale: float,
) -> list[torch.Tensor | None]:
    """PrivateUse1 / CPU: ``[dQ, dK, dV, dP_k?, dP_q?, d_mask?]`` (20 launches, docstring)."""
    op = DISENTANGLE_ATTENTION_BACKWARD
    grads = (grad_attn_output, grad_attn_probs, grad_attn_weights)
    args = (query_layer, key_layer, value_layer, pos_key_layer, pos_query_layer, relative_pos,
            attn_mask, pos_attr_type, score_scale)  # fmt: skip
    a = _check(op, grads, args, attn_probs)
    b, n, s, d = a.q.shape
    what = f"the (b, n, s, 2s) = {(b, n, s, 2 * s)} gradients of 'query_layer' {(b, n, s, d)}"
    with allocation_of(op, what):
        return backward(a, *grads, attn_probs, float(score_scale))


def _backward_meta(*args: object) -> list[torch.Tensor | None]:
    """Meta: the gradients' shapes, after the same host checks."""
    a = _check(DISENTANGLE_ATTENTION_BACKWARD, args[:3], (*args[3:10], *args[11:]), args[10])
    return [
        torch.empty_like(a.q), torch.empty_like(a.k), torch.empty_like(a.v),
        torch.empty_like(a.pos_key) if a.c2p else None,
        torch.empty_like(a.pos_query) if a.p2c else None,
        None if a.mask is None else torch.empty_like(a.mask),
    ]  # fmt: skip


class _Disentangle(torch.autograd.Function):
    """The forward op below autograd; the backward op with the gradients that arrived."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, *args: object
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, probs, weights = below_autograd(torch.ops.mxrec.disentangle_attention, *args)
        q, k, v, pk, pq, rel, mask, ctx.pos_attr_type, ctx.score_scale = args
        ctx.save_for_backward(q, k, v, pk, pq, rel, mask, probs)
        ctx.set_materialize_grads(False)
        return out, probs, weights

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, *grads: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        q, k, v, pk, pq, rel, mask, probs = ctx.saved_tensors
        if all(g is None for g in grads):
            return (None,) * 9
        mask = mask if ctx.needs_input_grad[6] else None
        out = torch.ops.mxrec.disentangle_attention_backward(
            *grads, q, k, v, pk, pq, rel, mask, probs, ctx.pos_attr_type, ctx.score_scale
        )
        return (*out[:5], None, out[5], None, None)


def _autograd(*args: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """AutogradPrivateUse1 / AutogradCPU: recorded when a float input needs a gradient."""
    q, k, v, pk, pq, _rel, mask = args[:7]
    if not needs_grad(q, k, v, pk, pq, mask):
        return below_autograd(torch.ops.mxrec.disentangle_attention, *args)
    return _Disentangle.apply(*args)


AUTOGRAD = {"AutogradPrivateUse1": _autograd, "AutogradCPU": _autograd}
KERNELS = {
    DISENTANGLE_ATTENTION_BACKWARD: {
        "PrivateUse1": disentangle_attention_backward,
        "CPU": disentangle_attention_backward,
        "Meta": _backward_meta,
    }
}
