"""Specs for ``sll_jagged_softmax``, ``sll_jagged2_softmax`` and ``sll_jagged2_to_padded_dense``
(``softmax.py``, ``padded.py``).

``sll_jagged_softmax``: oracle a float64 reference (upstream's CPU kernel is
``jagged_softmax``, which leaves rows past ``max_seq_len`` and past the last offset
uninitialised); upstream still runs for errors, shapes and dtypes.  Tolerances as the jagged
family's ``jagged_softmax`` spec (one rounding forward; the backward's cancelling sums):
``rtol`` 1e-5 / 2**-8 / 2**-5 and ``atol`` 1e-5 / 5e-3 / 4e-2 for float32 / float16 / bfloat16.

``sll_jagged2_softmax``: oracle upstream (plain torch softmax per matrix), with every
``n_b <= max_seq_len`` (ours refuses the rest: tests/fbgemm/sll_attention/), transpose or not,
float64 too; same tolerances.  ``sll_jagged2_to_padded_dense``: oracle upstream, exact (a copy),
every dtype upstream takes, int32 / int64 offsets; its gradient (a copy back) exact too.

Inputs: B = 0..4, lengths 0..5 (empty rows frequent), ``max_seq_len`` -1..6 (truncation) for the
row softmax; values contiguous, transposed or sliced; a float64 ``x`` for the row softmax (upstream
raises, so must ours).  Budgets: the ops' entries (``int64_values`` for int64 padding).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.sll_attention.reference import jagged_softmax_reference
from conformance.strategies import with_layout

F = torch.ops.fbgemm
HALF = (torch.float32, torch.float16, torch.bfloat16)
ROUNDING = Compare(
    {
        torch.float32: Tol(rtol=1e-5, atol=1e-5),
        torch.float16: Tol(rtol=2**-8, atol=5e-3),
        torch.bfloat16: Tol(rtol=2**-5, atol=4e-2),
        torch.float64: Tol(rtol=1e-7, atol=1e-9),
    }
)
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (*HALF, torch.float64)})


def _offsets(lengths: list[int], dtype: torch.dtype, squares: bool = False) -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + (n * n if squares else n))
    return torch.tensor(out, dtype=dtype)


@st.composite
def _softmax_inputs(draw: st.DrawFn) -> dict[str, Any]:
    b, d = draw(st.integers(0, 4)), draw(st.integers(0, 3))
    lengths = [draw(st.integers(0, 5)) for _ in range(b)]
    odt = draw(st.sampled_from([torch.int32, torch.int64]))
    n = sum(lengths) + draw(st.sampled_from([0, 0, 2]))
    dtype = draw(st.sampled_from([*HALF, *HALF, torch.float64]))  # float64: upstream raises
    layout = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
    x = with_layout((n, d), dtype, "uniform", draw(st.integers(0, 2**16)), layout)
    return {"x": x, "x_offsets": _offsets(lengths, odt), "max_seq_len": draw(st.integers(-1, 6))}


@st.composite
def _square_inputs(draw: st.DrawFn, padded: bool = False) -> dict[str, Any]:
    b = draw(st.integers(0, 4))
    lengths = [draw(st.integers(0, 4)) for _ in range(b)]
    m = max(lengths, default=0) + draw(st.integers(0, 2))
    odt = draw(st.sampled_from([torch.int32, torch.int64]))
    ot = _offsets(lengths, odt, squares=True)
    e = int(ot[-1]) + draw(st.sampled_from([0, 0, 3]))
    seed = draw(st.integers(0, 2**16))
    if padded:
        dtype = draw(st.sampled_from([*HALF, torch.float64, torch.int32, torch.int64]))
        if dtype.is_floating_point:
            layout = draw(st.sampled_from(["contiguous", "sliced"]))
            values = with_layout((e,), dtype, "uniform", seed, layout)
        else:  # integers (upstream's plain-torch copy takes them)
            g = torch.Generator().manual_seed(seed)
            values = torch.randint(-50, 50, (e,), generator=g).to(dtype)
        pad = draw(st.sampled_from([0.0, -1.0, 2.5, 1e4]))
        return {"values": values, "offsets": ot, "max_length": m, "padding_value": pad}
    dtype = draw(st.sampled_from([*HALF, torch.float64]))
    x = with_layout((e,), dtype, "uniform", seed, draw(st.sampled_from(["contiguous", "sliced"])))
    return {
        "x": x,
        "offsets": _offsets(lengths, odt),
        "offsets_total": ot,
        "max_seq_len": m,
        "transpose": draw(st.booleans()),
    }


@st.composite
def _padded_grad_inputs(draw: st.DrawFn) -> dict[str, Any]:
    # one matrix at least: upstream's output (torch.full) has no grad_fn where none is copied
    kw = draw(_square_inputs(padded=True).filter(lambda k: k["offsets"][-1] > 0))
    v = kw["values"]
    base = v.view(v.base) if not isinstance(v, torch.Tensor) else v
    if not base.is_floating_point():
        kw["values"] = base.float()
    return kw


def _square_budget(offsets: torch.Tensor, **_: Any) -> BudgetUse:
    return BudgetUse(path="int32_offsets" if offsets.dtype == torch.int32 else None)


def _padded_budget(values: Any, **_: Any) -> BudgetUse:
    t = values if isinstance(values, torch.Tensor) else values.view(values.base)
    return BudgetUse(path="int64_values" if t.dtype == torch.int64 else None)


_O = torch.tensor([0, 2, 2, 5])
_OT = torch.tensor([0, 4, 4, 13])
SOFTMAX_EXAMPLES = (
    {"x": torch.arange(10.0).view(5, 2), "x_offsets": _O, "max_seq_len": 2},
    {"x": torch.ones(0, 2), "x_offsets": torch.tensor([0, 0, 0]), "max_seq_len": 3},
    {"x": torch.ones(5, 2), "x_offsets": torch.tensor([0]), "max_seq_len": 3},
)
SQUARE_EXAMPLES = (
    {
        "x": torch.arange(13.0),
        "offsets": _O,
        "offsets_total": _OT,
        "max_seq_len": 3,
        "transpose": False,
    },
    {
        "x": torch.arange(13.0),
        "offsets": _O,
        "offsets_total": _OT,
        "max_seq_len": 4,
        "transpose": True,
    },
    {
        "x": torch.ones(0),
        "offsets": torch.tensor([0]),
        "offsets_total": torch.tensor([0]),
        "max_seq_len": 2,
        "transpose": False,
    },
)
PADDED_EXAMPLES = (
    {"values": torch.arange(13.0), "offsets": _OT, "max_length": 3, "padding_value": -1.0},
    {"values": torch.arange(13), "offsets": _OT, "max_length": 4, "padding_value": 1.7},
    {"values": torch.ones(0), "offsets": torch.tensor([0]), "max_length": 2, "padding_value": 0.0},
)

SPECS = [
    OpSpec(
        "sll_jagged_softmax",
        F.sll_jagged_softmax,
        _softmax_inputs(),
        ROUNDING,
        BudgetUse(),
        reference=jagged_softmax_reference,
        backward=True,
        grad_inputs=("x",),
        examples=SOFTMAX_EXAMPLES,
        notes="rows past max_seq_len are 0 (upstream: uninitialised), so a float64 reference",
    ),
    OpSpec(
        "sll_jagged2_softmax",
        F.sll_jagged2_softmax,
        _square_inputs(),
        ROUNDING,
        _square_budget,
        backward=True,
        grad_inputs=("x",),
        examples=SQUARE_EXAMPLES,
    ),
    OpSpec(
        "sll_jagged2_to_padded_dense",
        F.sll_jagged2_to_padded_dense,
        _square_inputs(padded=True),
        EXACT,
        _padded_budget,
        examples=PADDED_EXAMPLES,
    ),
    OpSpec(
        "sll_jagged2_to_padded_dense.grad",
        F.sll_jagged2_to_padded_dense,
        _padded_grad_inputs(),
        EXACT,
        _padded_budget,
        backward=True,
        grad_inputs=("values",),
    ),
]
