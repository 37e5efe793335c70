"""``fbgemm::sll_jagged_dense_elementwise_add`` and
``fbgemm::sll_jagged_dense_elementwise_mul_jagged_out`` on npu.

``sll_jagged_dense_elementwise_add(x, x_offsets, y, max_seq_len)``: upstream's CPU kernel is
``fbgemm::jagged_dense_elementwise_add_jagged_output(x, [x_offsets], y)[0]``: ``out[r] = x[r] +
y[b, l]`` for row ``r = x_offsets[b] + l``, ``l < y.size(1)`` (``x[r]`` past it; ``max_seq_len``
unused, as upstream's).  Autograd as upstream's: ``grad_x = grad``, ``grad_y =
jagged_to_padded_dense(grad)`` (summed to ``y``'s shape where it broadcast).  Dtypes: the jagged
family's (float32, float16, bfloat16, int32, int64).  Launches: the jagged family's ``to_jagged``
of ``y`` (the index, where, remainder, zeros, ``index_copy_``) and the add.

``sll_jagged_dense_elementwise_mul_jagged_out(x, y, x_seq_lengths, x_offsets, max_seq_len)``:
``x`` holds ``B`` square blocks, block ``i`` ``x[o_i : o_i + L_i^2].view(L_i, L_i)`` with ``L_i =
x_seq_lengths[i]``; ``out`` = each block times ``y[:L_i, :L_i]`` (``y`` 2-D, broadcast where a
dim is 1), flattened, in ``x``'s dtype; 0 where no block lies (upstream leaves that memory
uninitialised).  Per output position ``p`` of block ``i`` (segment ids of the offsets: an int32
``index_add`` + ``cumsum``, no ``searchsorted``): ``q = p - o_i``, ``out[p] = x[p] * y[q // L_i,
q % L_i]``.  ``y``: float32 / float16 / bfloat16 / bool (upstream's own flash attention passes
a bool mask); the product is formed in the promoted dtype, as upstream's.  Autograd as
upstream's: ``grad_x`` is the same op on ``grad``, ``y`` gets none.  The queued data check:
offsets in ``[0, x.numel()]`` and non-decreasing, lengths ``>= 0``, blocks of exactly ``L_i^2``
elements tiling ``x`` (upstream's ``view`` raises otherwise, or leaves the values between
blocks uninitialised), ``L_i`` within ``y`` (upstream's broadcast
raises otherwise).  No sync.  Launches: ``BUDGETS`` in ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import check_same_device, validation_enabled
from fbgemm_npu.native._index import arange_cached, segment_ids
from fbgemm_npu.native.fbgemm.jagged._elementwise import plus_jagged
from fbgemm_npu.native.fbgemm.jagged._utils import check_values
from fbgemm_npu.native.fbgemm.sll._utils import (
    FLOATS,
    assert_none_bad,
    checked,
    host_int,
    lengths_arg,
    offsets_arg,
)

__all__ = ["KERNELS", "sll_jagged_dense_elementwise_add_npu", "sll_jagged_dense_mul_npu"]

_F = torch.ops.fbgemm
ADD = "fbgemm::sll_jagged_dense_elementwise_add"
MUL = "fbgemm::sll_jagged_dense_elementwise_mul_jagged_out"
_MUL_CHECK = (
    "arguments 'x_offsets' / 'x_seq_lengths' / 'y': the offsets must run from 0 to x.numel() "
    "without decreasing, every length be >= 0 with a block of exactly length**2 elements "
    "(x_offsets[i + 1] - x_offsets[i]; upstream leaves values outside the blocks "
    "uninitialised), and no length exceed a dim of 'y' that is not 1"
)


def _add_args(
    x: object, x_offsets: object, y: object, max_seq_len: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xv = check_values(ADD, "x", x)
    o = offsets_arg(ADD, "x_offsets", x_offsets)
    host_int(ADD, "max_seq_len", max_seq_len)
    if validation_enabled():  # upstream adds x to total_L = x_offsets[-1] rows: they must match
        bad = o[-1:] != xv.size(0)
        assert_none_bad(ADD, [bad], "argument 'x_offsets' must end at x.size(0) (total_L)")
    return xv, o, check_values(ADD, "y", y)


def sll_jagged_dense_elementwise_add_npu(
    x: torch.Tensor,
    x_offsets: torch.Tensor,
    y: torch.Tensor,
    max_seq_len: int,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    """``x + to_jagged(y)``: see the module docstring."""
    xv, o, yv = _add_args(x, x_offsets, y, max_seq_len)
    xv, jy = plus_jagged(ADD, xv, [o], yv)
    return xv + jy


class _Add(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, o, y):  # type: ignore[override]
        ctx.save_for_backward(o)
        ctx.x_shape, ctx.y_shape = x.shape, y.shape
        xv, jy = plus_jagged(ADD, x, [o], y)
        return xv + jy

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (o,) = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = grad.sum_to_size(ctx.x_shape)
        if ctx.needs_input_grad[2]:
            gy = _F.jagged_to_padded_dense_forward(grad, [o], [ctx.y_shape[1]], 0.0)
            gy = gy.sum_to_size(ctx.y_shape)
        return gx, None, gy


def _add_autograd(
    x: torch.Tensor,
    x_offsets: torch.Tensor,
    y: torch.Tensor,
    max_seq_len: int,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    if needs_grad(x, y):
        xv, o, yv = _add_args(x, x_offsets, y, max_seq_len)
        return _Add.apply(xv, o, yv)
    return below_autograd(_F.sll_jagged_dense_elementwise_add, x, x_offsets, y, max_seq_len)


def _add_meta(
    x: torch.Tensor,
    x_offsets: torch.Tensor,
    y: torch.Tensor,
    max_seq_len: int,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    """Upstream registers no Meta kernel: ``x``'s rows, the broadcast inner dim."""
    d = torch.broadcast_shapes(x.shape[1:], y.shape[2:])
    return x.new_empty((x.size(0), *d), dtype=torch.promote_types(x.dtype, y.dtype))


def _mul_args(
    x: object, y: object, x_seq_lengths: object, x_offsets: object, max_seq_len: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    op = MUL
    xv = checked(op, "x", x, 1)
    yv = checked(op, "y", y, 2, (*FLOATS, torch.bool))
    n = lengths_arg(op, "x_seq_lengths", x_seq_lengths, 0)
    o = offsets_arg(op, "x_offsets", x_offsets, n.numel() + 1)
    host_int(op, "max_seq_len", max_seq_len)
    check_same_device(op, x=xv, y=yv, x_seq_lengths=n, x_offsets=o)
    return xv, yv, n, o[: n.numel() + 1]


def mul_blocks(x: torch.Tensor, y: torch.Tensor, n: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """The blocks of ``x`` times ``y`` (arguments checked; ``o`` has ``B + 1`` entries)."""
    s, b = x.numel(), n.numel()
    if validation_enabled():
        sizes = o[1:] - o[:-1]
        n64 = n.to(torch.int64)
        bad = [o[:1] != 0, o[-1:] != s, o[:-1] > o[1:], n < 0, sizes != n64 * n64]
        if y.numel() == 0:  # a block would read y outside
            bad.append(n > 0)
        elif any(d != 1 for d in y.shape):  # a dim of 1 broadcasts
            bad.append(n > min(d for d in y.shape if d != 1))
        assert_none_bad(MUL, bad, _MUL_CHECK)
    if s == 0 or b == 0 or y.numel() == 0:
        return torch.zeros_like(x)
    dev = x.device
    seg = segment_ids(o, s).clamp_(max=b - 1)  # positions past o[B] fail the q < L * L test
    length = n.index_select(0, seg).to(torch.int64)
    q = arange_cached(s, dev) - o.index_select(0, seg)
    step = length.clamp(min=1)
    r = torch.div(q, step, rounding_mode="floor")
    c = q - r * step
    inside = (q >= 0) & (q < length * length)
    yv = y[r.clamp_(0, y.size(0) - 1), c.clamp_(0, y.size(1) - 1)]  # a dim of 1 broadcasts
    prod = x * yv
    return torch.where(inside, prod, torch.zeros((), dtype=prod.dtype, device=dev)).to(x.dtype)


def sll_jagged_dense_mul_npu(
    x: torch.Tensor,
    y: torch.Tensor,
    x_seq_lengths: torch.Tensor,
    x_offsets: torch.Tensor,
    max_seq_len: int,
) -> torch.Tensor:
    """Each ``L_i x L_i`` block of ``x`` times ``y[:L_i, :L_i]``: see the module docstring."""
    return mul_blocks(*_mul_args(x, y, x_seq_lengths, x_offsets, max_seq_len))


class _Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, n, o):  # type: ignore[override]
        ctx.save_for_backward(y, n, o)
        return mul_blocks(x, y, n, o)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        y, n, o = ctx.saved_tensors
        gx = mul_blocks(grad, y, n, o) if ctx.needs_input_grad[0] else None
        return gx, None, None, None  # upstream's: no gradient for y


def _mul_autograd(
    x: torch.Tensor,
    y: torch.Tensor,
    x_seq_lengths: torch.Tensor,
    x_offsets: torch.Tensor,
    max_seq_len: int,
) -> torch.Tensor:
    if needs_grad(x):
        return _Mul.apply(*_mul_args(x, y, x_seq_lengths, x_offsets, max_seq_len))
    return below_autograd(_F.sll_jagged_dense_elementwise_mul_jagged_out, x, y, x_seq_lengths,
                          x_offsets, max_seq_len)  # fmt: skip


KERNELS = {
    ADD: {
        "PrivateUse1": sll_jagged_dense_elementwise_add_npu,
        "AutogradPrivateUse1": _add_autograd,
        "Meta": _add_meta,
    },
    MUL: {"PrivateUse1": sll_jagged_dense_mul_npu, "AutogradPrivateUse1": _mul_autograd},
}
