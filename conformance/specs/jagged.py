"""Specs for jagged <-> padded dense: ``jagged_to_padded_dense`` (+ ``_forward``, ``_backward``),
``jagged_1d_to_dense``, ``jagged_2d_to_dense``, ``stacked_jagged_{1d,2d}_to_dense``,
``dense_to_jagged`` (+ ``_forward``).

Oracle: upstream's CPU kernels; every output is a copy of input elements (or the padding value),
so floats are compared exactly (``Tol(0, 0)``), gradients too (they are copies / sums of one term).

Drawn inputs (:func:`jagged_inputs`): 1 to 3 jagged dims; B = 0..5 (empty batch included); row
lengths 0..6 against max lengths 0..4 (zero-length rows and truncation in most examples); values
1-D (no inner dim) or ``[N, D]`` with D = 0..3, every upstream dtype, contiguous / transposed /
sliced / expanded; offsets int32 or int64, sometimes a strided view; values longer than the last
offset (upstream ignores the tail); decreasing offsets for the read ops (upstream pads such rows);
padding values 0, negative, fractional (truncated for ints) and past float16's range (inf);
optional arguments (``padding_value``, ``total_L``) given and omitted.  Inputs that make upstream
read or write out of bounds cannot run here (``tests/test_jagged.py`` covers them), nor can
padding values whose integer conversion is undefined behaviour in C++.

Budgets: what the kernels achieve, stated per call by the ``*_budget`` functions (OPS.md asks 8
per jagged dim for to-dense, 8 for dense_to_jagged): 11 for one jagged dim (6 without the data
check), 9 more per further dim (7 without), +1 ``cat`` of the checks from two dims on; +1 copy for
a non-contiguous dense input; stacked 15 (10).  See ``native/jagged.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, Compare, OpSpec, TensorView, Tol
from conformance.strategies import with_layout
from fbgemm_npu.native._checks import validation_enabled

F = torch.ops.fbgemm
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (*FLOATS, torch.float64)})
PADDINGS = (0.0, -1.0, 7.0, 2.5, -3.75, 1e5)


def real(t: Any) -> Any:
    """The tensor a :class:`TensorView` stands for (for budgets and references)."""
    if isinstance(t, TensorView):
        return t.view(t.base)
    if isinstance(t, list):
        return [real(x) for x in t]
    return t


# ---- budgets -------------------------------------------------------------------------------


def _check_launches(k: int, write: bool) -> int:
    """Launches of the data check of one call with ``k`` jagged dims (see ``_jagged_utils``):
    2 per further dim, 2 on the final rows, a ``cat`` from two dims on, any / not / assert."""
    if not validation_enabled():
        return 0
    return 2 * (k - 1) + 2 + (k > 1) + 3


def dense_launches(k: int, write: bool) -> int:
    """Index (3 + 7 per further dim + final fill) + gather/fill or zeros/scatter + the check."""
    return 3 + 7 * (k - 1) + 1 + 2 + _check_launches(k, write)


def _copies(*ts: Any) -> int:
    n = 0
    for t in real(list(ts)):
        if t is not None and t.numel() > 0 and not t.is_contiguous():
            n += 1
    return n


def to_dense_budget(values: Any, offsets: Sequence[Any], max_lengths: Sequence[int],
                    padding_value: float = 0.0) -> Budget:  # fmt: skip
    v, k = real(values), len(offsets)
    b = real(offsets[0]).numel() - 1
    if b * math.prod(max_lengths) * (1 if v.dim() == 1 else v.size(-1)) == 0:
        return Budget(0, 0)
    return Budget(1 if v.numel() == 0 else dense_launches(k, write=False), 0)


def to_jagged_budget(dense: Any, x_offsets: Sequence[Any], total_L: int | None = None) -> Budget:
    d, offsets = real(dense), x_offsets
    sync = int(total_L is None)
    if d.numel() == 0:
        return Budget(1 + sync, sync)
    return Budget(dense_launches(len(offsets), write=True) + sync + _copies(d), sync)


# ---- inputs --------------------------------------------------------------------------------


def _offsets_tensor(o: list[int], dtype: torch.dtype, strided: bool) -> torch.Tensor | TensorView:
    t = torch.tensor(o, dtype=dtype)
    if not strided:
        return t
    base = torch.stack([t, torch.full_like(t, -7)], dim=1).reshape(-1)  # junk between entries
    return TensorView(base, lambda x: x[::2], "strided offsets")


@st.composite
def jagged_inputs(draw: st.DrawFn, dims: Sequence[int] = (1, 2, 3), dtypes: Sequence[torch.dtype]
                  = DTYPES, rank: str = "any", decreasing: bool = True,
                  tail: bool = True) -> dict[str, Any]:  # fmt: skip
    """``values``, ``offsets`` (a list) and ``max_lengths`` of a jagged tensor (see docstring)."""
    k = draw(st.sampled_from(list(dims)))
    b = draw(st.integers(0, 5))
    max_lengths = [draw(st.integers(0, 4)) for _ in range(k)]
    rows, offsets = b, []
    for _ in range(k):
        lens = draw(st.lists(st.integers(0, 6), min_size=rows, max_size=rows))
        o = [0]
        for n in lens:
            o.append(o[-1] + n)
        offsets.append(o)
        rows = o[-1]
    if decreasing and len(offsets[-1]) > 3 and draw(st.integers(0, 3)) == 0:
        i = draw(st.integers(1, len(offsets[-1]) - 3))  # never the last entry (numel checks)
        last = offsets[-1]
        last[i], last[i + 1] = last[i + 1], last[i]
    n = rows + (draw(st.integers(0, 2)) if tail else 0)
    dtype = draw(st.sampled_from(list(dtypes)))
    fill = draw(st.sampled_from(["uniform", "small_ints"] if dtype.is_floating_point
                                else ["signed", "lengths"]))  # fmt: skip
    layout = draw(st.sampled_from(["contiguous", "contiguous", "transposed", "sliced", "expanded"]))
    one_d = rank == "1" or (rank == "any" and draw(st.booleans()))
    shape = (n,) if one_d else (n, draw(st.integers(0, 3)))
    values = with_layout(shape, dtype, fill, draw(st.integers(0, 2**31 - 1)), layout)
    index_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    strided = draw(st.integers(0, 4)) == 0
    return {
        "values": values,
        "offsets": [_offsets_tensor(o, index_dtype, strided) for o in offsets],
        "max_lengths": max_lengths,
    }


@st.composite
def to_dense_inputs(draw: st.DrawFn, dims: Sequence[int] = (1, 2, 3), dtypes: Sequence[
                    torch.dtype] = DTYPES, rank: str = "any") -> dict[str, Any]:  # fmt: skip
    args = draw(jagged_inputs(dims, dtypes, rank))
    if draw(st.booleans()):
        args["padding_value"] = draw(st.sampled_from(PADDINGS))
    return args


@st.composite
def to_jagged_inputs(draw: st.DrawFn, with_total: bool | None = None,
                     dtypes: Sequence[torch.dtype] = DTYPES) -> dict[str, Any]:  # fmt: skip
    """``dense [B, L.., D]`` and offsets of a well-formed jagged tensor; ``total_L`` maybe."""
    args = draw(jagged_inputs((1, 2, 3), rank="2", decreasing=False, tail=False))
    offsets = args["offsets"]
    b = real(offsets[0]).numel() - 1
    d = draw(st.integers(0, 3))
    dtype = draw(st.sampled_from(list(dtypes)))
    # Upstream views [B, L_1..L_k, D] as [B, -1, D]: a transposed dense with k > 1 cannot be
    # viewed so and upstream raises; ours takes any layout (tests/test_jagged.py).
    layouts = ["contiguous", "sliced"] + (["transposed"] if len(offsets) == 1 else [])
    layout = draw(st.sampled_from(layouts))
    shape = (b, *args["max_lengths"], d)
    fill = "small_ints" if dtype.is_floating_point else "signed"
    dense = with_layout(shape, dtype, fill, draw(st.integers(0, 2**31 - 1)), layout)
    out: dict[str, Any] = {"dense": dense, "x_offsets": offsets}
    give = draw(st.booleans()) if with_total is None else with_total
    if give:
        out["total_L"] = int(real(offsets[-1])[-1]) + draw(st.integers(0, 2))
    return out


# ---- edge cases ----------------------------------------------------------------------------

_O = torch.tensor([0, 2, 2, 5])
_V = torch.arange(1.0, 6.0).view(5, 1)
TO_DENSE_EXAMPLES: tuple[dict[str, Any], ...] = (
    {"values": _V, "offsets": [_O], "max_lengths": [2], "padding_value": -1.0},  # truncation
    {"values": _V, "offsets": [torch.tensor([0, 3, 2, 5])], "max_lengths": [3]},  # decreasing
    {"values": _V, "offsets": [torch.tensor([0, 2, 3])], "max_lengths": [3]},  # tail ignored
    {"values": _V, "offsets": [torch.tensor([0, 2, 2, 7])], "max_lengths": [3]},  # past N, unread
    {"values": torch.zeros(0, 3), "offsets": [torch.tensor([0])], "max_lengths": [2]},  # B = 0
    {"values": torch.zeros(0, 3), "offsets": [torch.tensor([0, 2, 4])], "max_lengths": [2]},
    {
        "values": torch.arange(1.0, 7.0),
        "offsets": [torch.tensor([0, 2, 3]), torch.tensor([0, 1, 3, 6])],
        "max_lengths": [1, 3],
        "padding_value": 9.0,
    },  # fmt: skip
    {"values": torch.arange(10.0).view(2, 5).t(), "offsets": [_O], "max_lengths": [4]},
    {"values": _V.half(), "offsets": [_O.int()], "max_lengths": [3], "padding_value": 1e10},
    {"values": _V.bfloat16(), "offsets": [_O], "max_lengths": [3], "padding_value": 1.001},
    {"values": _V.int(), "offsets": [_O], "max_lengths": [3], "padding_value": -1.7},
    {"values": _V.view(5, 1, 1), "offsets": [_O], "max_lengths": [3]},  # middle dim folded
    {"values": _V, "offsets": [_O, _O], "max_lengths": [3, 3]},  # numel mismatch: raises
    {"values": _V.double(), "offsets": [_O], "max_lengths": [3]},  # dtype: raises
    {"values": _V, "offsets": [_O.short()], "max_lengths": [3]},  # index dtype: raises
    {"values": _V, "offsets": [_O], "max_lengths": [3, 3]},  # max_lengths size: raises
    {"values": _V, "offsets": [_O], "max_lengths": [-1]},  # negative length: raises
    {
        "values": _V,
        "offsets": [torch.tensor([0, 2, 3]), torch.tensor([0, 1, 3, 6], dtype=torch.int32)],
        "max_lengths": [2, 2],
    },  # mixed offsets dtypes: raises  # fmt: skip
)


def _fix_padding(args: dict[str, Any], name: str) -> dict[str, Any]:
    out = {k: v for k, v in args.items() if k != "max_lengths"}
    out["offsets"] = args["offsets"][0]
    out["max_sequence_length"] = args["max_lengths"][0]
    if name == "jagged_1d_to_dense":
        out["padding_value"] = int(args.get("padding_value", 0))
    else:
        out.pop("padding_value", None)
    return out


@st.composite
def one_dim_inputs(draw: st.DrawFn, name: str, dtypes: Sequence[torch.dtype] = DTYPES) -> dict:
    one = name == "jagged_1d_to_dense"
    args = draw(to_dense_inputs((1,), dtypes, "1" if one else "any"))
    if one:
        args["padding_value"] = draw(st.sampled_from([0, -1, 5]))
        args["max_lengths"] = [max(1, args["max_lengths"][0])]  # upstream: max_L > 0
    return _fix_padding(args, name)


def one_dim_budget(values: Any, offsets: Any, max_sequence_length: int,
                   padding_value: int = 0) -> Budget:  # fmt: skip
    return to_dense_budget(values, [offsets], [max_sequence_length])


# ---- stacked -------------------------------------------------------------------------------


@st.composite
def stacked_inputs(draw: st.DrawFn, ndim: int, dtypes: Sequence[torch.dtype] = DTYPES) -> dict:
    """Keyed lengths ``[T, B]``; values slices per key consistent, sometimes with a gap."""
    t, b = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    lengths = [[draw(st.integers(0, 5)) for _ in range(b)] for _ in range(t)]
    okp = [0]
    for row in lengths:
        okp.append(okp[-1] + sum(row) + (draw(st.integers(0, 1)) if draw(st.booleans()) else 0))
    n = okp[-1]
    dtype = draw(st.sampled_from(list(dtypes)))
    fill = "small_ints" if dtype.is_floating_point else "signed"
    shape = (n,) if ndim == 1 else (n, draw(st.integers(1, 3)))
    layout = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    values = with_layout(shape, dtype, fill, draw(st.integers(0, 2**31 - 1)), layout)
    ln = torch.tensor(lengths, dtype=draw(st.sampled_from([torch.int32, torch.int64])))
    ln = ln.view(t, b)
    args: dict[str, Any] = {
        "values": values,
        "lengths": TensorView(ln.t().contiguous(), lambda x: x.t(), "transposed")
        if draw(st.integers(0, 3)) == 0 else ln,
        "offset_per_key": okp,
        "max_lengths_per_key": [draw(st.integers(0, 4)) for _ in range(t)],
    }  # fmt: skip
    if ndim == 1 or draw(st.booleans()):
        args["padding_value"] = draw(st.sampled_from([0, -1, 3]))
    return args


def stacked_budget(values: Any, lengths: Any, offset_per_key: list[int],
                   max_lengths_per_key: list[int], padding_value: int = 0) -> Budget:  # fmt: skip
    return Budget(15 if validation_enabled() else 10, 0)


STACKED_EXAMPLES = (
    {"lengths": torch.tensor([[1, 2], [0, 3]]), "offset_per_key": [0, 0, 7]},  # empty key slice
    {"lengths": torch.tensor([[1, 2], [0, 3]]), "offset_per_key": [0, 1, 7]},  # reads past slice
    {"lengths": torch.tensor([[1, 2], [0, 3]]), "offset_per_key": [-1, 3, 7]},  # wraps
    {"lengths": torch.tensor([[3, -1], [0, 3]]), "offset_per_key": [0, 3, 7]},  # negative length
    {"lengths": torch.zeros(2, 0, dtype=torch.int64), "offset_per_key": [0, 0, 0]},  # B = 0
    {"lengths": torch.tensor([[1, 2], [0, 3]]), "offset_per_key": [0, 3, 7, 9]},  # long list
    {"lengths": torch.tensor([1, 2, 0, 3]), "offset_per_key": [0, 3, 7]},  # 1-D lengths: raises
)


def _stacked_examples(ndim: int) -> tuple[dict[str, Any], ...]:
    values = torch.arange(1.0, 8.0) if ndim == 1 else torch.arange(1.0, 15.0).view(7, 2)
    return tuple({"values": values, **e, "max_lengths_per_key": [2, 3], "padding_value": -1}
                 for e in STACKED_EXAMPLES)  # fmt: skip


# ---- specs ---------------------------------------------------------------------------------


def _one_dim_examples(name: str) -> tuple[dict[str, Any], ...]:
    values = _V.view(-1) if name == "jagged_1d_to_dense" else _V
    cases = [{**e, "values": values} for e in TO_DENSE_EXAMPLES[:4]]
    cases.append({**TO_DENSE_EXAMPLES[0], "max_lengths": [0]})  # 1d: max_L > 0 or raises
    return tuple(_fix_padding(e, name) for e in cases)


TO_JAGGED_EXAMPLES: tuple[dict[str, Any], ...] = (
    {"dense": torch.arange(1.0, 10.0).view(3, 3, 1), "x_offsets": [_O]},
    {"dense": torch.arange(1.0, 7.0).view(3, 2, 1), "x_offsets": [_O], "total_L": 7},  # trunc
    {"dense": torch.zeros(0, 3, 2), "x_offsets": [torch.tensor([0])]},  # empty batch
    {"dense": torch.arange(18.0).view(2, 3, 3).permute(1, 2, 0), "x_offsets": [_O]},
    {
        "dense": torch.arange(1.0, 9.0).view(2, 2, 2, 1),
        "x_offsets": [torch.tensor([0, 2, 3]), torch.tensor([0, 1, 3, 6])],
    },  # fmt: skip
    {"dense": torch.zeros(3, 3), "x_offsets": [_O]},  # rank: raises
    {"dense": torch.zeros(2, 3, 1), "x_offsets": [_O]},  # batch: raises
    {"dense": torch.zeros(3, 3, 1, dtype=torch.float64), "x_offsets": [_O]},  # dtype: raises
)


def _spec(name: str, inputs: Any, budget: Any, examples: tuple, grad: str | None,
          notes: str = "") -> list[OpSpec]:  # fmt: skip
    """The forward spec over every dtype, plus ``<name>.backward`` over float inputs."""
    specs = [OpSpec(name, getattr(F, name), inputs(DTYPES), EXACT, budget, examples=examples,
                    notes=notes)]  # fmt: skip
    if grad is not None:
        specs.append(OpSpec(f"{name}.backward", getattr(F, name), inputs(FLOATS), EXACT, budget,
                            backward=True, grad_inputs=(grad,)))  # fmt: skip
    return specs


def _j2d_bwd_inputs(dtypes: Sequence[torch.dtype]) -> st.SearchStrategy:
    return to_jagged_inputs(True, dtypes).map(
        lambda a: {"grad_output": a["dense"], "offsets": a["x_offsets"], "total_L": a["total_L"]}
    )


def _j2d_bwd_budget(grad_output: Any, offsets: Any, total_L: int) -> Budget:
    return to_jagged_budget(grad_output, offsets, total_L)


SPECS = [
    *_spec("jagged_to_padded_dense", lambda d: to_dense_inputs(dtypes=d), to_dense_budget,
           TO_DENSE_EXAMPLES, "values", "decreasing offsets give upstream's padding rows"),
    *_spec("jagged_to_padded_dense_forward", lambda d: to_dense_inputs(dtypes=d), to_dense_budget,
           TO_DENSE_EXAMPLES, "values"),
    *_spec("jagged_to_padded_dense_backward", _j2d_bwd_inputs, _j2d_bwd_budget, (
        {"grad_output": torch.arange(6.0).view(3, 2), "offsets": [_O], "total_L": 5},
        {"grad_output": torch.arange(9.0).view(3, 3, 1), "offsets": [_O], "total_L": 7},
        {"grad_output": torch.arange(8.0).view(4, 2), "offsets": [_O], "total_L": 5},  # raises
    ), None),
    *[spec for name in ("jagged_1d_to_dense", "jagged_2d_to_dense")
      for spec in _spec(name, lambda d, n=name: one_dim_inputs(n, d), one_dim_budget,
                        _one_dim_examples(name), "values")],
    *_spec("dense_to_jagged", lambda d: to_jagged_inputs(dtypes=d), to_jagged_budget,
           TO_JAGGED_EXAMPLES, "dense", "total_L omitted: 1 sync, as upstream"),
    *_spec("dense_to_jagged_forward", lambda d: to_jagged_inputs(dtypes=d), to_jagged_budget,
           TO_JAGGED_EXAMPLES, "dense"),
    *_spec("stacked_jagged_1d_to_dense", lambda d: stacked_inputs(1, d), stacked_budget,
           _stacked_examples(1), None),
    *_spec("stacked_jagged_2d_to_dense", lambda d: stacked_inputs(2, d), stacked_budget,
           _stacked_examples(2), "values", "outputs: views of one grid"),
]  # fmt: skip
