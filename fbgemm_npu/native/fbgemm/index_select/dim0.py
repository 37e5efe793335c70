"""``fbgemm::index_select_dim0`` on npu, forward and backward: ``input.index_select(0, indices)``.

Semantics, measured on upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0): any ``input`` dtype and
rank (0-D included: one row), ``indices`` 1-D int32 / int64 inside ``[0, input.size(0))``;
``consecutive_range_start`` / ``consecutive_range_length`` / ``skip_indices_sorting_fwd`` are
hints of upstream's CUDA kernel, which its CPU kernel ignores (so do we, whatever their values).
An index out of range is an error naming the op and ``indices``: a data check, queued by default
(``native/_checks.py``), with the indices clamped into range first so the gather stays in
memory whatever the data.  Upstream registers an autograd function for CUDA: here
``AutogradPrivateUse1``, backward ``grad_input = zeros_like(input).index_add_(0, indices, grad)``
(repeated indices add up).  Launches: the gather (checks: ``aminmax``, ``clamp``, the queued
check); backward ``zeros`` + ``index_add_``.  Budgets: ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import DataChecks, check_same_device, check_tensor
from fbgemm_npu.native.fbgemm.index_select import _utils as _u

__all__ = ["KERNELS", "index_select_dim0_npu"]

INDEX_SELECT_DIM0 = "fbgemm::index_select_dim0"


def _checked(input: object, indices: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``input`` and ``indices`` checked (types, dtype, rank, device), and the indices made safe
    to gather with: clamped into ``[0, rows)`` and the range check queued (checks on)."""
    op = INDEX_SELECT_DIM0
    x = check_tensor(op, "input", input)
    idx = _u.check_index_tensor(op, "indices", indices)
    check_same_device(op, input=x, indices=idx)
    rows = x.size(0) if x.dim() > 0 else 1
    if rows == 0 and idx.numel() > 0:  # no row to select: bad whatever the indices hold
        raise ValueError(f"{op}: argument 'indices' selects from an input with 0 rows")
    checks = DataChecks(op)
    src = _u.index_range(checks, idx, rows, "indices")
    checks.assert_on_device()
    return x, src


def index_select_dim0_npu(
    input: torch.Tensor,
    indices: torch.Tensor,
    consecutive_range_start: int | None = 0,
    consecutive_range_length: int | None = 0,
    skip_indices_sorting_fwd: bool | None = None,
) -> torch.Tensor:
    """``out[k] = input[indices[k]]``: ``(len(indices), *input.shape[1:])``, ``input``'s dtype.

    Launches: ``index_select`` (checks on: ``aminmax``, ``clamp`` and the queued check first).
    """
    x, src = _checked(input, indices)
    return x.index_select(0, src)


class _Gather(torch.autograd.Function):
    """``out = x.index_select(0, src)``; backward ``zeros_like(x).index_add_(0, src, grad)``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, src: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(src)
        ctx.x_shape = x.shape
        return x.index_select(0, src)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, None]:
        (src,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None
        return grad.new_zeros(ctx.x_shape).index_add_(0, src, grad), None


def _index_select_dim0_autograd(
    input: torch.Tensor,
    indices: torch.Tensor,
    consecutive_range_start: int | None = 0,
    consecutive_range_length: int | None = 0,
    skip_indices_sorting_fwd: bool | None = None,
) -> torch.Tensor:
    """AutogradPrivateUse1: differentiable in ``input``; without a tracked gradient it goes
    straight to the PrivateUse1 kernel."""
    hints = (consecutive_range_start, consecutive_range_length, skip_indices_sorting_fwd)
    if not needs_grad(input):
        return below_autograd(torch.ops.fbgemm.index_select_dim0, input, indices, *hints)
    x, src = below_autograd(_checked, input, indices)
    return _Gather.apply(x, src)


KERNELS = {
    INDEX_SELECT_DIM0: {
        "PrivateUse1": index_select_dim0_npu,
        "AutogradPrivateUse1": _index_select_dim0_autograd,
    },
}
