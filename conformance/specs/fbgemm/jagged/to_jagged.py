"""Specs for dense -> jagged: ``dense_to_jagged`` (+ ``_forward``) and
``jagged_to_padded_dense_backward`` (the same scatter, of a gradient).

Oracle: upstream's CPU kernels, compared exactly (every output element is a copy of a dense
element or 0; gradients too).  Inputs (:func:`.inputs.to_jagged_inputs`): well-formed offsets of
1 to 3 jagged dims, dense contiguous, sliced or (one jagged dim) transposed, ``total_L`` given,
past the last offset, or omitted (then 1 sync, as upstream).  Writes past ``total_L`` make
upstream corrupt its heap and cannot run here (tests/fbgemm/jagged/ covers them).

Budgets: the op's entry, on its path for the number of jagged dims, a dense input no view
flattens to rows (copied once), and an omitted ``total_L`` (read back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse
from conformance.specs.fbgemm.jagged.inputs import (
    OFFSETS,
    forward_and_backward,
    rows_need_copy,
    to_jagged_inputs,
)
from fbgemm_npu.testing.jagged_inputs import dims_path

_O = OFFSETS


def to_jagged_budget(dense: Any, x_offsets: Sequence[Any], total_L: int | None = None) -> BudgetUse:
    strided = ("strided_dense",) if rows_need_copy(dense) else ()
    unsized = ("no_total_L",) if total_L is None else ()
    return BudgetUse(path=dims_path(len(x_offsets), *strided, *unsized), sized=total_L is not None)


def _backward_inputs(dtypes: Sequence[torch.dtype]) -> st.SearchStrategy:
    return to_jagged_inputs(True, dtypes).map(
        lambda a: {"grad_output": a["dense"], "offsets": a["x_offsets"], "total_L": a["total_L"]}
    )


def _backward_budget(grad_output: Any, offsets: Sequence[Any], total_L: int) -> BudgetUse:
    strided = ("strided_grad_output",) if rows_need_copy(grad_output) else ()
    return BudgetUse(path=dims_path(len(offsets), *strided))


TO_JAGGED_EXAMPLES: tuple[dict[str, Any], ...] = (
    {"dense": torch.arange(1.0, 10.0).view(3, 3, 1), "x_offsets": [_O]},
    {"dense": torch.arange(1.0, 7.0).view(3, 2, 1), "x_offsets": [_O], "total_L": 7},  # trunc
    {"dense": torch.zeros(0, 3, 2), "x_offsets": [torch.tensor([0])]},  # empty batch
    {"dense": torch.arange(18.0).view(2, 3, 3).permute(1, 2, 0), "x_offsets": [_O]},
    {
        "dense": torch.arange(1.0, 9.0).view(2, 2, 2, 1),
        "x_offsets": [torch.tensor([0, 2, 3]), torch.tensor([0, 1, 3, 6])],
    },
    {"dense": torch.zeros(3, 3), "x_offsets": [_O]},  # rank: raises
    {"dense": torch.zeros(2, 3, 1), "x_offsets": [_O]},  # batch: raises
    {"dense": torch.zeros(3, 3, 1, dtype=torch.float64), "x_offsets": [_O]},  # dtype: raises
)
BACKWARD_EXAMPLES: tuple[dict[str, Any], ...] = (
    {"grad_output": torch.arange(6.0).view(3, 2), "offsets": [_O], "total_L": 5},
    {"grad_output": torch.arange(9.0).view(3, 3, 1), "offsets": [_O], "total_L": 7},
    {"grad_output": torch.arange(8.0).view(4, 2), "offsets": [_O], "total_L": 5},  # raises
)

SPECS = [
    *forward_and_backward(
        "jagged_to_padded_dense_backward",
        _backward_inputs,
        _backward_budget,
        BACKWARD_EXAMPLES,
        None,
    ),
    *forward_and_backward(
        "dense_to_jagged",
        lambda d: to_jagged_inputs(dtypes=d),
        to_jagged_budget,
        TO_JAGGED_EXAMPLES,
        "dense",
        "total_L omitted: 1 sync, as upstream",
    ),
    *forward_and_backward(
        "dense_to_jagged_forward",
        lambda d: to_jagged_inputs(dtypes=d),
        to_jagged_budget,
        TO_JAGGED_EXAMPLES,
        "dense",
    ),
]
