"""Oracles of the FuXi fuzz cases (tests/fuzz/test_fuzz_hstu_fuxi.py): the float64 references of
``reference.py`` called with the ops' own signatures (Rec SDK's argument names), their results in
q's dtype; the backward op's missing bias gradients as the empty ``(0,)`` tensors the op returns.
No logic of their own beyond that.

:func:`forward_in_tiles` / :func:`backward_in_tiles` are the other side of a case, not oracles:
the ops themselves under a small tile budget (``_attention.TILE_ELEMENTS``), so that the fuzz's
small calls run several query tiles too; the oracles ignore the budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.specs.mxrec.hstu_fuxi.reference import fuxi_backward_reference, fuxi_reference

__all__ = ["backward", "backward_in_tiles", "forward", "forward_in_tiles"]


def forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tile_elements: int = 0, **kw: Any
) -> torch.Tensor:
    """``mxrec::hstu_fuxi``: ``[T, C * N * D]`` / ``[B, S, C * N * D]`` in q's dtype."""
    return fuxi_reference(q, k, v, **kw).to(q.dtype)


def backward(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    tile_elements: int = 0,
    **kw: Any,
) -> tuple[torch.Tensor, ...]:
    """``mxrec::hstu_dense_backward_fuxi``: ``(dq, dk, dv, dpositionBias, dtimestampBias)`` in
    q's dtype, the last two empty ``(0,)`` without biases."""
    out = fuxi_backward_reference(grad, q, k, v, **kw)
    return tuple(q.new_empty(0) if t is None else t.to(q.dtype) for t in out)


def _in_tiles(op: Callable[..., Any], tile_elements: int, kw: dict[str, Any]) -> Any:
    from fbgemm_npu.native.mxrec.hstu import _attention

    saved, _attention.TILE_ELEMENTS = _attention.TILE_ELEMENTS, tile_elements
    try:
        return op(**kw)
    finally:
        _attention.TILE_ELEMENTS = saved


def forward_in_tiles(tile_elements: int, **kw: Any) -> torch.Tensor:
    """``torch.ops.mxrec.hstu_fuxi(**kw)`` with at most ``tile_elements`` scores a tile (its
    backward, through autograd, runs under the same budget only where the gradients are taken
    inside: they are taken after the call, at the default budget)."""
    return _in_tiles(torch.ops.mxrec.hstu_fuxi, tile_elements, kw)


def backward_in_tiles(tile_elements: int, **kw: Any) -> tuple[torch.Tensor, ...]:
    """``torch.ops.mxrec.hstu_dense_backward_fuxi(**kw)`` with at most ``tile_elements`` scores
    a tile."""
    return _in_tiles(torch.ops.mxrec.hstu_dense_backward_fuxi, tile_elements, kw)
