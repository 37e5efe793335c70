"""``fbgemm::batch_index_select_dim0`` on npu, forward and backward.

The op selects rows of ``T`` tables stored back to back in one flat ``inputs`` (table ``t`` is
``(input_rows[t], input_columns[t])``) with one flat ``indices`` (``input_num_indices[t]`` per
table) and returns them flat, table after table; with ``permute_output_dim_0_1`` the output is
``[n, sum(input_columns)]`` flattened (row ``i`` of every table side by side).  Output element
``e`` of selected row ``k`` (table ``t``, column ``c``) reads ``inputs[O[t] + indices[k] * C[t] +
c]``; :func:`._tables.table_gather` builds that index with the same ops whatever ``T`` (no loop
over tables), per row when every table has the same width, per element otherwise.  The backward
scatters the output gradient back with one ``index_add_`` (upstream CPU's formula), reusing the
forward's gather index.

Semantics measured on upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0): the three lists have one entry
per table; every ``input_rows`` / ``input_columns`` entry is positive; every
``input_num_indices`` entry is positive (and all equal with ``permute_output_dim_0_1``);
``inputs.numel()`` and ``indices.numel()`` match the lists; any ``inputs`` dtype (upstream's CPU
kernel gathers any; its CUDA kernel takes float32 / float16 only); ``indices`` int32 / int64.
Upstream CPU refuses an ``inputs`` whose data is not 16-byte aligned (a restriction of its CUDA
kernel's vector loads): ours does not.  Empty lists with empty tensors give an empty output.

Launches: the gather index (a row index for one row width, cheaper permuted; an element index for
mixed widths, either layout) and one gather; the backward ``zeros`` and ``index_add_``.  The index
check (every index inside its table) adds its reductions, then is queued
(``FBGEMM_NPU_VALIDATE=0`` drops it).  Launches and syncs: ``BUDGETS`` in ``budgets.py``
(docs/ops.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    DataChecks,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.index_select import _tables
from fbgemm_npu.native.fbgemm.index_select import _utils as _u

__all__ = ["KERNELS", "batch_index_select_dim0_npu"]

BATCH_INDEX_SELECT_DIM0 = "fbgemm::batch_index_select_dim0"


def _check_args(
    inputs: object,
    indices: object,
    input_num_indices: Sequence[int],
    input_rows: Sequence[int],
    input_columns: Sequence[int],
    permute_output_dim_0_1: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    op = BATCH_INDEX_SELECT_DIM0
    inputs_t = check_ndim(op, "inputs", check_tensor(op, "inputs", inputs), (1,))
    indices_t = _u.check_index_tensor(op, "indices", indices)
    check_same_device(op, inputs=inputs_t, indices=indices_t)
    n_t = len(input_num_indices)
    for name, lst in (("input_rows", input_rows), ("input_columns", input_columns)):
        if len(lst) != n_t:
            raise ValueError(
                f"{op}: argument '{name}' must have one entry per table, like "
                f"input_num_indices ({n_t}), got {len(lst)}"
            )
        if any(v <= 0 for v in lst):
            raise ValueError(f"{op}: argument '{name}' must hold positive sizes, got {list(lst)}")
    if permute_output_dim_0_1:
        if n_t and (input_num_indices[0] <= 0 or len(set(input_num_indices)) != 1):
            raise ValueError(
                f"{op}: argument 'input_num_indices' must hold one positive count "
                "for every table when permute_output_dim_0_1 is true, got "
                f"{list(input_num_indices)}"
            )
    elif any(v <= 0 for v in input_num_indices):
        raise ValueError(
            f"{op}: argument 'input_num_indices' must hold positive counts, got "
            f"{list(input_num_indices)}"
        )
    size = sum(r * c for r, c in zip(input_rows, input_columns, strict=True))
    if inputs_t.numel() != size:
        raise ValueError(
            f"{op}: argument 'inputs' must hold sum(input_rows * input_columns) = "
            f"{size} elements, got {inputs_t.numel()}"
        )
    if indices_t.numel() != sum(input_num_indices):
        raise ValueError(
            f"{op}: argument 'indices' must hold sum(input_num_indices) = "
            f"{sum(input_num_indices)} entries, got {indices_t.numel()}"
        )
    return inputs_t, indices_t


def _gather_index(
    indices: torch.Tensor,
    input_num_indices: Sequence[int],
    input_rows: Sequence[int],
    input_columns: Sequence[int],
    permute_output_dim_0_1: bool,
) -> _tables.TableGather:
    """The gather index (data checks asserted before it is returned)."""
    checks = DataChecks(BATCH_INDEX_SELECT_DIM0) if validation_enabled() else None
    if permute_output_dim_0_1:
        plan = _tables.table_gather_permuted(
            indices, input_rows, input_columns, input_num_indices[0], checks, "indices"
        )
    else:
        plan = _tables.table_gather(
            indices, input_rows, input_columns, input_num_indices, checks, "indices"
        )
    if checks is not None:
        counts = input_num_indices
        if permute_output_dim_0_1:
            counts = [input_num_indices[0]] * len(input_rows)
        # before the checks are queued: a host refusal leaves none behind
        plan = _tables.inside_buffer(
            BATCH_INDEX_SELECT_DIM0, "indices", plan, input_rows, input_columns, counts
        )
        checks.assert_on_device()
    return plan


def batch_index_select_dim0_npu(
    inputs: torch.Tensor,
    indices: torch.Tensor,
    input_num_indices: Sequence[int],
    input_rows: Sequence[int],
    input_columns: Sequence[int],
    permute_output_dim_0_1: bool = False,
) -> torch.Tensor:
    """The selected rows of every table, flat (see the module docstring); ``inputs``' dtype.

    Launches: the gather index (:func:`._tables.table_gather` or
    :func:`._tables.table_gather_permuted`) and the gather.  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    args = (input_num_indices, input_rows, input_columns, permute_output_dim_0_1)
    inputs, indices = _check_args(inputs, indices, *args)
    if indices.numel() == 0:
        return inputs.new_empty((0,))
    plan = _gather_index(indices, *args)
    # reshape: always a view (a 1-D inputs, strided or not, splits into rows without a copy)
    return inputs.reshape(-1, plan.unit).index_select(0, plan.src).view(-1)


class _GatherUnits(torch.autograd.Function):
    """``out = x.view(-1, unit).index_select(0, src)`` flattened; the backward scatters:
    ``grad_x = zeros(x.numel()).view(-1, unit).index_add_(0, src, grad)``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, src: torch.Tensor, unit: int
    ) -> torch.Tensor:
        ctx.save_for_backward(src)
        ctx.unit, ctx.numel = unit, x.numel()
        return x.reshape(-1, unit).index_select(0, src).view(-1)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, None, None]:
        (src,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        unit = ctx.unit
        grad_x = grad.new_zeros((ctx.numel,))
        grad_x.view(-1, unit).index_add_(0, src, grad.reshape(-1, unit))
        return grad_x, None, None


def _batch_index_select_dim0_autograd(
    inputs: torch.Tensor,
    indices: torch.Tensor,
    input_num_indices: Sequence[int],
    input_rows: Sequence[int],
    input_columns: Sequence[int],
    permute_output_dim_0_1: bool = False,
) -> torch.Tensor:
    """AutogradPrivateUse1: differentiable in ``inputs``; without a tracked gradient it goes
    straight to the PrivateUse1 kernel."""
    args = (input_num_indices, input_rows, input_columns, permute_output_dim_0_1)
    if not needs_grad(inputs):
        return below_autograd(torch.ops.fbgemm.batch_index_select_dim0, inputs, indices, *args)
    _, indices_t = _check_args(inputs, indices, *args)
    if indices_t.numel() == 0:
        plan = _tables.TableGather(torch.zeros(0, dtype=torch.int64, device=inputs.device), 1)
    else:
        plan = below_autograd(_gather_index, indices_t, *args)
    return _GatherUnits.apply(inputs, plan.src, plan.unit)


KERNELS = {
    BATCH_INDEX_SELECT_DIM0: {
        "PrivateUse1": batch_index_select_dim0_npu,
        "AutogradPrivateUse1": _batch_index_select_dim0_autograd,
    },
}
