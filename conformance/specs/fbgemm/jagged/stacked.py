"""Specs for stacked (keyed) jagged -> dense: ``stacked_jagged_1d_to_dense`` and
``stacked_jagged_2d_to_dense`` (forward and, for the 2-D one, backward).

Oracle: upstream's CPU kernels, compared exactly.  Inputs: keyed lengths ``[T, B]`` (T = 0..4,
B = 0..4, sometimes a transposed view), each key's values slice consistent with its lengths,
sometimes with a gap after it; values contiguous, transposed or sliced, every upstream dtype;
examples for an empty key slice, reads past a key's slice (upstream reads on: the slice is a
view), negative slice bounds (they wrap, as ATen slices do), a negative length, B = 0, lists
longer than T + 1 (ignored) and 1-D lengths (upstream raises).

Budgets: the op's entry, for any number of keys (int64 values: its ``int64_values`` path).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, TensorView
from conformance.specs.fbgemm.jagged.inputs import DTYPES, forward_and_backward, int64_values
from conformance.strategies import with_layout


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
    if draw(st.integers(0, 3)) == 0:
        ln = TensorView(ln.t().contiguous(), lambda x: x.t(), "transposed")
    args: dict[str, Any] = {
        "values": values,
        "lengths": ln,
        "offset_per_key": okp,
        "max_lengths_per_key": [draw(st.integers(0, 4)) for _ in range(t)],
    }
    if ndim == 1 or draw(st.booleans()):
        args["padding_value"] = draw(st.sampled_from([0, -1, 3]))
    return args


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
    return tuple(
        {"values": values, **e, "max_lengths_per_key": [2, 3], "padding_value": -1}
        for e in STACKED_EXAMPLES
    )


def stacked_budget(values: Any, **_: Any) -> BudgetUse:
    """The main path (int32 lengths cost no more), or ``int64_values`` (the fill's scalar)."""
    return BudgetUse(path=int64_values(values)[0] if int64_values(values) else None)


SPECS = [
    *forward_and_backward(
        "stacked_jagged_1d_to_dense",
        lambda d: stacked_inputs(1, d),
        stacked_budget,
        _stacked_examples(1),
        None,
    ),
    *forward_and_backward(
        "stacked_jagged_2d_to_dense",
        lambda d: stacked_inputs(2, d),
        stacked_budget,
        _stacked_examples(2),
        "values",
        "outputs: views of one grid",
    ),
]
