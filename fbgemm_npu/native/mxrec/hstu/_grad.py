"""Autograd and fake shapes shared by the jagged HSTU ops (``.equal`` and ``.delta``) and the
dense one: one Function records a forward op and replays its backward op."""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad

__all__ = ["attention_autograd", "backward_meta"]


class _Attention(torch.autograd.Function):
    """``fwd(q, k, v, attn_bias=bias, **rest)`` forward; ``bwd(grad, q, k, v, attn_bias=bias,
    **rest)`` (``deterministic`` dropped, as Rec SDK's backward has none) its backward, grads
    for q, k, v and the bias (None when no bias is given)."""

    @staticmethod
    def forward(ctx, fwd, bwd, q, k, v, bias, rest):  # type: ignore[override]
        ctx.save_for_backward(q, k, v, bias)
        ctx.bwd, ctx.rest = bwd, rest
        return below_autograd(fwd, q, k, v, attn_bias=bias, **rest)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        q, k, v, bias = ctx.saved_tensors
        rest = {n: a for n, a in ctx.rest.items() if n != "deterministic"}
        dq, dk, dv, db = ctx.bwd(grad.contiguous(), q, k, v, attn_bias=bias, **rest)
        return None, None, dq, dk, dv, (db if bias is not None else None), None


def attention_autograd(
    fwd: Any,
    bwd: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | None,
    rest: dict[str, Any],
) -> torch.Tensor:
    """The autograd kernel's body: records the call when q, k, v or the bias need a gradient,
    else runs ``fwd`` below autograd."""
    if not needs_grad(q, k, v, bias):
        return below_autograd(fwd, q, k, v, attn_bias=bias, **rest)
    return _Attention.apply(fwd, bwd, q, k, v, bias, rest)


def backward_meta(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Shapes of a backward: q's, k's, v's, and the bias's (``(0,)`` without one)."""
    db = torch.empty_like(bias) if bias is not None else q.new_empty(0)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), db
