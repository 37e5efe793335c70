"""Specs for the permute family: ``permute_{1D,2D}_sparse_data``, ``permute_sparse_features``,
``permute_2D_sparse_data_input1D``, ``invert_permute``, ``expand_into_jagged_permute``.

Oracle: upstream's CPU kernels, for every input they handle correctly.  Drawn inputs: ``T_in``
features x ``B`` batch (0 included: empty batch, no features), lengths 0..10 (zero-length rows
often), int32 / int64 lengths, every value dtype, ``permute`` a permutation, one with repeats and
drops, or empty; values / weights longer than ``sum(lengths)`` (upstream ignores the tail);
weights and ``permuted_lengths_sum`` both given and omitted; transposed / sliced (non-contiguous)
lengths, values and weights.  One example in ten is invalid in a way upstream also rejects (rank,
dtype, dtype mismatch, sizes): ours must raise too.  Explicit examples add the torchrec shape (26
features x 64) and the edge cases.

Inputs upstream's CPU kernels cannot judge (its CUDA-only forms, its CPU bugs, gradients with
repeats) are judged by the loop references of this module, in ``permute_cuda_forms.py``.

Data errors upstream does not detect (out-of-range permute, negative lengths, sizes that
disagree) make upstream read out of bounds, so they cannot be run here: ``tests/test_permute.py``
covers them.  Tolerances: none; every output is a copy (``Tol(0, 0)``), gradients of a permutation
too.  Budgets (OPS.md: 10 launches, 1 sync if ``permuted_lengths_sum`` is None) are stated per
call by :func:`_budget`: the kernels need 10 launches, 11 with weights (``expand``: 7,
``invert``: 2), the data checks add 4 when the output size is read back anyway, else 9
(``expand``: 8, ``invert``: 7), and a non-contiguous input that cannot be flattened costs one copy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, Compare, OpSpec, TensorView, Tol
from conformance.strategies import values as fill_values
from fbgemm_npu.native._checks import validation_enabled

F = torch.ops.fbgemm
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (torch.float16, torch.bfloat16,
                                                    torch.float32, torch.float64)})  # fmt: skip
VALUE_DTYPES = (torch.int32, torch.int64, torch.float32, torch.float16, torch.bfloat16)
# Weight dtypes upstream's CPU kernels take, per op (its CUDA kernels take more: [cuda_forms]).
CPU_WEIGHTS = {"2d": (torch.float32, torch.float16, torch.float64), "1d": (torch.float32,
               torch.float64)}  # fmt: skip
CUDA_ONLY_WEIGHTS = (torch.bfloat16, torch.int32, torch.int64)


def _real(t: Any) -> torch.Tensor | None:
    return t.view(t.base) if isinstance(t, TensorView) else t


def _flat_copies(*ts: Any) -> int:
    """How many of ``ts`` the kernel must copy to read them flat (non-contiguous, unviewable)."""
    n = 0
    for t in map(_real, ts):
        if t is not None and t.numel() > 0:
            try:
                t.view(-1)
            except RuntimeError:
                n += 1
    return n


def _budget(permute: Any, lengths: Any, values: Any = None, weights: Any = None,
            permuted_lengths_sum: int | None = None, indices: Any = None,
            **_: Any) -> Budget:  # fmt: skip
    p, ln, w = _real(permute), _real(lengths), _real(weights)
    if p.numel() == 0 or (ln.dim() == 2 and ln.shape[1] == 0):  # empty output: nothing to do
        return Budget(0, 0)
    sync = permuted_lengths_sum is None
    checks = (4 if sync else 9) if validation_enabled() else 0
    launches = 10 + (w is not None) + checks + _flat_copies(lengths, values, indices)
    return Budget(launches, int(sync))


def permute_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Segment-by-segment permute of 2-D ``lengths`` (``(T_in, B)``); weights 1-D or 2-D."""
    perm = [int(p) for p in permute.reshape(-1).tolist()]
    rows = lengths.tolist()
    b = lengths.shape[1]
    starts, pos = [], 0
    for row in rows:
        starts.append([])
        for n in row:
            starts[-1].append(pos)
            pos += n
    src = [starts[t][j] + i for t in perm for j in range(b) for i in range(rows[t][j])]
    idx = torch.tensor(src, dtype=torch.int64)
    out_lengths = torch.tensor([rows[t] for t in perm], dtype=lengths.dtype).view(len(perm), b)
    out_weights = None if weights is None else weights[idx]
    return out_lengths, values.reshape(-1)[idx], out_weights


def permute_1d_reference(permute: torch.Tensor, lengths: torch.Tensor, values: torch.Tensor,
                         weights: torch.Tensor | None = None,
                         permuted_lengths_sum: int | None = None) -> Any:  # fmt: skip
    out = permute_reference(permute, lengths.reshape(-1, 1), values, weights)
    return out[0].view(-1), out[1], out[2]


def expand_reference(permute: torch.Tensor, input_offset: torch.Tensor,
                     output_offset: torch.Tensor, output_size: int) -> torch.Tensor:  # fmt: skip
    ins, outs = input_offset.reshape(-1).tolist(), output_offset.reshape(-1).tolist()
    out = [0] * output_size
    for t, p in enumerate(permute.reshape(-1).tolist()):
        for i in range(outs[t + 1] - outs[t]):
            out[outs[t] + i] = ins[p] + i
    return torch.tensor(out, dtype=input_offset.dtype)


# ---- inputs -------------------------------------------------------------------------------------


def _view(t: torch.Tensor, layout: str) -> torch.Tensor | TensorView:
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
    extra = torch.randint(0, t_in, (int(torch.randint(0, t_in + 2, (1,), generator=gen)),),
                          generator=gen).tolist()  # fmt: skip
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
    lengths = fill_values((t_in, b), l_dtype, draw(st.sampled_from(("lengths", "zeros"))),
                          int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))  # fmt: skip
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
        "permute": _view(perm, draw(st.sampled_from(perm_layouts))),
        "lengths": lengths.view(-1) if form in ("1d", "input1d") else lengths,
    }
    if form != "1d":
        args["lengths"] = _view(args["lengths"], draw(st.sampled_from(layouts)))
    args["indices" if form == "psf" else "values"] = _view(vals, draw(st.sampled_from(layouts)))
    if form == "input1d":
        args["stride"] = b
    args["weights"] = None if weights is None else _view(weights, draw(st.sampled_from(layouts)))
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
        return {"permute": _view(perm.view(2, -1), "transposed")}
    if draw(st.integers(0, 9)) == 9:
        return {"permute": perm.to(draw(st.sampled_from((torch.float32, torch.int16))))}
    if n % 2 == 0 and draw(st.booleans()):
        return {"permute": perm.view(2, -1)}
    return {"permute": _view(perm, draw(st.sampled_from(("contiguous", "sliced"))))}


def invert_reference(permute: torch.Tensor) -> torch.Tensor:
    """``out[p] = i`` over ``permute`` read in logical (row-major) order."""
    flat = permute.reshape(-1).tolist()
    out = [0] * len(flat)
    for i, p in enumerate(flat):
        out[p] = i
    return torch.tensor(out, dtype=permute.dtype).view(permute.shape)


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
            args[key] = _view(args[key], "sliced")
    elif draw(st.integers(0, 9)) == 9:  # invalid, and rejected by upstream before any read
        how = draw(st.sampled_from(("empty", "numel", "dtype")))
        if how == "empty":
            args.update(permute=args["permute"][:0], input_offset=args["input_offset"][:1],
                        output_offset=args["output_offset"][:1], output_size=0)  # fmt: skip
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
    perm, lengths = _real(args["permute"]), _real(args["lengths"])
    total = int(lengths[perm.long()].sum()) if perm.numel() else 0
    if draw(st.booleans()):
        shape = (perm.numel(), lengths.shape[1])
        flat = (shape[0] * shape[1],)  # upstream writes the lengths flat: any viewable shape
        args["permuted_lengths_out"] = torch.full(
            draw(st.sampled_from((shape, flat))), -1, dtype=lengths.dtype
        )
    if draw(st.booleans()):
        rows = total + draw(st.sampled_from((0, 0, 2)))
        args["permuted_indices_out"] = torch.full((rows,), 7, dtype=_real(args["values"]).dtype)
    weights = _real(args["weights"])
    if weights is not None and draw(st.booleans()):
        rows = total + draw(st.sampled_from((0, 0, 2)))
        args["permuted_weights_out"] = torch.full((rows,), 5, dtype=weights.dtype)
    if draw(st.integers(0, 9)) == 9:  # a buffer of the wrong dtype: upstream raises too
        args["permuted_lengths_out"] = torch.zeros(
            (perm.numel(), lengths.shape[1]), dtype=torch.float32
        )
    return args


def _expand_budget(permute: Any, **_: Any) -> Budget:
    return Budget(7 + (8 if validation_enabled() else 0), 0)


def _invert_budget(permute: Any) -> Budget:
    p = _real(permute)
    if p.numel() == 0:
        return Budget(0, 0)
    return Budget(2 + (7 if validation_enabled() else 0) + _flat_copies(permute), 0)


# ---- explicit examples --------------------------------------------------------------------------


def _examples_2d() -> tuple[dict[str, Any], ...]:
    gen = torch.Generator().manual_seed(7)
    big = torch.randint(0, 40, (26, 64), generator=gen, dtype=torch.int32)  # torchrec-shaped
    n = int(big.sum())
    perm = torch.randperm(26, generator=gen).to(torch.int32)
    small = torch.tensor([[1, 2], [0, 3], [2, 0]])
    i32 = torch.int32
    return (
        {
            "permute": perm,
            "lengths": big,
            "values": torch.arange(n),
            "weights": torch.rand(n),
            "permuted_lengths_sum": n,
        },  # fmt: skip
        {"permute": perm, "lengths": big, "values": torch.arange(n, dtype=i32)},
        {
            "permute": torch.tensor([2, 0, 1], dtype=i32),
            "lengths": small.new_zeros(3, 0),
            "values": torch.arange(0),
            "weights": torch.rand(0),
        },  # empty batch, B = 0
        {
            "permute": torch.zeros(0, dtype=i32),
            "lengths": small,
            "values": torch.arange(8),
            "weights": torch.rand(8),
            "permuted_lengths_sum": 0,
        },  # no output feature
        {
            "permute": torch.tensor([0, 0, 2, 2, 2], dtype=i32),
            "lengths": small,
            "values": torch.arange(8.0),
            "weights": torch.rand(8, dtype=torch.float64),
        },  # repeats
        {
            "permute": torch.tensor([1], dtype=i32),
            "lengths": small,
            "values": torch.arange(12).to(torch.bfloat16),
        },  # drops, values tail
        {
            "permute": torch.tensor([1, 0, 2], dtype=i32),
            "lengths": small.new_zeros(3, 4),
            "values": torch.arange(5),
        },  # every row empty
        {
            "permute": torch.tensor([2, 0, 1], dtype=i32),
            "lengths": _view(small, "transposed"),
            "values": _view(torch.arange(8), "sliced"),
            "weights": _view(torch.rand(8), "sliced"),
        },
        {
            "permute": torch.tensor([0, 1], dtype=i32),
            "lengths": torch.ones(2, dtype=torch.int64),
            "values": torch.arange(2),
        },  # 1-D lengths: upstream raises
    )


def _examples_1d() -> tuple[dict[str, Any], ...]:
    i32 = torch.int32
    lengths = torch.tensor([3, 0, 2, 1])
    return (
        {
            "permute": torch.tensor([3, 0, 0, 2], dtype=i32),
            "lengths": lengths,
            "values": torch.arange(6.0),
            "weights": torch.rand(6),
            "permuted_lengths_sum": 9,
        },
        {"permute": torch.zeros(0, dtype=i32), "lengths": lengths, "values": torch.arange(6)},
        {
            "permute": torch.tensor([1, 0], dtype=i32),
            "lengths": lengths.view(2, 2),
            "values": torch.arange(6),
        },  # 2-D lengths: read flat, as upstream does
        {
            "permute": _view(torch.tensor([2, 1, 3], dtype=i32), "sliced"),
            "lengths": _view(lengths, "sliced"),
            "values": torch.arange(9, dtype=i32),
        },
    )


# ---- specs --------------------------------------------------------------------------------------


def _kw_op(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda **kw: fn(**kw)


_NOTE = "upstream's CPU kernels as oracle; data errors upstream misses: tests/test_permute.py"
SPECS = [
    OpSpec("permute_2D_sparse_data", _kw_op(F.permute_2D_sparse_data), sparse_inputs(), EXACT,
           _budget, examples=_examples_2d(), notes=_NOTE),
    OpSpec("permute_2D_sparse_preallocated_out", _kw_op(F.permute_2D_sparse_preallocated_out),
           prealloc_inputs(), EXACT, _budget, notes=_NOTE),
    OpSpec("permute_sparse_data", _kw_op(F.permute_sparse_data), sparse_inputs(), EXACT, _budget,
           notes=_NOTE),
    OpSpec("permute_1D_sparse_data", _kw_op(F.permute_1D_sparse_data),
           sparse_inputs(form="1d", weight_dtypes=CPU_WEIGHTS["1d"],
                         perm_layouts=("contiguous", "sliced")),
           EXACT, _budget, examples=_examples_1d(), notes=_NOTE),
    OpSpec("permute_2D_sparse_data_input1D", _kw_op(F.permute_2D_sparse_data_input1D),
           sparse_inputs(form="input1d"), EXACT, _budget, notes=_NOTE),
    OpSpec("permute_sparse_features", _kw_op(F.permute_sparse_features),
           sparse_inputs(form="psf"), EXACT, _budget, notes=_NOTE),
    OpSpec("invert_permute", _kw_op(F.invert_permute), invert_inputs(), EXACT, _invert_budget,
           examples=({"permute": torch.zeros(0, dtype=torch.int64)},
                     {"permute": torch.tensor([[2, 0], [3, 1]], dtype=torch.int32)})),
    OpSpec("expand_into_jagged_permute", _kw_op(F.expand_into_jagged_permute), expand_inputs(),
           EXACT, _expand_budget),
    # Gradients: a bijective permute, values exactly as long as the lengths' sum (upstream's
    # backward needs both).
    OpSpec("permute_2D_sparse_data[grad]", _kw_op(F.permute_2D_sparse_data),
           sparse_inputs(kinds=("permutation",), weight_dtypes=(torch.float32, torch.float64),
                         tails=(0,), value_dtypes=(torch.float32, torch.float16),
                         with_weights=(True,), invalid=False),
           EXACT, _budget, backward=True, grad_inputs=("values", "weights")),
]  # fmt: skip
