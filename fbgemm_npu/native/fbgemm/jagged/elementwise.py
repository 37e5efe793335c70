"""Jagged-dense elementwise ops with a dense or jagged-values output on npu:
``fbgemm::jagged_dense_elementwise_add`` and ``_mul`` (+ ``_forward``, ``_backward``); the adds
with a jagged output are :mod:`.jagged_output`.

Math, with ``to_dense`` / ``to_jagged`` as in :mod:`.jagged` (``x`` jagged, ``y`` dense
``[B, L_1..L_k, D]``, ``T = x_values.size(0)``)::

    add                    = to_dense(x, max_lengths=y.shape[1:-1], padding 0) + y
    mul                    = x_values * to_jagged(y, T)

which is upstream's CPU formulation, so dtype promotion and broadcasting follow torch's rules as
upstream's do (shapes that do not broadcast raise naming the op and both arguments).  Value rows
no position covers (truncated, or after the last offset) get ``y = 0``.  Upstream CPU sizes
``to_jagged`` by ``x_offsets[-1].max()`` (a host sync) and raises when that differs from ``T``;
CUDA, like us, sizes it by ``T`` (no sync) and leaves rows after the last offset uncovered.
Offsets that would touch rows outside ``[0, T)`` raise.

Dtypes: float32, float16, bfloat16, int32, int64 (upstream's), mixed dtypes promoted as torch
does; ``jagged_dense_elementwise_mul_backward`` also float64 (upstream CPU) and bfloat16 (CUDA).

Launches: the dense index of :mod:`.jagged` (one level more per further jagged dim), one gather
or scatter and the elementwise op, plus the on-device data check (``FBGEMM_NPU_VALIDATE=0`` drops
it); ``mul`` returns copies of the offsets (a ``clone`` per jagged dim).  Output strides are
upstream's Meta kernels' (``y``'s for ``add`` and for ``mul_backward``'s ``y`` gradient).
Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).

Autograd (upstream registers it for ``mul``; ``add``'s CPU kernel still records gradients through
its inner to_dense, CUDA's too): d/dx of add is to_jagged(grad), d/dy is grad; mul uses
``jagged_dense_elementwise_mul_backward``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import check_dtype, check_ndim, check_tensor
from fbgemm_npu.native.fbgemm.jagged._elementwise import broadcast, fresh_offsets, plus_jagged
from fbgemm_npu.native.fbgemm.jagged._utils import (
    WRITE_CHECK,
    check_offsets,
    check_values,
    checked_dense_index,
)
from fbgemm_npu.native.fbgemm.jagged.jagged_output import (  # re-exported: the elementwise ops
    jagged_dense_dense_elementwise_add_jagged_output_forward_npu,
    jagged_dense_dense_elementwise_add_jagged_output_npu,
    jagged_dense_elementwise_add_jagged_output_npu,
)
from fbgemm_npu.native.fbgemm.jagged.to_dense import to_dense
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows

__all__ = [
    "KERNELS",
    "jagged_dense_dense_elementwise_add_jagged_output_forward_npu",
    "jagged_dense_dense_elementwise_add_jagged_output_npu",
    "jagged_dense_elementwise_add_jagged_output_npu",
    "jagged_dense_elementwise_add_npu",
    "jagged_dense_elementwise_mul_backward_npu",
    "jagged_dense_elementwise_mul_forward_npu",
    "jagged_dense_elementwise_mul_npu",
]

_F = torch.ops.fbgemm
JAGGED_DENSE_ELEMENTWISE_ADD = "fbgemm::jagged_dense_elementwise_add"
JAGGED_DENSE_ELEMENTWISE_MUL = "fbgemm::jagged_dense_elementwise_mul"
JAGGED_DENSE_ELEMENTWISE_MUL_FORWARD = "fbgemm::jagged_dense_elementwise_mul_forward"
JAGGED_DENSE_ELEMENTWISE_MUL_BACKWARD = "fbgemm::jagged_dense_elementwise_mul_backward"
_GRAD_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def jagged_dense_elementwise_add_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> torch.Tensor:
    """``to_dense(x, y.shape[1:-1], 0) + y`` (dense output)."""
    op = JAGGED_DENSE_ELEMENTWISE_ADD
    x = check_values(op, "x_values", x_values)
    y = check_values(op, "y", check_tensor(op, "y", y))
    if y.device != x.device:
        raise RuntimeError(
            f"{op}: arguments 'x_values' ({x.device}) and 'y' ({y.device}) must be on the same "
            "device"
        )
    if y.dim() - 2 != len(x_offsets):
        raise ValueError(
            f"{op}: argument 'y' must have {len(x_offsets) + 2} dims for {len(x_offsets)} "
            f"jagged dim(s), got shape {tuple(y.shape)}"
        )
    dense = to_dense(op, x, x_offsets, y.shape[1:-1], 0.0, "x_values", "x_offsets")
    if broadcast(op, dense.shape, "x_values", y.shape, "y") != y.shape:
        return dense + y  # x's D broadcast over y's 1, or y's batch of 1 over B
    # Upstream's Meta kernel gives y's strides (empty_like(y)): written into them, no launch more.
    out = torch.empty_like(y, dtype=torch.result_type(dense, y))
    return torch.add(dense, y, out=out)


def jagged_dense_elementwise_mul_forward_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> torch.Tensor:
    """``x_values * to_jagged(y, x_values.size(0))``."""
    x, jy = plus_jagged(JAGGED_DENSE_ELEMENTWISE_MUL_FORWARD, x_values, x_offsets, y)
    return x * jy


def jagged_dense_elementwise_mul_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(mul_forward(x, offsets, y), fresh copies of x_offsets)``."""
    x, jy = plus_jagged(JAGGED_DENSE_ELEMENTWISE_MUL, x_values, x_offsets, y)
    return x * jy, fresh_offsets(x_offsets)


def jagged_dense_elementwise_mul_backward_npu(
    grad_output: torch.Tensor,
    x_offsets: list[torch.Tensor],
    y: torch.Tensor,
    x_values: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grad * to_jagged(y), to_dense(grad * x_values, padding 0))``, sharing one index.

    Rows no position covers get ``grad * 0`` (upstream CPU writes a plain 0, CUDA ``grad * 0``:
    they differ only for a non-finite gradient there).
    """
    op = JAGGED_DENSE_ELEMENTWISE_MUL_BACKWARD
    grad = check_dtype(
        op, "grad_output", check_tensor(op, "grad_output", grad_output), _GRAD_DTYPES
    )
    x = check_dtype(op, "x_values", check_tensor(op, "x_values", x_values), _GRAD_DTYPES)
    offsets = check_offsets(op, "x_offsets", x_offsets, grad.device)
    y = check_dtype(op, "y", check_tensor(op, "y", y), _GRAD_DTYPES)
    check_ndim(op, "y", y, (len(offsets) + 2,))
    if y.size(0) != offsets[0].numel() - 1:
        raise ValueError(
            f"{op}: argument 'y' has batch size {y.size(0)} but 'x_offsets[0]' describes "
            f"{offsets[0].numel() - 1} rows"
        )
    if not (grad.dtype == x.dtype == y.dtype):
        raise ValueError(f"{op}: 'grad_output', 'x_values' and 'y' must share one dtype")
    if grad.dim() != 2 or grad.shape != x.shape or grad.size(1) != y.size(-1):
        raise ValueError(
            f"{op}: 'grad_output' {tuple(grad.shape)} and 'x_values' {tuple(x.shape)} must be "
            f"[T, D] with D = y.size(-1) = {y.size(-1)}"
        )
    if x.device != y.device or x.device != grad.device:
        raise RuntimeError(f"{op}: 'grad_output', 'x_values' and 'y' must be on one device")
    total, d = grad.shape
    if y.numel() == 0:
        return torch.zeros_like(grad), torch.zeros_like(y)
    what = f"argument 'x_offsets': {WRITE_CHECK}"
    index = checked_dense_index(op, offsets, y.shape[1:-1], total, what, write=True)
    if index is None:
        return torch.zeros_like(grad), torch.zeros_like(y)
    rows, _ = index
    flat_rows = rows.reshape(-1)
    grad_x = grad * scatter_rows(y.reshape(-1, d), flat_rows, total)
    prod = grad.new_empty((total + 1, d))  # row `total`, read by padding positions, is 0
    torch.mul(grad, x, out=prod[:total])
    prod[total].zero_()
    grad_y = prod.index_select(0, flat_rows).view(y.shape)
    # Upstream's Meta kernel gives y's strides (empty_like(y)); a permuted y costs one copy.
    like_y = torch.empty_like(y)
    return grad_x, (grad_y if like_y.is_contiguous() else like_y.copy_(grad_y))


# ----------------------------------------------------------------------------------- autograd


class _Add(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, *offsets):  # type: ignore[override]
        ctx.save_for_backward(*offsets)
        ctx.total = x.size(0)
        return below_autograd(_F.jagged_dense_elementwise_add, x, list(offsets), y)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        offsets = list(ctx.saved_tensors)
        gx = _F.jagged_to_padded_dense_backward(grad, offsets, ctx.total)
        return (gx, grad, *([None] * len(offsets)))


class _Mul(torch.autograd.Function):
    """``(x * to_jagged(y), *fresh offsets)``; the offsets copies are not differentiable."""

    @staticmethod
    def forward(ctx, x, y, *offsets):  # type: ignore[override]
        ctx.save_for_backward(x, y, *offsets)
        out, fresh = below_autograd(_F.jagged_dense_elementwise_mul, x, list(offsets), y)
        ctx.mark_non_differentiable(*fresh)
        return (out, *fresh)

    @staticmethod
    def backward(ctx, grad, *_):  # type: ignore[override]
        x, y, *offsets = ctx.saved_tensors
        # Mixed input dtypes: the gradient has the promoted dtype (upstream's backward raises).
        gx, gy = _F.jagged_dense_elementwise_mul_backward(
            grad, offsets, y.to(grad.dtype), x.to(grad.dtype)
        )
        return (gx, gy, *([None] * len(offsets)))


def _add_autograd(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> torch.Tensor:
    if needs_grad(x_values, y):
        return _Add.apply(x_values, y, *x_offsets)
    return below_autograd(_F.jagged_dense_elementwise_add, x_values, x_offsets, y)


def _mul_autograd(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    if needs_grad(x_values, y):
        out, *fresh = _Mul.apply(x_values, y, *x_offsets)
        return out, fresh
    return below_autograd(_F.jagged_dense_elementwise_mul, x_values, x_offsets, y)


KERNELS = {
    JAGGED_DENSE_ELEMENTWISE_ADD: {
        "PrivateUse1": jagged_dense_elementwise_add_npu,
        "AutogradPrivateUse1": _add_autograd,
    },
    JAGGED_DENSE_ELEMENTWISE_MUL: {
        "PrivateUse1": jagged_dense_elementwise_mul_npu,
        "AutogradPrivateUse1": _mul_autograd,
    },
    JAGGED_DENSE_ELEMENTWISE_MUL_FORWARD: {"PrivateUse1": jagged_dense_elementwise_mul_forward_npu},
    JAGGED_DENSE_ELEMENTWISE_MUL_BACKWARD: {
        "PrivateUse1": jagged_dense_elementwise_mul_backward_npu
    },
}
