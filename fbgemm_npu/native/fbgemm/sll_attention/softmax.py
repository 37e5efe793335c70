"""SLL softmaxes on npu: ``fbgemm::sll_jagged_softmax`` and ``fbgemm::sll_jagged2_softmax``.

``sll_jagged_softmax(x [N, D], x_offsets [B + 1], max_seq_len)``: upstream's CPU kernel is
``fbgemm::jagged_softmax(x, x_offsets, max_seq_len)[0]``: per batch row ``b`` and column
``d``, over its first ``n_b = clamp(len_b, 0, max_seq_len)`` rows ``r = x_offsets[b] + l``::

    out[r, d] = exp(x[r, d] - m) / sum_{l' < n_b} exp(x[start_b + l', d] - m)

and 0 on every other row (upstream leaves those uninitialised).  Backward: ``y * (g - sum(g *
y))`` over the same rows.  float32 / float16 / bfloat16 (upstream's kernel refuses the rest);
``use_fbgemm_kernel`` is ignored, as upstream's CPU kernel ignores it.

``sll_jagged2_softmax(x [sum_b n_b**2], offsets [B + 1], offsets_total [B + 1], max_seq_len,
transpose)``: one ``n_b x n_b`` matrix per batch row (``n_b = offsets[b + 1] - offsets[b]``),
row-major from ``offsets_total[b]``; softmax along its rows (``transpose=False``) or columns
(``True``); 0 at positions no matrix covers.  Backward: ``y * (g - sum(g * y))`` along the same
dim.  float32 / float16 / bfloat16 / float64 (upstream's CPU kernel is plain torch).  Upstream's
CPU kernel softmaxes the whole ``n_b x n_b`` matrix whatever ``max_seq_len`` says (its GPU
kernel only its first ``max_seq_len`` rows / columns); ours pads to ``max_seq_len`` and so
refuses ``n_b > max_seq_len`` by a queued data check naming it, rather than pick one.

How (both): pad to ``[B, M, (M | D)]`` (``M``: ``max_seq_len`` capped by the rows the input
can hold: ``_common.padded``) by one gather of clamped positions, ``-inf`` at the
padding, ``softmax``, scatter into one spare slot more than the output (an all-padding row's
NaN lands there); the backward gathers ``g`` and ``y`` alike, zeroes the padding products (a
non-finite ``g`` upstream never reads cannot leak in) and scatters ``y * (g - sum)``.  No host
loop, no sync, nothing on a 910B's AI CPU (float64's gather aside: docs/hardware.md).  Data
checks (queued): offsets in ``[0, 2**31)``, rows inside ``x``, non-decreasing offsets (``sll_
jagged_softmax``), and for jagged2 ``0 <= n_b <= max_seq_len`` and ``offsets_total`` steps equal
to ``n_b**2``.  Launches: ``budgets.py``.
"""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import allocation_of, check_same_device, validation_enabled
from fbgemm_npu.native.fbgemm.jagged._utils import READ_CHECK, assert_no_bad, int32_bad, write_rows
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows
from fbgemm_npu.native.fbgemm.sll_attention._common import (
    FLOATS,
    check_float,
    check_int,
    check_offsets,
    padded,
    row_index,
    square_index,
)

__all__ = ["KERNELS", "sll_jagged2_softmax_npu", "sll_jagged_softmax_npu"]

_F = torch.ops.fbgemm
SOFTMAX = "fbgemm::sll_jagged_softmax"
SOFTMAX2 = "fbgemm::sll_jagged2_softmax"
_OVERLAP = ", or its entries decrease (rows that overlap: upstream keeps the last write)"
_SQUARE_CHECK = (
    "arguments 'offsets' / 'offsets_total' / 'max_seq_len': every n_b = offsets[b + 1] - "
    "offsets[b] must lie in [0, max_seq_len] (upstream's CPU kernel softmaxes past "
    "max_seq_len, its GPU kernel does not: refused), offsets_total[b + 1] - offsets_total[b] "
    "must equal n_b**2, offsets_total[b + 1] <= x.numel(), and offsets in [0, 2**31)"
)


# ---------------------------------------------------------------- sll_jagged_softmax


def _rows(
    op: str, o: torch.Tensor, length: int, n: int, checks: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    bad: list[torch.Tensor] | None = [] if checks and validation_enabled() else None
    read, pad, write = row_index(o, length, n, bad)
    if bad is not None:
        bad.append(o[:-1] > o[1:])
    assert_no_bad(op, bad, f"argument 'x_offsets': {READ_CHECK}{_OVERLAP}")
    return read, pad, write


def _check_softmax(x: object, x_offsets: object, max_seq_len: object) -> tuple:
    op = SOFTMAX
    v = check_float(op, "x", x, 2, FLOATS)
    o = check_offsets(op, "x_offsets", x_offsets)
    check_same_device(op, x=v, x_offsets=o)
    if v.dtype == torch.float64 and o.numel() > 1 and v.size(1) > 0:
        check_float(op, "x", v, 2)  # upstream's kernel refuses float64 where it runs at all
    return v, o, max(check_int(op, "max_seq_len", max_seq_len), 0)


def sll_jagged_softmax_npu(
    x: torch.Tensor, x_offsets: torch.Tensor, max_seq_len: int, use_fbgemm_kernel: bool = True
) -> torch.Tensor:
    """``out [N, D]``: see the module docstring.  Launches: the row index (5), index_select,
    masked_fill_, softmax, and the scatter (zeros, index_copy_)."""
    v, o, msl = _check_softmax(x, x_offsets, max_seq_len)
    n, d, b = v.size(0), v.size(1), o.numel() - 1
    length = padded(msl, n)
    if n == 0 or d == 0 or b == 0 or length == 0:
        return v.new_zeros((n, d))
    with allocation_of(SOFTMAX, f"the padded [B, {length}, D] form of 'x'"):
        read, pad, write = _rows(SOFTMAX, o, length, n, True)
        g = v.index_select(0, read.view(-1)).view(b, length, d)
        g.masked_fill_(pad.unsqueeze(-1), float("-inf"))
        s = torch.softmax(g, 1)  # an all-padding column is NaN: it goes to the spare row only
        return scatter_rows(s.view(b * length, d), write.view(-1), n)


def _softmax_backward(
    grad: torch.Tensor, y: torch.Tensor, o: torch.Tensor, length: int
) -> torch.Tensor:
    """``y * (g - sum_l g * y)`` over each batch row's first ``n_b`` rows, 0 elsewhere."""
    n, d, b = y.size(0), y.size(1), o.numel() - 1
    length = padded(length, n)
    if n == 0 or d == 0 or b == 0 or length == 0:
        return y.new_zeros((n, d))
    read, pad, write = _rows(SOFTMAX, o, length, n, False)
    flat = read.view(-1)
    gy = y.index_select(0, flat).view(b, length, d)
    gg = grad.index_select(0, flat).view(b, length, d)
    prod = gg * gy
    prod.masked_fill_(pad.unsqueeze(-1), 0)
    res = (gg - prod.sum(1, keepdim=True)) * gy
    return scatter_rows(res.view(b * length, d), write.view(-1), n)


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, x_offsets, max_seq_len, use_fbgemm_kernel):  # type: ignore[override]
        y = below_autograd(_F.sll_jagged_softmax, x, x_offsets, max_seq_len, use_fbgemm_kernel)
        ctx.save_for_backward(y, x_offsets)
        ctx.length = max(max_seq_len, 0)
        return y

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        y, o = ctx.saved_tensors
        return _softmax_backward(grad, y, o, ctx.length), None, None, None


def _softmax_autograd(
    x: torch.Tensor, x_offsets: torch.Tensor, max_seq_len: int, use_fbgemm_kernel: bool = True
) -> torch.Tensor:
    if needs_grad(x):
        _check_softmax(x, x_offsets, max_seq_len)
        return _Softmax.apply(x, x_offsets, max_seq_len, use_fbgemm_kernel)
    return below_autograd(_F.sll_jagged_softmax, x, x_offsets, max_seq_len, use_fbgemm_kernel)


def _softmax_meta(
    x: torch.Tensor, x_offsets: torch.Tensor, max_seq_len: int, use_fbgemm_kernel: bool = True
) -> torch.Tensor:
    """Upstream registers no Meta kernel: the shape of its CPU kernel's."""
    return x.new_empty(x.shape)  # contiguous, as ours


# ---------------------------------------------------------------- sll_jagged2_softmax


def _check_softmax2(
    x: object, offsets: object, offsets_total: object, max_seq_len: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    op = SOFTMAX2
    v = check_float(op, "x", x, 1, FLOATS)
    o = check_offsets(op, "offsets", offsets)
    ot = check_offsets(op, "offsets_total", offsets_total)
    check_same_device(op, x=v, offsets=o, offsets_total=ot)
    b = ot.numel() - 1  # upstream's B: offsets_total's
    if o.numel() < b + 1:
        raise ValueError(
            f"{op}: argument 'offsets' has {o.numel()} entries but 'offsets_total' has {b + 1}; "
            "offsets needs one per batch row and one more (B + 1)"
        )
    return v, o[: b + 1], ot, max(check_int(op, "max_seq_len", max_seq_len), 0)


def _sizes(o: torch.Tensor, ot: torch.Tensor, length: int, e: int, checks: bool) -> torch.Tensor:
    """``n_b`` of the jagged2 matrices, with the queued data check when ``checks``."""
    sizes = o[1:] - o[:-1]
    if checks and validation_enabled():
        bad = [
            int32_bad(o),
            int32_bad(ot),
            (sizes < 0) | (sizes > length),
            # n_b**2 in int64 (no launch for int64 offsets): int32's would wrap past 46340
            (ot[1:] - ot[:-1]) != sizes * sizes.long(),
            ot[1:] > e,
        ]
        assert_no_bad(SOFTMAX2, bad, _SQUARE_CHECK)
    return sizes


def _square(
    o: torch.Tensor, ot: torch.Tensor, msl: int, e: int, checks: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(read, pad, write)`` ``[B, L, L]`` (``L = min(max_seq_len, isqrt(e))``) of the jagged2
    matrices in ``e > 0`` elements, with the queued data check (module docstring) when
    ``checks``."""
    sizes = _sizes(o, ot, msl, e, checks)
    length = padded(msl, math.isqrt(e))
    pos, pad = square_index(ot[:-1], sizes, length)
    write = write_rows(pos, pad, e, None)
    return pos.clamp_(0, e - 1), pad, write


def sll_jagged2_softmax_npu(
    x: torch.Tensor,
    offsets: torch.Tensor,
    offsets_total: torch.Tensor,
    max_seq_len: int,
    transpose: bool,
) -> torch.Tensor:
    """``out [E]`` (``E = x.numel()``): see the module docstring.  Launches: sub (the sizes),
    the square index (5), where, remainder, clamp_, index_select, masked_fill_, softmax, and the
    scatter (zeros, index_put_)."""
    v, o, ot, length = _check_softmax2(x, offsets, offsets_total, max_seq_len)
    e, b = v.numel(), ot.numel() - 1
    if e == 0 or b == 0 or length == 0:
        if b > 0:  # any non-empty matrix is refused: the check still runs
            _sizes(o, ot, length, e, True)
        return v.new_zeros(e)
    side = padded(length, math.isqrt(e))
    with allocation_of(SOFTMAX2, f"the padded [B, {side}, {side}] form of 'x'"):
        read, pad, write = _square(o, ot, length, e, True)
        s = v.index_select(0, read.view(-1)).view(pad.shape)
        s.masked_fill_(pad, float("-inf"))
        s = torch.softmax(s, 1 if transpose else 2)
        out = v.new_zeros(e + 1)
        out.index_put_((write.view(-1),), s.view(-1))
        return out[:e]


def _softmax2_backward(
    grad: torch.Tensor,
    y: torch.Tensor,
    o: torch.Tensor,
    ot: torch.Tensor,
    length: int,
    transpose: bool,
) -> torch.Tensor:
    e, b = y.numel(), ot.numel() - 1
    if e == 0 or b == 0 or length == 0:
        return y.new_zeros(e)
    read, pad, write = _square(o, ot, length, e, False)
    flat = read.view(-1)
    gy = y.index_select(0, flat).view(pad.shape)
    gg = grad.index_select(0, flat).view(pad.shape)
    dim = 1 if transpose else 2
    prod = gg * gy
    prod.masked_fill_(pad, 0)
    res = (gg - prod.sum(dim, keepdim=True)) * gy
    out = y.new_zeros(e + 1)
    out.index_put_((write.view(-1),), res.view(-1))
    return out[:e]


class _Softmax2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, offsets, offsets_total, max_seq_len, transpose):  # type: ignore[override]
        y = below_autograd(
            _F.sll_jagged2_softmax, x, offsets, offsets_total, max_seq_len, transpose
        )
        _, o, ot, length = _check_softmax2(y, offsets, offsets_total, max_seq_len)
        ctx.save_for_backward(y, o, ot)
        ctx.length, ctx.transpose = length, transpose
        return y

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        y, o, ot = ctx.saved_tensors
        g = _softmax2_backward(grad, y, o, ot, ctx.length, ctx.transpose)
        return g, None, None, None, None


def _softmax2_autograd(
    x: torch.Tensor,
    offsets: torch.Tensor,
    offsets_total: torch.Tensor,
    max_seq_len: int,
    transpose: bool,
) -> torch.Tensor:
    if needs_grad(x):
        return _Softmax2.apply(x, offsets, offsets_total, max_seq_len, transpose)
    return below_autograd(_F.sll_jagged2_softmax, x, offsets, offsets_total, max_seq_len, transpose)


def _softmax2_meta(
    x: torch.Tensor,
    offsets: torch.Tensor,
    offsets_total: torch.Tensor,
    max_seq_len: int,
    transpose: bool,
) -> torch.Tensor:
    """Upstream registers only an AutogradMeta kernel (no Meta): ``x``'s shape."""
    return x.new_empty(x.shape)  # contiguous, as ours


KERNELS = {
    SOFTMAX: {
        "PrivateUse1": sll_jagged_softmax_npu,
        "AutogradPrivateUse1": _softmax_autograd,
        "Meta": _softmax_meta,
    },
    SOFTMAX2: {
        "PrivateUse1": sll_jagged2_softmax_npu,
        "AutogradPrivateUse1": _softmax2_autograd,
        "Meta": _softmax2_meta,
    },
}
