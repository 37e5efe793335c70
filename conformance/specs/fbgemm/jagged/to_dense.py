"""Specs for jagged -> padded dense: ``jagged_to_padded_dense`` (+ ``_forward``),
``jagged_1d_to_dense`` and ``jagged_2d_to_dense``.

Oracle: upstream's CPU kernels, compared exactly (every output element is a copy of a value or
the padding value; every gradient a copy).  Inputs: :mod:`.inputs`, plus padding values 0,
negative, fractional (truncated for ints) and past float16's range (inf), given and omitted.
Inputs that make upstream read out of bounds cannot run here (tests/fbgemm/jagged/ covers them),
nor can padding values whose integer conversion is undefined behaviour in C++.

Budgets: the op's entry, on its path for the number of jagged dims (and ``int64_values``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse
from conformance.specs.fbgemm.jagged.inputs import (
    DTYPES,
    OFFSETS,
    dims_budget,
    forward_and_backward,
    int64_values,
    to_dense_inputs,
)

# ---- edge cases ----------------------------------------------------------------------------

_O = OFFSETS
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
    },
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
    },  # mixed offsets dtypes: raises
)


def to_dense_budget(
    values: Any, offsets: Sequence[Any], max_lengths: Sequence[int], padding_value: float = 0.0
) -> BudgetUse:
    return dims_budget(offsets, *int64_values(values))


def one_dim_budget(values: Any, offsets: Any, **_: Any) -> BudgetUse:
    return dims_budget([offsets], *int64_values(values))


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


def _one_dim_examples(name: str) -> tuple[dict[str, Any], ...]:
    values = _V.view(-1) if name == "jagged_1d_to_dense" else _V
    cases = [{**e, "values": values} for e in TO_DENSE_EXAMPLES[:4]]
    cases.append({**TO_DENSE_EXAMPLES[0], "max_lengths": [0]})  # 1d: max_L > 0 or raises
    return tuple(_fix_padding(e, name) for e in cases)


SPECS = [
    *forward_and_backward(
        "jagged_to_padded_dense",
        lambda d: to_dense_inputs(dtypes=d),
        to_dense_budget,
        TO_DENSE_EXAMPLES,
        "values",
        "decreasing offsets give upstream's padding rows",
    ),
    *forward_and_backward(
        "jagged_to_padded_dense_forward",
        lambda d: to_dense_inputs(dtypes=d),
        to_dense_budget,
        TO_DENSE_EXAMPLES,
        "values",
    ),
    *[
        spec
        for name in ("jagged_1d_to_dense", "jagged_2d_to_dense")
        for spec in forward_and_backward(
            name,
            lambda d, n=name: one_dim_inputs(n, d),
            one_dim_budget,
            _one_dim_examples(name),
            "values",
        )
    ],
]
