"""Oracles of the HSTU v2 fuzz cases (tests/fuzz/test_fuzz_hstu_v2.py): the float64 references
of ``reference.py`` called with the ops' own signatures, their results in the dtypes the ops
return.  No logic of their own beyond that."""

from __future__ import annotations

from typing import Any

import torch

from conformance.specs.mxrec.hstu_v2.reference import (
    hstu_backward_v2_reference,
    hstu_forward_v2_reference,
)

__all__ = ["backward", "forward"]


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
    """``mxrec::hstu_forward_v2``: ``[T_q, N_q, D_v]`` in q's dtype.  An empty output is tied to
    the inputs by ``+ 0 * sum`` so that their gradients are zeros (as the op's autograd gives)."""
    out = hstu_forward_v2_reference(q, k, v, **kw)
    if out.numel() == 0:
        for t in (q, k, v, kw.get("rab")):
            if t is not None and t.requires_grad:
                out = out + 0 * t.sum()
    return out.to(q.dtype)


def backward(
    grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args: Any, **kw: Any
) -> tuple[torch.Tensor, ...]:
    """``mxrec::hstu_backward_v2``: ``(dq, dk, dv, drab)`` in q's dtype (``(0,)`` without rab)."""
    out = hstu_backward_v2_reference(grad, q, k, v, *args, **kw)
    return tuple(t.to(q.dtype) for t in out)
