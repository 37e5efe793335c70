"""Jagged-dense elementwise ops on npu: ``fbgemm::jagged_dense_elementwise_add``, ``_mul``
(+ ``_forward``, ``_backward``), ``_add_jagged_output``,
``jagged_dense_dense_elementwise_add_jagged_output`` (+ ``_forward``).

Math, with ``to_dense`` / ``to_jagged`` as in :mod:`.jagged` (``x`` jagged, ``y`` dense
``[B, L_1..L_k, D]``, ``T = x_values.size(0)``)::

    add                    = to_dense(x, max_lengths=y.shape[1:-1], padding 0) + y
    mul                    = x_values * to_jagged(y, T)
    add_jagged_output      = x_values + to_jagged(y, T)
    dense_dense_add_jagged = x_values + to_jagged(y_0, T) + to_jagged(y_1, T)   (left to right)

which is upstream's CPU formulation, so dtype promotion and broadcasting follow torch's rules as
upstream's do.  Value rows no position covers (truncated, or after the last offset) get ``y = 0``.
Upstream CPU sizes ``to_jagged`` by ``x_offsets[-1].max()`` (a host sync) and raises when that
differs from ``T``; CUDA, like us, sizes it by ``T`` (no sync) and leaves rows after the last
offset uncovered.  Offsets that would touch rows outside ``[0, T)`` raise.

Dtypes: float32, float16, bfloat16, int32, int64 (upstream's), mixed dtypes promoted as torch
does; ``jagged_dense_elementwise_mul_backward`` also float64 (upstream CPU) and bfloat16 (CUDA).

Launches: the dense index of :mod:`.jagged` (one level more per further jagged dim), one gather
or scatter and the elementwise op, plus the on-device data check (``FBGEMM_NPU_VALIDATE=0`` drops
it); ``dense_dense_add`` stacks ``y_0`` and ``y_1`` of one dtype and shape so that one scatter
writes both.  The ops returning offsets return copies (a ``clone`` per jagged dim:
:func:`fresh_offsets`).  Output strides are upstream's Meta kernels' (``y``'s for ``add`` and for
``mul_backward``'s ``y`` gradient).  Launches and syncs: ``BUDGETS`` in ``budgets.py``
(docs/ops.md).

Autograd (upstream registers it for all but ``add``, whose CPU kernel still records gradients
through its inner to_dense; CUDA's too): d/dx of add is to_jagged(grad), d/dy is grad; mul uses
``jagged_dense_elementwise_mul_backward``; the jagged-output adds pass grad to ``x_values`` and
to_dense(grad) to each dense input.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import check_dtype, check_ndim, check_tensor
from fbgemm_npu.native.fbgemm.jagged._utils import (
    WRITE_CHECK,
    check_offsets,
    check_values,
    checked_dense_index,
)
from fbgemm_npu.native.fbgemm.jagged.to_dense import to_dense
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows, to_jagged

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
JAGGED_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT = "fbgemm::jagged_dense_elementwise_add_jagged_output"
JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT = (
    "fbgemm::jagged_dense_dense_elementwise_add_jagged_output"
)
JAGGED_DENSE_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT_FORWARD = (
    "fbgemm::jagged_dense_dense_elementwise_add_jagged_output_forward"
)
_GRAD_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def fresh_offsets(x_offsets: list[torch.Tensor]) -> list[torch.Tensor]:
    """The output offsets: a copy of each input offsets tensor (a ``clone`` per jagged dim).

    Upstream's kernels return the input tensors themselves, but the schemas (``-> (Tensor,
    Tensor[])``) declare no alias and upstream's Meta kernels return fresh tensors: AOTAutograd
    refuses a custom op whose output is an input, so ours are copies.
    """
    return [o.clone() for o in x_offsets]


def _dense_arg(op: str, arg: str, y: object, offsets: list[torch.Tensor]) -> torch.Tensor:
    """``y`` must be ``[B, L_1..L_k, D]`` for ``k`` jagged dims."""
    y = check_values(op, arg, y)
    check_ndim(op, arg, y, (len(offsets) + 2,))
    if y.size(0) != offsets[0].numel() - 1:
        raise ValueError(
            f"{op}: argument '{arg}' has batch size {y.size(0)} but 'x_offsets[0]' describes "
            f"{offsets[0].numel() - 1} rows"
        )
    return y


def _jagged_args(
    op: str, x_values: object, x_offsets: object, *dense: tuple[str, object]
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    x = check_values(op, "x_values", x_values)
    offsets = check_offsets(op, "x_offsets", x_offsets, x.device)
    ys = []
    for arg, y in dense:
        y = _dense_arg(op, arg, y, offsets)
        if y.device != x.device:
            raise RuntimeError(
                f"{op}: arguments 'x_values' ({x.device}) and '{arg}' ({y.device}) must be on "
                "the same device"
            )
        ys.append(y)
    return x, offsets, ys


def _plus_jagged(
    op: str, x_values: object, x_offsets: object, y: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x_values, to_jagged(y, T))`` checked, for the one-dense-input ops."""
    x, offsets, (y,) = _jagged_args(op, x_values, x_offsets, ("y", y))
    return x, to_jagged(op, y, offsets, x.size(0), "y", "x_offsets")


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
    if torch.broadcast_shapes(dense.shape, y.shape) != y.shape:  # x's D broadcast over y's 1
        return dense + y
    # Upstream's Meta kernel gives y's strides (empty_like(y)): written into them, no launch more.
    out = torch.empty_like(y, dtype=torch.result_type(dense, y))
    return torch.add(dense, y, out=out)


def jagged_dense_elementwise_mul_forward_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> torch.Tensor:
    """``x_values * to_jagged(y, x_values.size(0))``."""
    x, jy = _plus_jagged(JAGGED_DENSE_ELEMENTWISE_MUL_FORWARD, x_values, x_offsets, y)
    return x * jy


def jagged_dense_elementwise_mul_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(mul_forward(x, offsets, y), fresh copies of x_offsets)``."""
    x, jy = _plus_jagged(JAGGED_DENSE_ELEMENTWISE_MUL, x_values, x_offsets, y)
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
    index = checked_dense_index(op, offsets, y.shape[1:-1], total, what)
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


def jagged_dense_elementwise_add_jagged_output_npu(
    x_values: torch.Tensor, x_offsets: list[torch.Tensor], y: torch.Tensor
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(x_values + to_jagged(y, T), fresh copies of x_offsets)``."""
    x, jy = _plus_jagged(JAGGED_DENSE_ELEMENTWISE_ADD_JAGGED_OUTPUT, x_values, x_offsets, y)
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
    x, offsets, (y0, y1) = _jagged_args(op, x_values, x_offsets, ("y_0", y_0), ("y_1", y_1))
    total = x.size(0)
    if y0.shape != y1.shape or y0.dtype != y1.dtype:  # rare: two scatters, upstream's rounding
        j0 = to_jagged(op, y0, offsets, total, "y_0", "x_offsets")
        return x + j0 + to_jagged(op, y1, offsets, total, "y_1", "x_offsets")
    d = y0.size(-1)
    both = torch.stack([y0, y1], dim=-2)  # [B, L.., 2, D]: one scatter writes both
    j = to_jagged(op, both.view(*y0.shape[:-1], 2 * d), offsets, total, "y_0", "x_offsets")
    j = j.view(total, 2, d)
    return x + j[:, 0] + j[:, 1]


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
