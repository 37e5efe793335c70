"""Oracles of the disentangle fuzz cases (tests/fuzz/test_fuzz_disentangle.py): the float64
references of ``reference.py`` called with the ops' own signatures, their results in the dtypes
the ops return.  No logic of their own beyond that."""

from __future__ import annotations

import torch

from conformance.specs.mxrec.disentangle.reference import backward_reference, forward_reference

__all__ = ["backward", "forward"]


def forward(*args: object) -> tuple[torch.Tensor, ...]:
    """``mxrec::disentangle_attention``: three outputs in query_layer's dtype (differentiable)."""
    dtype = args[0].dtype  # type: ignore[union-attr]
    return tuple(o.to(dtype) for o in forward_reference(*args))


def backward(*args: object) -> list[torch.Tensor | None]:
    """``mxrec::disentangle_attention_backward``: the gradients in query_layer's dtype."""
    dtype = args[3].dtype  # type: ignore[union-attr]
    return [None if g is None else g.to(dtype) for g in backward_reference(*args)]
