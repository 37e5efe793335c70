"""Oracles of the HSTU fuzz cases (tests/fuzz/test_fuzz_hstu.py): the float64 references of
``reference.py`` called with the ops' own signatures (keyword arguments as the schemas name them)
and their results in the dtypes the ops return; the backward ops' oracles are the references'
float64 autograd of ``sum(out * grad)``.  No logic of their own beyond that."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.specs.mxrec.hstu.reference import (
    hstu_delta_reference,
    hstu_dense_reference,
    hstu_jagged_reference,
)

__all__ = ["delta", "delta_backward", "dense", "dense_backward", "jagged", "jagged_backward"]


def _as_input(out: torch.Tensor, like: torch.Tensor, *inputs: torch.Tensor | None) -> torch.Tensor:
    """``out`` in ``like``'s dtype.  An empty output (no row, ``T = 0``; dense ``B`` or ``S`` 0)
    is tied to the inputs by ``+ 0 * sum``: the inputs' gradients are then zeros of their shapes
    (an empty tensor for an empty input), as the ops' autograd gives, instead of None."""
    if out.numel() == 0:
        for t in inputs:
            if t is not None and t.requires_grad:
                out = out + 0 * t.sum()
    return out.to(like.dtype)


def jagged(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, deterministic: bool = False, **kw: Any
):  # type: ignore[no-untyped-def]
    """``mxrec::hstu_jagged.equal``: ``[T, N_q, D_v]`` in q's dtype."""
    out = hstu_jagged_reference(q, k, v, **_defaults(kw))
    return _as_input(out, q, q, k, v, kw.get("attn_bias"))


def delta(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, deterministic: bool = False, **kw: Any
):  # type: ignore[no-untyped-def]
    """``mxrec::hstu_jagged.delta``: ``[T_q, N_q, D_v]`` in q's dtype."""
    out = hstu_delta_reference(q, k, v, **_defaults(kw))
    return _as_input(out, q, q, k, v, kw.get("attn_bias"))


def dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any):  # type: ignore[no-untyped-def]
    """``mxrec::hstu_dense``: ``[B, S, N_q, D_v]`` in q's dtype."""
    return _as_input(hstu_dense_reference(q, k, v, **kw), q, q, k, v, kw.get("attn_bias"))


def _defaults(kw: dict[str, Any]) -> dict[str, Any]:
    """The schemas' optional scalars as the references take them (None: the default)."""
    kw = dict(kw)
    if kw.get("target_group_size", 0) is None:
        kw["target_group_size"] = 0
    if kw.get("alpha", 1.0) is None:
        kw["alpha"] = 1.0
    return kw


def _backward(
    forward: Callable[..., torch.Tensor],
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    kw: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv, dbias)`` of ``sum(forward(...) * grad)`` in float64, returned in the
    inputs' dtypes; dbias an empty ``(0,)`` tensor without a bias (the backward ops' slot)."""
    bias = kw.get("attn_bias")
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    kw = dict(kw)
    if bias is not None:
        kw["attn_bias"] = bias.detach().double().requires_grad_()
        leaves.append(kw["attn_bias"])
    if kw.get("mask") is not None:
        kw["mask"] = kw["mask"].double()
    total = (forward(*leaves[:3], **_defaults(kw)) * grad.double()).sum()
    grads: list[torch.Tensor | None] = [None] * len(leaves)
    if total.requires_grad:  # not where no output row exists (T = 0)
        grads = list(torch.autograd.grad(total, leaves, allow_unused=True))
    grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves, strict=True)]
    dq, dk, dv = (g.to(x.dtype) for g, x in zip(grads[:3], (q, k, v), strict=True))
    db = grads[3].to(bias.dtype) if bias is not None else q.new_empty(0)
    return dq, dk, dv, db


def jagged_backward(
    grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any
):  # type: ignore[no-untyped-def]
    """``mxrec::hstu_jagged_backward.equal``."""
    return _backward(hstu_jagged_reference, grad, q, k, v, kw)


def delta_backward(
    grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any
):  # type: ignore[no-untyped-def]
    """``mxrec::hstu_jagged_backward.delta``."""
    return _backward(hstu_delta_reference, grad, q, k, v, kw)


def dense_backward(
    grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any
):  # type: ignore[no-untyped-def]
    """``mxrec::hstu_dense_backward``."""
    return _backward(hstu_dense_reference, grad, q, k, v, kw)
