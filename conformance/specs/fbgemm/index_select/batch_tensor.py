"""Spec for ``fbgemm::batch_index_select_dim0_tensor``, forward and backward, against upstream's
CPU kernel (``AutogradCPU``: its gradients are the oracle for ours on npu).

Inputs: ``batch_index_select_dim0``'s draws (``batch.py``: 0 to 5 tables, mixed or equal widths,
int32 / int64 indices, every dtype upstream's CPU kernel gathers, strided views, permuted or
not), with the three size lists given as int64 tensors on the CPU, as upstream's callers keep
them (tensors on the npu cost one sync: tests/fbgemm/index_select/).  Edge cases: the list
form's.  Tolerances: forward exact; gradients sum repeated rows (``SUMS``).  Budget: the op's
entry (the list form's costs), the path chosen as for the list form.
"""

from __future__ import annotations

from typing import Any

import torch

from conformance.harness import BudgetUse, OpSpec
from conformance.specs.fbgemm.index_select.batch import (
    _batch_budget,
    _batch_examples,
    batch_inputs,
)
from conformance.specs.fbgemm.index_select.common import EXACT, SUMS

F = torch.ops.fbgemm
OP = "fbgemm::batch_index_select_dim0_tensor"


def _call(
    inputs: torch.Tensor,
    indices: torch.Tensor,
    input_num_indices: list[int],
    input_rows: list[int],
    input_columns: list[int],
    permute_output_dim_0_1: bool = False,
) -> torch.Tensor:
    """The op with the size lists as int64 CPU tensors (built here, on both sides: the harness
    moves tensor arguments to npu, and the sizes stay on the host as upstream's callers keep
    them)."""
    lists = (input_num_indices, input_rows, input_columns)
    sizes = [torch.tensor(v, dtype=torch.int64) for v in lists]
    return F.batch_index_select_dim0_tensor(inputs, indices, *sizes, permute_output_dim_0_1)


def _budget(**kw: Any) -> BudgetUse:
    return BudgetUse(op=OP, path=_batch_budget(**kw).path)


SPECS = [
    OpSpec(
        "batch_index_select_dim0_tensor",
        _call,
        batch_inputs(),
        EXACT,
        _budget,
        examples=_batch_examples(),
    ),
    OpSpec(
        "batch_index_select_dim0_tensor[grad]",
        _call,
        batch_inputs(dtypes=(torch.float32, torch.float64, torch.float16)),
        SUMS,
        _budget,
        backward=True,
        grad_inputs=("inputs",),
    ),
]
