"""Autograd and Meta kernels of ``fbgemm::sll_array_jagged_bmm_jagged_out`` and
``fbgemm::sll_jagged_jagged_bmm_jagged_out`` (their npu forwards: ``jagged_out.py``).

The gradients of the forward's math, from the padded operands (``ap``, ``yp`` / ``xp``, ``yp``)
and the output positions: array ``grad_A = dZ Y^T``, ``grad_Y = A^T dZ``; jagged ``grad_X = dZ
Y``, ``grad_Y = dZ^T X`` (``dZ`` the output gradient gathered at those positions, padding 0), each
product's padding zeroed (a non-finite value beside a zero must not reach a sum) and scattered
with ``index_add_`` (inputs whose rows overlap get the sum).  An eager call keeps the layout its
forward built (its ``L`` read in the forward's one sync); a traced call (torch.compile, AOT,
opcheck) has no data to read: its forward is the op (its Meta kernel gives the dynamic size) and
its backward rebuilds the layout with host bounds, ``L = min(max_seq_len, y.size(0))`` for the
array op (every ``c_i`` is below it) and ``L = max_seq_len`` for the jagged op, whose traced
gradient is then upstream's (capped at ``max_seq_len``, as upstream's backward is).  Launches of
a backward are not budgeted (no op of its own).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import dynamic_size
from fbgemm_npu.native._index import tracing
from fbgemm_npu.native.fbgemm.sll.jagged_out import (
    ARRAY,
    JAGGED,
    array_args,
    array_forward,
    array_layout,
    jagged_args,
    jagged_forward,
    jagged_layout,
    jagged_sizes,
    named,
    sll_array_jagged_bmm_npu,
    sll_jagged_jagged_bmm_jagged_out_npu,
)

__all__ = ["KERNELS"]

_F = torch.ops.fbgemm


def _gathered(grad: torch.Tensor, lay: dict, pad: torch.Tensor, traced: bool) -> torch.Tensor:
    """``grad`` at the layout's output rows, padding 0: read from ``[0; grad]``, the padding
    at its zero row (``-1 + 1`` traced, ``where`` eager), so an empty ``grad`` needs no test
    and no output size is used (a traced one is an unbacked symbol)."""
    rows = lay["zrows"] + 1
    if not traced:
        rows = torch.where(pad, 0, rows)
    spare = torch.cat([grad.new_zeros((1, *grad.shape[1:])), grad])
    return spare.index_select(0, rows.reshape(-1)).view(*rows.shape, *grad.shape[1:])


def _op_args(x: torch.Tensor, y: torch.Tensor, a: dict, cap: int) -> tuple:
    return (x, y, a["x_lengths"], a["x_offsets"], a["y_lengths"], a["y_offsets"],
            a["z_lengths"], a["z_offsets"], cap, True)  # fmt: skip


class _Array(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, a, cap):  # type: ignore[override]
        ctx.inputs, ctx.cap = (x, y, a), cap
        if tracing(x, y):  # the op itself: its Meta kernel under a trace
            ctx.lay = None
            return below_autograd(_F.sll_array_jagged_bmm_jagged_out, *_op_args(x, y, a, cap))
        out, ctx.lay = array_forward(x, y, a, cap)
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, y, a = ctx.inputs
        lay, traced = ctx.lay, ctx.lay is None
        if traced:  # traced: rebuild the layout with the host bound of L
            n = a["y_lengths"].to(torch.int64)
            length = min(ctx.cap, y.size(0))
            lay = array_layout(x, y, a, n, n.clamp(0, ctx.cap), None, length)
        gx, gy = grad.new_zeros(x.shape), grad.new_zeros(y.shape)
        if lay:
            dz = _gathered(grad, lay, lay["pad"], traced)  # [B, L, D]
            da = torch.bmm(dz, lay["yp"].transpose(1, 2)).masked_fill_(lay["xpad"], 0)
            gx.index_add_(0, lay["xidx"].reshape(-1), da.reshape(-1))
            dy = torch.bmm(lay["ap"].transpose(1, 2), dz).masked_fill_(lay["pad"][..., None], 0)
            gy.index_add_(0, lay["yrows"].reshape(-1), dy.reshape(-1, y.size(1)))
        return gx, gy, None, None


class _Jagged(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, a, cap):  # type: ignore[override]
        ctx.inputs, ctx.cap = (x, y, a), cap
        if tracing(x, y):
            ctx.lay = None
            return below_autograd(_F.sll_jagged_jagged_bmm_jagged_out, *_op_args(x, y, a, cap))
        out, ctx.lay = jagged_forward(x, y, a)
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, y, a = ctx.inputs
        lay, traced = ctx.lay, ctx.lay is None
        if traced:  # traced: upstream's cap as the padded length
            lay = jagged_layout(x, y, a, jagged_sizes(a), None, ctx.cap, ctx.cap)
        gx, gy = grad.new_zeros(x.shape), grad.new_zeros(y.shape)
        if lay:
            dz = _gathered(grad, lay, lay["zpad"], traced)  # [B, L_m, L_n]
            dx = torch.bmm(dz, lay["yp"]).masked_fill_(lay["xpad"][..., None], 0)
            gx.index_add_(0, lay["xrows"].reshape(-1), dx.reshape(-1, x.size(1)))
            dy = torch.bmm(dz.transpose(1, 2), lay["xp"]).masked_fill_(lay["ypad"][..., None], 0)
            gy.index_add_(0, lay["yrows"].reshape(-1), dy.reshape(-1, y.size(1)))
        return gx, gy, None, None


def _array_autograd(
    x: torch.Tensor, y: torch.Tensor, x_lengths: torch.Tensor, x_offsets: torch.Tensor,
    y_lengths: torch.Tensor, y_offsets: torch.Tensor, z_lengths: torch.Tensor,
    z_offsets: torch.Tensor, max_seq_len: int, allow_tf32: bool,
) -> torch.Tensor:  # fmt: skip
    t = named(x_lengths, x_offsets, y_lengths, y_offsets, z_lengths, z_offsets)
    if needs_grad(x, y):
        return _Array.apply(*array_args(x, y, t, max_seq_len))
    return below_autograd(_F.sll_array_jagged_bmm_jagged_out, x, y, *t.values(), max_seq_len,
                          allow_tf32)  # fmt: skip


def _jagged_autograd(
    x: torch.Tensor, y: torch.Tensor, x_lengths: torch.Tensor, x_offsets: torch.Tensor,
    y_lengths: torch.Tensor, y_offsets: torch.Tensor, z_lengths: torch.Tensor,
    z_offsets: torch.Tensor, max_seq_len: int, allow_tf32: bool,
) -> torch.Tensor:  # fmt: skip
    t = named(x_lengths, x_offsets, y_lengths, y_offsets, z_lengths, z_offsets)
    if needs_grad(x, y):
        return _Jagged.apply(*jagged_args(x, y, t, max_seq_len))
    return below_autograd(_F.sll_jagged_jagged_bmm_jagged_out, x, y, *t.values(), max_seq_len,
                          allow_tf32)  # fmt: skip


def _array_meta(x: torch.Tensor, y: torch.Tensor, *args: object) -> torch.Tensor:
    """Upstream has an AutogradMeta kernel only: the data-dependent ``sum(z_lengths)`` rows."""
    return y.new_empty((dynamic_size(ARRAY, "sum(z_lengths)"), y.size(1)))


def _jagged_meta(x: torch.Tensor, y: torch.Tensor, *args: object) -> torch.Tensor:
    """Upstream has an AutogradMeta kernel only: the data-dependent ``sum(z_lengths)`` values."""
    return x.new_empty((dynamic_size(JAGGED, "sum(z_lengths)"),))


KERNELS = {
    ARRAY: {
        "PrivateUse1": sll_array_jagged_bmm_npu,
        "AutogradPrivateUse1": _array_autograd,
        "Meta": _array_meta,
    },
    JAGGED: {
        "PrivateUse1": sll_jagged_jagged_bmm_jagged_out_npu,
        "AutogradPrivateUse1": _jagged_autograd,
        "Meta": _jagged_meta,
    },
}
