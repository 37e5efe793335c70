"""Spec for ``fbgemm::batch_index_select_dim0``, forward and backward, against upstream's CPU
kernel (which registers ``AutogradCPU``: its gradients are the oracle for ours on npu).

Inputs: 0 to 5 tables of 1 to 6 rows and 1 to 5 columns (all tables of one width half the time:
the row-gather path; mixed widths: the element path), 1 to 6 indices per table with repeats,
int32 / int64 indices, inputs of float32 / float16 / bfloat16 / float64 / int32 / int64
(upstream's CPU kernel gathers any dtype), contiguous or a strided view (every other element: the
16-byte alignment upstream's CPU kernel demands still holds), with and without
``permute_output_dim_0_1``.  Edge cases: no tables; one table of one row; a table with no indices
(upstream refuses).

Tolerances: forward outputs are copies (exact); gradients sum repeated rows (``SUMS``).  Budget:
the op's ``BUDGETS`` entry; the row widths and ``permute_output_dim_0_1`` select the path.
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
    by_name,
    seed,
)
from conformance.strategies import values as fill_values

F = torch.ops.fbgemm
DTYPES = (*FLOATS, torch.float64, torch.int32, torch.int64)
BIS = "fbgemm::batch_index_select_dim0"


def fill(dtype: torch.dtype) -> str:
    """How the specs of the table selects fill values of ``dtype``."""
    return "small_ints" if dtype.is_floating_point else "signed"


@st.composite
def batch_inputs(draw: st.DrawFn, dtypes: tuple = DTYPES) -> dict:
    n_t = draw(st.integers(0, 5))
    permute = draw(st.booleans())
    rows = [draw(st.integers(1, 6)) for _ in range(n_t)]
    if draw(st.booleans()):
        cols = [draw(st.integers(1, 5))] * n_t
    else:
        cols = [draw(st.integers(1, 5)) for _ in range(n_t)]
    n_common = draw(st.integers(1, 6))
    counts = [n_common if permute else draw(st.integers(1, 6)) for _ in range(n_t)]
    gen = torch.Generator().manual_seed(seed(draw))
    indices = [torch.randint(0, r, (n,), generator=gen) for r, n in zip(rows, counts, strict=True)]
    dtype = draw(st.sampled_from(dtypes))
    size = sum(r * c for r, c in zip(rows, cols, strict=True))
    flat = fill_values((size,), dtype, fill(dtype), seed(draw))
    inputs: Any = flat
    if draw(st.booleans()):
        inputs = TensorView(
            torch.stack([flat, flat], 1).reshape(-1), lambda x: x[::2], "every other"
        )
    idx = torch.cat(indices) if indices else torch.zeros(0, dtype=torch.int64)
    return {
        "inputs": inputs,
        "indices": idx.to(draw(st.sampled_from(INDEX_DTYPES))),
        "input_num_indices": counts,
        "input_rows": rows,
        "input_columns": cols,
        "permute_output_dim_0_1": permute,
    }


def _batch_budget(**kw: Any) -> BudgetUse:
    """Mixed widths: the main path (permuted: its own, one launch less); one width: the row
    gather.  A strided ``inputs`` views as rows of any width (a 1-D view splits): no copy, no
    other path."""
    if len(set(kw["input_columns"])) > 1:
        return BudgetUse(op=BIS, path="permuted" if kw.get("permute_output_dim_0_1") else None)
    return BudgetUse(
        op=BIS, path="one_width_permuted" if kw.get("permute_output_dim_0_1") else "one_width"
    )


def _batch_examples() -> tuple[dict, ...]:
    two = {"inputs": torch.arange(18.0), "input_rows": [3, 4], "input_columns": [2, 3]}
    return (
        {**two, "indices": torch.tensor([2, 0, 1, 3, 3]), "input_num_indices": [2, 3]},
        {
            **two,
            "indices": torch.tensor([2, 0, 1, 3]),
            "input_num_indices": [2, 2],
            "permute_output_dim_0_1": True,
        },
        {
            "inputs": torch.tensor([5.0]),
            "indices": torch.tensor([0, 0]),
            "input_num_indices": [2],
            "input_rows": [1],
            "input_columns": [1],
        },
        {
            "inputs": torch.zeros(0),
            "indices": torch.zeros(0, dtype=torch.int64),
            "input_num_indices": [],
            "input_rows": [],
            "input_columns": [],
        },
        # upstream refuses a table without indices (and unequal counts when permuted)
        {**two, "indices": torch.tensor([1, 2, 3]), "input_num_indices": [0, 3]},
        {
            **two,
            "indices": torch.tensor([1, 2, 3]),
            "input_num_indices": [1, 2],
            "permute_output_dim_0_1": True,
        },
    )


SPECS = [
    OpSpec(
        "batch_index_select_dim0",
        by_name(F.batch_index_select_dim0),
        batch_inputs(),
        EXACT,
        _batch_budget,
        examples=_batch_examples(),
    ),
    OpSpec(
        "batch_index_select_dim0[grad]",
        by_name(F.batch_index_select_dim0),
        batch_inputs(dtypes=(torch.float32, torch.float64, torch.float16)),
        SUMS,
        _batch_budget,
        backward=True,
        grad_inputs=("inputs",),
    ),
]
