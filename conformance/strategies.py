"""Hypothesis strategies for tensor inputs, shared by the specs.

Hypothesis draws the structure of an input (shape, dtype, layout, value distribution and a seed);
the values themselves come from a seeded ``torch.Generator``, which keeps large tensors cheap to
draw while every example stays reproducible from hypothesis' choices.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from hypothesis import strategies as st

from conformance.harness import TensorView

INT_FILLS = ("lengths", "signed", "zeros", "extreme")
FLOAT_FILLS = ("uniform", "positive", "small_ints", "zeros", "tenths")
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")


def values(shape: Sequence[int], dtype: torch.dtype, fill: str, seed: int) -> torch.Tensor:
    """A CPU tensor of ``shape`` and ``dtype`` whose values follow ``fill``.

    Integer fills: ``lengths`` (0..10, like jagged lengths), ``signed`` (-1000..1000), ``zeros``,
    ``extreme`` (the dtype's whole range for int32 so that sums wrap; +-2**52 for int64, whose
    sums must not overflow).  Float fills: ``uniform`` (-10..10), ``positive`` (0..10: sums grow,
    so accumulation error does too), ``small_ints`` (-5..5, exact in every float type), ``zeros``,
    ``tenths`` (all 0.1: the sums that expose half-precision accumulation, 0.1 being inexact).
    Magnitudes stay small enough that float16 sums of 2048 terms cannot overflow.
    """
    gen = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    if fill == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if not dtype.is_floating_point:
        if dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=gen).bool()
        lo, hi = {"lengths": (0, 11), "signed": (-1000, 1001)}.get(fill, (0, 0))
        if fill == "extreme":
            info = torch.iinfo(dtype)
            lo, hi = (info.min, info.max) if dtype != torch.int64 else (-(2**52), 2**52)
        return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)
    if fill == "small_ints":
        return torch.randint(-5, 6, shape, generator=gen).to(dtype)
    if fill == "tenths":
        return torch.full(shape, 0.1, dtype=dtype)
    u = torch.rand(shape, generator=gen, dtype=torch.float64)
    return (u * 10 if fill == "positive" else u * 20 - 10).to(dtype)


def with_layout(
    shape: tuple[int, ...], dtype: torch.dtype, fill: str, seed: int, layout: str
) -> torch.Tensor | TensorView:
    """A tensor of logical ``shape`` in ``layout`` (falls back to contiguous where meaningless)."""
    ndim = len(shape)
    if layout == "transposed" and ndim >= 2:
        base = values(shape[::-1], dtype, fill, seed)
        perm = tuple(range(ndim - 1, -1, -1))
        return TensorView(base, lambda t: t.permute(perm), "transposed")
    if layout == "sliced" and ndim >= 1:
        base = values((*shape[:-1], 2 * shape[-1] + 1), dtype, fill, seed)
        return TensorView(base, lambda t: t[..., 1::2], "sliced [..., 1::2]")
    if layout == "expanded" and ndim >= 1:
        base = values((1, *shape[1:]), dtype, fill, seed)
        return TensorView(base, lambda t: t.expand(shape), "expanded dim 0 (stride 0)")
    return values(shape, dtype, fill, seed)


@st.composite
def tensors(
    draw: st.DrawFn,
    shapes: st.SearchStrategy[tuple[int, ...]],
    dtypes: Sequence[torch.dtype],
    layouts: Sequence[str] = LAYOUTS,
) -> torch.Tensor | TensorView:
    """A tensor (or a non-contiguous :class:`TensorView`) of a drawn shape, dtype and layout."""
    shape = draw(shapes)
    dtype = draw(st.sampled_from(list(dtypes)))
    fills = FLOAT_FILLS if dtype.is_floating_point else INT_FILLS
    fill = draw(st.sampled_from(fills))
    layout = draw(st.sampled_from(list(layouts)))
    seed = draw(st.integers(0, 2**31 - 1))
    return with_layout(shape, dtype, fill, seed, layout)


def sizes(small: int = 8, large: int = 0) -> st.SearchStrategy[int]:
    """A dimension size: often tiny (0 included), sometimes up to ``large``."""
    parts = [st.integers(0, 2), st.integers(0, small)]
    if large > small:
        parts.append(st.integers(small, large))
    return st.one_of(parts)


def shapes(ndims: Sequence[int], small: int = 8, large: int = 0) -> st.SearchStrategy:
    """Shapes of one of the ranks in ``ndims``; the last dimension may grow to ``large``."""

    def of_rank(n: int) -> st.SearchStrategy[tuple[int, ...]]:
        if n == 0:
            return st.just(())
        lead = [sizes(small) for _ in range(n - 1)]
        return st.tuples(*lead, sizes(small, large))

    return st.one_of([of_rank(n) for n in ndims])
