"""Jagged-dense adds with a jagged output on npu:
``fbgemm::jagged_dense_elementwise_add_jagged_output`` and
``jagged_dense_dense_elementwise_add_jagged_output`` (+ ``_forward``).

Math, with ``to_jagged`` as in :mod:`.jagged` (``x`` jagged, ``y`` dense ``[B, L_1..L_k, D]``,
``T = x_values.size(0)``)::

    add_jagged_output      = x_values + to_jagged(y, T)
    dense_dense_add_jagged = x_values + to_jagged(y_0, T) + to_jagged(y_1, T)   (left to right)

upstream's CPU formulation, sized like :mod:`.elementwise`'s ``mul`` (by ``T``, rows after the
last offset uncovered: ``y = 0``).  Dtypes: float32, float16, bfloat16, int32, int64, mixed dtypes
promoted as torch does.

Launches: the dense index, one scatter and the adds, plus the on-device data check;
``dense_dense_add`` stacks ``y_0`` and ``y_1`` of one dtype and shape so that one scatter writes
both.  The offsets returned are copies (a ``clone`` per jagged dim:
:func:`._elementwise.fresh_offsets`).  Launches and syncs: ``BUDGETS`` in ``budgets.py``
(docs/ops.md).

Autograd (upstream registers it for both): ``x_values`` gets the gradient, each dense input
to_dense of it (``jagged_to_padded_dense_forward`` with padding 0).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native.fbgemm.jagged._elementwise import (
    broadcast,
    fresh_offsets,
    jagged_args,
    plus_jagged,
)
from fbgemm_npu.native.fbgemm.jagged.to_jagged import to_jagged

__all__ = [
    "KERNELS",
    "jagged_dense_dense_elementwise_add_jagged_output_forward_npu",
    "jagged_dense_dense_elementwise_add_jagged_output_npu",
    "jagged_dense_elementwise_add_jagged_output_npu",
]

_F = torch.ops.fbgemm
JAGGED_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT = "fbgemm::jagged_dense_elementwise_add_jagged_output"
JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT = (
    "fbgemm::jagged_dense_dense_elementwise_add_jagged_output"
)
JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT_FORWARD = (
    "fbgemm::jagged_dense_dense_elementwise_add_jagged_output_forward"
)


def jagged_dense_elementwise_add_jagged_output_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(x_values + to_jagged(y, T), fresh copies of x_offsets)``."""
    x, jy = plus_jagged(JAGGED_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT, x_values, x_offsets, y)
    return x + jy, fresh_offsets(x_offsets)


def jagged_dense_dense_elementwise_add_jagged_output_forward_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y_0: torch.Tensor, y_1: torch.Tensor
) -> torch.Tensor:
    """``x_values + to_jagged(y_0) + to_jagged(y_1)``; one index, one scatter of both."""
    op = JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT_FORWARD
    return _dense_dense_add(op, x_values, x_offsets, y_0, y_1)


def jagged_dense_dense_elementwise_add_jagged_output_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y_0: torch.Tensor, y_1: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(..._forward(x_values, x_offsets, y_0, y_1), fresh copies of x_offsets)``."""
    return _dense_dense_add(
        JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT, x_values, x_offsets, y_0, y_1
    ), fresh_offsets(x_offsets)


def _dense_dense_add(
    op: str, x_values: object, x_offsets: object, y_0: object, y_1: object
) -> torch.Tensor:
    x, offsets, (y0, y1) = jagged_args(op, x_values, x_offsets, ("y_0", y_0), ("y_1", y_1))
    total = x.size(0)
    if y0.shape != y1.shape or y0.dtype != y1.dtype:  # rare: two scatters, upstream's rounding
        j0 = to_jagged(op, y0, offsets, total, "y_0", "x_offsets")
        j1 = to_jagged(op, y1, offsets, total, "y_1", "x_offsets")
        shape = broadcast(op, x.shape, "x_values", j0.shape, "y_0")
        broadcast(op, shape, "x_values", j1.shape, "y_1")
        return x + j0 + j1
    d = y0.size(-1)
    both = torch.stack([y0, y1], dim=-2)  # [B, L.., 2, D]: one scatter writes both
    j = to_jagged(op, both.view(*y0.shape[:-1], 2 * d), offsets, total, "y_0", "x_offsets")
    j = j.view(total, 2, d)
    broadcast(op, x.shape, "x_values", (total, d), "y_0")
    return x + j[:, 0] + j[:, 1]


# ----------------------------------------------------------------------------------- autograd


class _AddJagged(torch.autograd.Function):
    """Jagged output ``x + to_jagged(y_0) (+ to_jagged(y_1))`` and fresh offsets: grad to x,
    to_dense(grad) to each y."""

    @staticmethod
    def forward(ctx, x, y0, y1, *offsets):  # type: ignore[override]
        ctx.save_for_backward(*offsets)
        ctx.lengths = list(y0.shape[1:-1])
        ctx.two = y1 is not None
        if y1 is None:
            add = _F.jagged_dense_elementwise_add_jagged_output
            out, fresh = below_autograd(add, x, list(offsets), y0)
        else:
            add = _F.jagged_dense_dense_elementwise_add_jagged_output
            out, fresh = below_autograd(add, x, list(offsets), y0, y1)
        ctx.mark_non_differentiable(*fresh)
        return (out, *fresh)

    @staticmethod
    def backward(ctx, grad, *_):  # type: ignore[override]
        offsets = list(ctx.saved_tensors)
        gy = _F.jagged_to_padded_dense_forward(grad, offsets, ctx.lengths, 0.0)
        return (grad, gy, gy if ctx.two else None, *([None] * len(offsets)))


def _add_jagged_output_autograd(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    if needs_grad(x_values, y):
        out, *fresh = _AddJagged.apply(x_values, y, None, *x_offsets)
        return out, fresh
    return below_autograd(_F.jagged_dense_elementwise_add_jagged_output, x_values, x_offsets, y)


def _dense_dense_add_autograd(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y_0: torch.Tensor, y_1: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    if needs_grad(x_values, y_0, y_1):
        out, *fresh = _AddJagged.apply(x_values, y_0, y_1, *x_offsets)
        return out, fresh
    return below_autograd(
        _F.jagged_dense_dense_elementwise_add_jagged_output, x_values, x_offsets, y_0, y_1
    )


KERNELS = {
    JAGGED_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT: {
        "PrivateUse1": jagged_dense_elementwise_add_jagged_output_npu,
        "AutogradPrivateUse1": _add_jagged_output_autograd,
    },
    JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT: {
        "PrivateUse1": jagged_dense_dense_elementwise_add_jagged_output_npu,
        "AutogradPrivateUse1": _dense_dense_add_autograd,
    },
    JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT_FORWARD: {
        "PrivateUse1": jagged_dense_dense_elementwise_add_jagged_output_forward_npu
    },
}
