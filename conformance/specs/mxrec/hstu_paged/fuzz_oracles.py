"""Oracle of the paged HSTU fuzz cases (tests/fuzz/test_fuzz_hstu_paged.py): the float64
reference of ``reference.py`` called with the op's own signature (keyword arguments as the schema
names them), its result in q's dtype.  No logic of its own beyond that.

:func:`paged_in_tiles` is the other side of a case, not an oracle: the op itself under a small
tile budget (``_attention.TILE_ELEMENTS``), so that the fuzz's small calls run several query
tiles too; :func:`paged` ignores the budget."""

from __future__ import annotations

from typing import Any

import torch

from conformance.specs.mxrec.hstu_paged.reference import hstu_paged_reference

__all__ = ["paged", "paged_in_tiles"]


def paged(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tile_elements: int = 0, **kw: Any
) -> torch.Tensor:
    """``mxrec::hstu_paged``: ``[T, N_q, D]`` in q's dtype (the op is forward only)."""
    return hstu_paged_reference(q, k, v, **kw).to(q.dtype)


def paged_in_tiles(tile_elements: int, **kw: Any) -> torch.Tensor:
    """``torch.ops.mxrec.hstu_paged(**kw)`` with at most ``tile_elements`` scores a tile."""
    from fbgemm_npu.native.mxrec.hstu import _attention

    saved, _attention.TILE_ELEMENTS = _attention.TILE_ELEMENTS, tile_elements
    try:
        return torch.ops.mxrec.hstu_paged(**kw)
    finally:
        _attention.TILE_ELEMENTS = saved
