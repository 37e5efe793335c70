"""Specs for the jagged index-select ops: ``fbgemm::jagged_index_select``,
``jagged_index_select_2d_forward_v2`` and ``jagged_index_add_2d_forward_v2``.

Inputs: ``values`` float32 / float16 / bfloat16 / int32 / int64 rows (1 to 4 columns; 0 columns
sometimes), sometimes non-contiguous (transposed storage or every other row); ``lengths`` with
zero-length segments and empty batches; ``indices`` int32 / int64 with repeats and drops; the
output size omitted, given exactly, or given smaller (a truncated output); ``values`` longer than
the lengths' sum (an ignored tail).  Edge cases in ``examples``: empty selections (upstream raises
without a size, returns empty with size 0), zero-length rows only, one long row.

Oracles: upstream's CPU kernels (exact: every output is a copy, except the adds).  Gradients:
``[grad]`` specs on float values; repeated segments make them sums (``SUMS`` tolerances: upstream
adds in the values' dtype in a thread-dependent order, ours in another order).  Budgets: the op's
``BUDGETS`` entry; the output size given or not selects the path and the syncs.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, OpSpec, TensorView
from conformance.specs.fbgemm.index_select.common import (
    EXACT,
    FLOATS,
    INDEX_DTYPES,
    SUMS,
    VALUE_DTYPES,
    by_name,
    seed,
    stored,
)
from conformance.strategies import values as fill_values

F = torch.ops.fbgemm


def _rows(draw: st.DrawFn, n: int, cols: int, dtype: torch.dtype) -> torch.Tensor | TensorView:
    """``(n, cols)`` values, contiguous or a non-contiguous view of the same values."""
    fill = draw(
        st.sampled_from(("small_ints", "uniform") if dtype.is_floating_point else ("signed",))
    )
    t = fill_values((n, cols), dtype, fill, seed(draw))
    layout = draw(st.sampled_from(("contiguous", "contiguous", "transposed", "every_other")))
    if layout == "transposed":
        return TensorView(t.t().contiguous(), lambda x: x.t(), "transposed")
    if layout == "every_other":
        base = torch.zeros((2 * n + 1, cols), dtype=dtype)
        base[1::2] = t
        return TensorView(base, lambda x: x[1::2], "rows [1::2]")
    return t


def _jagged(draw: st.DrawFn, max_segments: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """(lengths int64, indices int64) of a valid selection; repeats and drops included."""
    b_in = draw(st.integers(1, max_segments))
    gen = torch.Generator().manual_seed(seed(draw))
    high = draw(st.sampled_from((1, 4, 12)))
    lengths = torch.randint(0, high, (b_in,), generator=gen)
    if draw(st.integers(0, 4)) == 0:
        lengths.zero_()
    b_out = draw(st.integers(1, 10))
    indices = torch.randint(0, b_in, (b_out,), generator=gen)
    return lengths, indices


@st.composite
def select_inputs(draw: st.DrawFn, v2: bool = False, dtypes: tuple = VALUE_DTYPES) -> dict:
    """A ``jagged_index_select`` call (or the v2 op's, with inclusive int64 offsets)."""
    lengths, indices = _jagged(draw)
    dtype = draw(st.sampled_from(dtypes))
    cols = draw(st.sampled_from((1, 2, 3, 4, 0) if not v2 else (1, 2, 4)))
    tail = draw(st.sampled_from((0, 0, 2)))
    n = int(lengths.sum()) + tail
    out_total = int(lengths[indices].sum())
    args: dict[str, Any] = {"values": _rows(draw, n, cols, dtype)}
    idx_dtype = draw(st.sampled_from(INDEX_DTYPES))
    if v2:
        args["indices"] = indices.to(idx_dtype)
        args["input_offsets"] = lengths.cumsum(0)
        args["output_offsets"] = lengths[indices].cumsum(0)
    else:
        args["lengths"] = lengths.to(draw(st.sampled_from(INDEX_DTYPES)))
        args["indices"] = indices.to(idx_dtype)
    size = draw(st.sampled_from(("omitted", "exact", "smaller")))
    if size == "exact":
        args["num_dense_output_rows"] = out_total
    elif size == "smaller":
        args["num_dense_output_rows"] = draw(st.integers(0, out_total))
    return args


@st.composite
def add_inputs(draw: st.DrawFn, dtypes: tuple = VALUE_DTYPES) -> dict:
    """A ``jagged_index_add_2d_forward_v2`` call as the select's backward makes it."""
    lengths, indices = _jagged(draw)
    dtype = draw(st.sampled_from(dtypes))
    out_lengths = lengths[indices]
    m = int(out_lengths.sum())
    return {
        "values": _rows(draw, m, draw(st.sampled_from((1, 2, 4))), dtype),
        "indices": indices.to(draw(st.sampled_from(INDEX_DTYPES))),
        "input_offsets": out_lengths.cumsum(0),
        "output_offsets": lengths.cumsum(0),
        "num_output_rows": int(lengths.sum()) + draw(st.sampled_from((0, 0, 2))),
        "num_dense_input_rows": m,
    }


def _select_examples() -> tuple[dict, ...]:
    v = torch.arange(12.0).view(6, 2)
    i64 = torch.int64
    return (
        {"values": v, "lengths": torch.tensor([1, 2, 3]), "indices": torch.tensor([2, 0, 2])},
        {"values": v, "lengths": torch.tensor([0, 0, 0]), "indices": torch.tensor([1, 2])},
        {
            "values": v,
            "lengths": torch.tensor([6]),
            "indices": torch.tensor([0, 0], dtype=i64),
            "num_dense_output_rows": 7,
        },
        {
            "values": v,
            "lengths": torch.tensor([1, 2, 3]),
            "indices": torch.zeros(0, dtype=i64),
            "num_dense_output_rows": 0,
        },
        # upstream raises: no indices and no size; 1-D values
        {"values": v, "lengths": torch.tensor([1, 2, 3]), "indices": torch.zeros(0, dtype=i64)},
        {"values": v[:, 0], "lengths": torch.tensor([1, 2, 3]), "indices": torch.tensor([1])},
    )


def _select_budget(op: str) -> Any:
    """The main path with ``num_dense_output_rows`` given; without, the size is read back."""

    def use(**kw: Any) -> BudgetUse:
        sized = kw.get("num_dense_output_rows") is not None
        return BudgetUse(op=op, path=None if sized else "no_num_dense_output_rows", sized=sized)

    return use


def _add_budget(**kw: Any) -> BudgetUse:
    """int64 values add with an int64 ``index_add_`` (the AI CPU's: budgets.py says so)."""
    int64 = stored(kw["values"]).dtype == torch.int64
    return BudgetUse(path="int64_values" if int64 else None)


JIS = "fbgemm::jagged_index_select"
V2 = "fbgemm::jagged_index_select_2d_forward_v2"
SPECS = [
    OpSpec(
        "jagged_index_select",
        by_name(F.jagged_index_select),
        select_inputs(),
        EXACT,
        _select_budget(JIS),
        examples=_select_examples(),
    ),
    OpSpec(
        "jagged_index_select[grad]",
        by_name(F.jagged_index_select),
        select_inputs(dtypes=FLOATS),
        SUMS,
        _select_budget(JIS),
        backward=True,
        grad_inputs=("values",),
    ),
    OpSpec(
        "jagged_index_select_2d_forward_v2",
        by_name(F.jagged_index_select_2d_forward_v2),
        select_inputs(v2=True),
        EXACT,
        _select_budget(V2),
    ),
    OpSpec(
        "jagged_index_add_2d_forward_v2",
        by_name(F.jagged_index_add_2d_forward_v2),
        add_inputs(),
        SUMS,
        _add_budget,
    ),
]
