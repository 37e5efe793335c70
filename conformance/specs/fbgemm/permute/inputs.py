"""Drawn inputs of the permute specs (hypothesis strategies) and the budget path of each call.

``sparse_inputs`` draws a call of one of the sparse-data permutes: ``T_in`` features x ``B``
batch (0 included: empty batch, no features), lengths 0..10 (zero-length rows often), int32 /
int64 lengths, every value dtype, ``permute`` a permutation, one with repeats and drops, or
empty; values / weights longer than ``sum(lengths)`` (upstream ignores the tail); weights and
``permuted_lengths_sum`` both given and omitted; transposed / sliced (non-contiguous) lengths,
values and weights; one call in ten invalid in a way upstream also rejects.  ``invert_inputs``,
``expand_inputs`` and ``prealloc_inputs`` draw the other ops' calls.

Budgets: the op's ``BUDGETS`` entry (``fbgemm_npu/native/fbgemm/permute/budgets.py``);
:func:`sparse_budget`, :func:`invert_budget` and :func:`expand_budget` name the path of a drawn
call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, TensorView, Tol
from conformance.strategies import values as fill_values

__all__ = [
    "CPU_WEIGHTS",
    "CUDA_ONLY_WEIGHTS",
    "EXACT",
    "expand_budget",
    "expand_inputs",
    "invert_budget",
    "invert_inputs",
    "prealloc_inputs",
    "real",
    "sparse_budget",
    "sparse_inputs",
    "view_as",
]

# Every output is a copy (gradients of a permutation too): exact.
EXACT = Compare(
    {
        d: Tol(rtol=0.0, atol=0.0)
        for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    }
)
VALUE_DTYPES = (torch.int32, torch.int64, torch.float32, torch.float16, torch.bfloat16)
# Weight dtypes upstream's CPU kernels take, per op (its CUDA kernels take more: [cuda_forms]).
CPU_WEIGHTS = {
    "2d": (torch.float32, torch.float16, torch.float64),
    "1d": (torch.float32, torch.float64),
}
CUDA_ONLY_WEIGHTS = (torch.bfloat16, torch.int32, torch.int64)


def real(t: Any) -> Any:
    """The logical tensor a drawn argument stands for (a :class:`TensorView` applied)."""
    return t.view(t.base) if isinstance(t, TensorView) else t


def _needs_copy(t: Any) -> bool:
    """Whether the kernel must copy ``t`` to read it flat (non-contiguous and no view flattens
    it: a transposed or row-sliced 2-D lengths)."""
    t = real(t)
    if t is None or t.numel() == 0:
        return False
    try:
        t.view(-1)
    except RuntimeError:
        return True
    return False


def sparse_budget(op: str) -> Callable[..., BudgetUse]:
    """The budget path of a sparse-data permute call of ``op``: weights and
    ``permuted_lengths_sum`` given (the main path) or not, or a lengths copied first
    (``strided_lengths``, the ceiling of every strided call)."""

    def use(
        permute: Any,
        lengths: Any,
        weights: Any = None,
        permuted_lengths_sum: int | None = None,
        **_: Any,
    ) -> BudgetUse:
        sized = permuted_lengths_sum is not None or op == "fbgemm::permute_sparse_features"
        parts = [] if weights is not None else ["no_weights"]
        parts += [] if sized else ["no_permuted_lengths_sum"]
        path = "strided_lengths" if _needs_copy(lengths) else " + ".join(parts) or None
        return BudgetUse(op=op, path=path, sized=permuted_lengths_sum is not None)

    return use


def expand_budget(op: str = "fbgemm::expand_into_jagged_permute") -> Callable[..., BudgetUse]:
    """``expand_into_jagged_permute``: int64 (the main path: int32 row ids, int64 arithmetic) or
    ``int32`` (a segment arange in int32)."""

    def use(permute: Any, **_: Any) -> BudgetUse:
        t = real(permute)
        return BudgetUse(op=op, path="int32" if t.dtype == torch.int32 else None)

    return use


def invert_budget(op: str = "fbgemm::invert_permute") -> Callable[..., BudgetUse]:
    """``invert_permute``: a permute that no view flattens is copied first (``strided``)."""

    def use(permute: Any) -> BudgetUse:
        return BudgetUse(op=op, path="strided" if _needs_copy(permute) else None)

    return use


def view_as(t: torch.Tensor, layout: str) -> torch.Tensor | TensorView:
    """``t``'s values in a non-contiguous layout (same logical tensor)."""
    if layout == "transposed" and t.dim() == 2:
        return TensorView(t.t().contiguous(), lambda x: x.t(), "transposed")
    if layout == "sliced" and t.dim() >= 1:
        base = torch.zeros((2 * t.shape[0] + 1, *t.shape[1:]), dtype=t.dtype)
        base[1::2] = t
        return TensorView(base, lambda x: x[1::2], "sliced [1::2]")
    return t


def _permute_list(kind: str, t_in: int, gen: torch.Generator) -> list[int]:
    if kind == "empty" or t_in == 0:
        return []
    order = torch.randperm(t_in, generator=gen).tolist()
    if kind == "permutation":
        return order
    extra = torch.randint(
        0, t_in, (int(torch.randint(0, t_in + 2, (1,), generator=gen)),), generator=gen
    ).tolist()
    return order[: max(0, t_in - 1)] + extra  # drops one feature, repeats others


@st.composite
def sparse_inputs(
    draw: st.DrawFn,
    *,
    form: str = "2d",  # "2d", "1d", "input1d", "psf"
    weight_dtypes: tuple[torch.dtype, ...] = CPU_WEIGHTS["2d"],
    perm_layouts: tuple[str, ...] = ("contiguous",),
    kinds: tuple[str, ...] = ("permutation", "repeats", "empty"),
    weights_2d: bool = False,
    perm_dtypes: tuple[torch.dtype, ...] = (torch.int32,),
    tails: tuple[int, ...] = (0, 0, 0, 3),
    value_dtypes: tuple[torch.dtype, ...] = VALUE_DTYPES,
    with_weights: tuple[bool, ...] = (False, True),
    with_sum: tuple[bool, ...] = (False, True),
    invalid: bool = True,
) -> dict[str, Any]:
    """A valid call of one of the sparse-data permutes (one in ten invalid, when allowed)."""
    t_in = draw(st.integers(0, 6))
    b = 1 if form == "1d" else draw(st.integers(1 if form == "input1d" else 0, 5))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    l_dtype = draw(st.sampled_from((torch.int32, torch.int64)))
    lengths = fill_values(
        (t_in, b),
        l_dtype,
        draw(st.sampled_from(("lengths", "zeros"))),
        int(torch.randint(0, 2**31 - 1, (1,), generator=gen)),
    )
    total = int(lengths.sum())
    tail = draw(st.sampled_from(tails))  # values longer than the lengths' sum
    v_dtype = l_dtype if form == "psf" else draw(st.sampled_from(value_dtypes))
    vals = fill_values(
        (total + tail,),
        v_dtype,
        "signed" if not v_dtype.is_floating_point else "uniform",
        int(torch.randint(0, 2**31 - 1, (1,), generator=gen)),
    )
    kind = draw(st.sampled_from(kinds))
    perm = torch.tensor(_permute_list(kind, t_in, gen), dtype=draw(st.sampled_from(perm_dtypes)))
    weights = None
    if draw(st.sampled_from(with_weights)):
        w_dtype = draw(st.sampled_from(weight_dtypes))
        shape = (total + draw(st.sampled_from(tails)),)
        if weights_2d and draw(st.booleans()):
            shape = (*shape, draw(st.integers(1, 3)))
        weights = fill_values(
            shape,
            w_dtype,
            "small_ints" if w_dtype.is_floating_point else "signed",
            int(torch.randint(0, 2**31 - 1, (1,), generator=gen)),
        )
    layouts = ("contiguous", "contiguous", "transposed", "sliced")
    args: dict[str, Any] = {
        "permute": view_as(perm, draw(st.sampled_from(perm_layouts))),
        "lengths": lengths.view(-1) if form in ("1d", "input1d") else lengths,
    }
    if form != "1d":
        args["lengths"] = view_as(args["lengths"], draw(st.sampled_from(layouts)))
    args["indices" if form == "psf" else "values"] = view_as(vals, draw(st.sampled_from(layouts)))
    if form == "input1d":
        args["stride"] = b
    args["weights"] = None if weights is None else view_as(weights, draw(st.sampled_from(layouts)))
    if form != "psf" and draw(st.sampled_from(with_sum)):
        args["permuted_lengths_sum"] = int(lengths[perm.long()].sum()) if perm.numel() else 0
    if invalid and draw(st.integers(0, 9)) == 9:
        _spoil(draw, args, form)
    return args


def _spoil(draw: st.DrawFn, args: dict[str, Any], form: str) -> None:
    """Make the call invalid in a way upstream's CPU kernel rejects as well."""
    vkey = "indices" if form == "psf" else "values"
    how = draw(st.sampled_from(("values_dtype", "lengths_dtype", "permute_dtype", "rank")))
    if how == "values_dtype":
        args[vkey] = torch.ones(3, dtype=draw(st.sampled_from((torch.float64, torch.int8))))
    elif how == "lengths_dtype":
        args["lengths"] = torch.ones((2, 2) if form in ("2d", "psf") else (4,), dtype=torch.float32)
    elif how == "permute_dtype":
        args["permute"] = torch.tensor([0.0, 1.0])
    elif form in ("2d", "psf"):
        args["lengths"] = torch.ones(draw(st.sampled_from(((4,), (1, 2, 2)))), dtype=torch.int64)
    elif form == "input1d":
        args["stride"] = 3
        args["lengths"] = torch.ones(4, dtype=torch.int64)
    else:
        args[vkey] = torch.ones(3, dtype=torch.bool)


@st.composite
def invert_inputs(draw: st.DrawFn, *, transposed: bool = False) -> dict[str, Any]:
    """A permutation of 0..n-1 (n = 0 included), 1-D or 2-D, sometimes non-contiguous.

    ``transposed``: a transposed 2-D permutation, which upstream inverts in memory order
    (``empty_like`` keeps the transposed strides, the kernel writes through the raw pointer), so
    its logical result is not the inverse: judged by the reference.
    """
    n = 2 * draw(st.integers(1, 20)) if transposed else draw(st.integers(0, 40))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    perm = torch.randperm(n, generator=gen).to(draw(st.sampled_from((torch.int32, torch.int64))))
    if transposed:
        return {"permute": view_as(perm.view(2, -1), "transposed")}
    if draw(st.integers(0, 9)) == 9:
        return {"permute": perm.to(draw(st.sampled_from((torch.float32, torch.int16))))}
    if n % 2 == 0 and draw(st.booleans()):
        return {"permute": perm.view(2, -1)}
    return {"permute": view_as(perm, draw(st.sampled_from(("contiguous", "sliced"))))}


@st.composite
def expand_inputs(draw: st.DrawFn, *, contiguous: bool = True) -> dict[str, Any]:
    """Segment offsets and a permute with repeats, as expand_into_jagged_permute is fed."""
    t = draw(st.integers(1, 8))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    dtype = draw(st.sampled_from((torch.int32, torch.int64)))
    in_lengths = torch.randint(0, 6, (t,), generator=gen)
    perm = torch.randint(0, t, (t,), generator=gen)
    out_lengths = in_lengths[perm] if draw(st.booleans()) else torch.randint(0, 6, (t,))
    zero = torch.zeros(1, dtype=torch.int64)
    args: dict[str, Any] = {
        "permute": perm.to(dtype),
        "input_offset": torch.cat([zero, in_lengths.cumsum(0)]).to(dtype),
        "output_offset": torch.cat([zero, out_lengths.cumsum(0)]).to(dtype),
        "output_size": int(out_lengths.sum()),
    }
    if not contiguous:
        for key in ("permute", "input_offset", "output_offset"):
            args[key] = view_as(args[key], "sliced")
    elif draw(st.integers(0, 9)) == 9:  # invalid, and rejected by upstream before any read
        how = draw(st.sampled_from(("empty", "numel", "dtype")))
        if how == "empty":
            args.update(
                permute=args["permute"][:0],
                input_offset=args["input_offset"][:1],
                output_offset=args["output_offset"][:1],
                output_size=0,
            )
        elif how == "numel":
            args["input_offset"] = args["input_offset"][:-1]
        else:
            args["output_offset"] = args["output_offset"].to(
                torch.int64 if dtype == torch.int32 else torch.int32
            )
    return args


@st.composite
def prealloc_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """A permute_2D call plus preallocated outputs (each given or not; values / weights buffers
    of exactly ``total`` rows or longer, whose tail upstream leaves as it was)."""
    args = draw(sparse_inputs(invalid=False))
    perm, lengths = real(args["permute"]), real(args["lengths"])
    total = int(lengths[perm.long()].sum()) if perm.numel() else 0
    if draw(st.booleans()):
        shape = (perm.numel(), lengths.shape[1])
        flat = (shape[0] * shape[1],)  # upstream writes the lengths flat: any viewable shape
        args["permuted_lengths_out"] = torch.full(
            draw(st.sampled_from((shape, flat))), -1, dtype=lengths.dtype
        )
    if draw(st.booleans()):
        rows = total + draw(st.sampled_from((0, 0, 2)))
        args["permuted_indices_out"] = torch.full((rows,), 7, dtype=real(args["values"]).dtype)
    weights = real(args["weights"])
    if weights is not None and draw(st.booleans()):
        rows = total + draw(st.sampled_from((0, 0, 2)))
        args["permuted_weights_out"] = torch.full((rows,), 5, dtype=weights.dtype)
    if draw(st.integers(0, 9)) == 9:  # a buffer of the wrong dtype: upstream raises too
        args["permuted_lengths_out"] = torch.zeros(
            (perm.numel(), lengths.shape[1]), dtype=torch.float32
        )
    return args
