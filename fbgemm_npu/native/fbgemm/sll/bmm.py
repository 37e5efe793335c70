"""``fbgemm::sll_jagged_dense_bmm`` and ``fbgemm::sll_jagged_jagged_bmm`` on npu.

Upstream's CPU kernels call ``fbgemm::jagged_dense_bmm(x, x_offsets, y, N)[0]`` and
``fbgemm::jagged_jagged_bmm(x, y, x_offsets, N)`` (``use_fbgemm_kernel`` and ``allow_tf32`` are
ignored on CPU), so the math is theirs, with ``n_b = clamp(len_b, 0, N)`` and ``r = x_offsets[b]
+ l`` for ``l < n_b``::

    sll_jagged_dense_bmm:   out[r] = x[r] @ y[b]             x [rows, D], y [B, D, T] -> [rows, T]
    sll_jagged_jagged_bmm:  out[b] = sum_{l < n_b} x[r]^T y[r]   y [rows', T]         -> [B, D, T]

(rows of ``sll_jagged_dense_bmm``'s output no sequence reaches are 0).  Autograd as upstream's:
``grad_x = jagged_dense(grad, y^T)``, ``grad_y = jagged_jagged(x, grad)`` for the first;
``grad_x = jagged_dense(y, grad^T)``, ``grad_y = jagged_dense(x, grad)`` for the second (each
sized to its own input's rows: upstream's fails when ``x`` and ``y`` differ in rows).
Dtypes: float32, float16, bfloat16, one for both (upstream's kernels refuse the rest); offsets
int32 or int64.

How: the ``[B, min(N, rows)]`` dense index of the jagged family (add, ge, the rows' clamp), one
``index_select`` per jagged input with its padding zeroed (a non-finite value upstream never
reads cannot reach a sum), one ``bmm``; ``sll_jagged_dense_bmm`` scatters the ``[B, N, T]``
products back into ``rows + 1`` zero rows (where, remainder, zeros, ``index_copy_``).  No loop,
no sync.  The queued data check: offsets in ``[0, 2**31)``, every row read inside its input and
(the scatter) non-decreasing offsets.  Launches: ``BUDGETS`` in ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_same_device,
    check_same_dtype,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.jagged._utils import (
    READ_CHECK,
    assert_no_bad,
    dense_index,
    int32_bad,
    read_rows,
    write_rows,
)
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows
from fbgemm_npu.native.fbgemm.sll._utils import checked, host_int, offsets_arg

__all__ = ["KERNELS", "sll_jagged_dense_bmm_npu", "sll_jagged_jagged_bmm_npu"]

JD = "fbgemm::sll_jagged_dense_bmm"
JJ = "fbgemm::sll_jagged_jagged_bmm"
_OVERLAP = ", or its entries decrease (rows that overlap: upstream keeps the last write)"


def _gather(
    op: str,
    o: torch.Tensor,
    length: int,
    tensors: list[torch.Tensor],
    monotone: bool,
    cap: int,
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """Each of ``tensors`` (``[rows_i, C_i]``, ``rows_i > 0``) gathered to ``[B, L, C_i]`` with
    0 at the padding positions, the padding mask and the (clamped) rows ``[B, L]``.  ``cap``:
    the ``N`` the call gave (``L`` is bounded by the rows too): upstream reads ``min(len_b, N)``
    rows of every sequence, so a sequence that runs past the input within ``N`` is refused, not
    cut at the padded length (upstream reads past the end there)."""
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    idx, pad = dense_index([o], [length], bad)  # type: ignore[misc]
    n_rows = min(t.size(0) for t in tensors)
    rows = read_rows(idx, pad, n_rows, bad)
    if bad is not None and cap > length:
        bad.append((o[1:] - o[:-1]).clamp_(0, cap).add_(o[:-1]) > n_rows)
    if bad is not None and monotone:
        bad.append(o[:-1] > o[1:])
    assert_no_bad(op, bad, f"argument 'x_offsets': {READ_CHECK}{_OVERLAP if monotone else ''}")
    b, flat, mask = o.numel() - 1, rows.view(-1), pad.unsqueeze(-1)
    out = [
        t.index_select(0, flat).view(b, length, t.size(1)).masked_fill_(mask, 0) for t in tensors
    ]
    return out, pad, rows


def _no_rows_check(op: str, o: torch.Tensor) -> None:
    """The data check of a call whose input has no rows: every sequence empty, every offset in
    ``[0, 2**31)`` (upstream reads rows for any other: past the end of an empty tensor)."""
    if validation_enabled():
        bad = [int32_bad(o), o[1:] > o[:-1]]
        assert_no_bad(op, bad, f"argument 'x_offsets': {READ_CHECK}")


def _args(op: str, x: object, x_offsets: object, n: object) -> tuple[torch.Tensor, int]:
    o = offsets_arg(op, "x_offsets", x_offsets)
    return o, max(host_int(op, "N", n), 0)  # upstream reads no row for N < 0


def jagged_dense(
    op: str, x: torch.Tensor, y: torch.Tensor, o: torch.Tensor, length: int
) -> torch.Tensor:
    """``[rows, T]``: ``out[r] = x[r] @ y[b]`` (module docstring), arguments checked."""
    b, n, t = o.numel() - 1, x.size(0), y.size(2)
    if b == 0 or n == 0 or t == 0 or length == 0:
        if n == 0 and b > 0 and length > 0:  # no rows: any non-empty sequence reads past them
            _no_rows_check(op, o)
        elif b > 0 and length > 0:  # T = 0 still reads x upstream: the rows are checked
            _gather(op, o, min(length, n), [x], True, length)
        return x.new_zeros((n, t))
    cap, length = length, min(length, n)  # no valid sequence is longer: padding bounded by rows
    with allocation_of(op, f"the padded [B, N] = [{b}, {length}] rows of argument 'N'"):
        (gx,), pad, rows = _gather(op, o, length, [x], True, cap)
        prod = torch.bmm(gx, y)
    out_rows = write_rows(rows, pad, n, None)  # padding positions at the spare row n
    return scatter_rows(prod.view(b * length, t), out_rows.view(-1), n)


def jagged_jagged(
    op: str, x: torch.Tensor, y: torch.Tensor, o: torch.Tensor, length: int
) -> torch.Tensor:
    """``[B, D, T]``: ``out[b] = sum_l x[r]^T y[r]`` (module docstring), arguments checked."""
    b, d, t = o.numel() - 1, x.size(1), y.size(1)
    if b == 0 or d == 0 or t == 0 or length == 0:  # upstream reads no element
        return x.new_zeros((b, d, t))
    if min(x.size(0), y.size(0)) == 0:  # any non-empty sequence would read past the end
        _no_rows_check(op, o)
        return x.new_zeros((b, d, t))
    cap, length = length, min(length, x.size(0), y.size(0))  # the longest valid sequence
    with allocation_of(op, f"the padded [B, N] = [{b}, {length}] rows of argument 'N'"):
        (gx, gy), _, _ = _gather(op, o, length, [x, y], False, cap)
    return torch.bmm(gx.transpose(1, 2), gy)


def _dense_checked(
    x: object, y: object, x_offsets: object, n: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    op = JD
    xv, yd = checked(op, "x", x, 2), checked(op, "y", y, 3)
    o, length = _args(op, xv, x_offsets, n)
    if length >= 2**31:  # upstream's jagged_dense_bmm reads it as a 32-bit int (wraps)
        raise ValueError(f"{op}: argument 'N' must be below 2**31, got {n}")
    check_same_dtype(op, x=xv, y=yd)
    check_same_device(op, x=xv, y=yd, x_offsets=o)
    if yd.size(0) != o.numel() - 1 or yd.size(1) != xv.size(1):
        raise ValueError(
            f"{op}: argument 'y' {tuple(yd.shape)} must be [B, D, T] with B = {o.numel() - 1} "
            f"(x_offsets.numel() - 1) and D = {xv.size(1)} (x.size(1))"
        )
    return xv, yd, o, length


def _jagged_checked(
    x: object, y: object, x_offsets: object, n: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    op = JJ
    xv, yv = checked(op, "x", x, 2), checked(op, "y", y, 2)
    o, length = _args(op, xv, x_offsets, n)
    check_same_dtype(op, x=xv, y=yv)
    check_same_device(op, x=xv, y=yv, x_offsets=o)
    return xv, yv, o, length


def sll_jagged_dense_bmm_npu(
    x: torch.Tensor,
    y: torch.Tensor,
    x_offsets: torch.Tensor,
    N: int,
    allow_tf32: bool,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    """``[rows, T]``, ``out[r] = x[r] @ y[b]``: see the module docstring (``allow_tf32`` and
    ``use_fbgemm_kernel`` change nothing, as on upstream's CPU)."""
    return jagged_dense(JD, *_dense_checked(x, y, x_offsets, N))


def sll_jagged_jagged_bmm_npu(
    x: torch.Tensor,
    y: torch.Tensor,
    x_offsets: torch.Tensor,
    N: int,
    allow_tf32: bool,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    """``[B, D, T]``, ``out[b] = sum_l x[r]^T y[r]``: see the module docstring."""
    return jagged_jagged(JJ, *_jagged_checked(x, y, x_offsets, N))


def _rows_of(g: torch.Tensor, n: int) -> torch.Tensor:
    """``g`` (``[rows', C]``) as ``n`` rows: rows past the shorter input are never read (0)."""
    if g.size(0) >= n:
        return g[:n]
    return torch.cat([g, g.new_zeros((n - g.size(0), g.size(1)))])


class _JaggedDense(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, o, length):  # type: ignore[override]
        ctx.save_for_backward(x, y, o)
        ctx.length = length
        return below_autograd(jagged_dense, JD, x, y, o, length)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, y, o = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = jagged_dense(JD, grad, y.transpose(1, 2), o, ctx.length)
        if ctx.needs_input_grad[1]:
            gy = jagged_jagged(JD, x, grad, o, ctx.length)
        return gx, gy, None, None


class _JaggedJagged(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, o, length):  # type: ignore[override]
        ctx.save_for_backward(x, y, o)
        ctx.length = length
        return below_autograd(jagged_jagged, JJ, x, y, o, length)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, y, o = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = _rows_of(jagged_dense(JJ, y, grad.transpose(1, 2), o, ctx.length), x.size(0))
        if ctx.needs_input_grad[1]:
            gy = _rows_of(jagged_dense(JJ, x, grad, o, ctx.length), y.size(0))
        return gx, gy, None, None


def _jd_autograd(
    x: torch.Tensor,
    y: torch.Tensor,
    x_offsets: torch.Tensor,
    N: int,
    allow_tf32: bool,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    if needs_grad(x, y):
        return _JaggedDense.apply(*_dense_checked(x, y, x_offsets, N))
    return below_autograd(torch.ops.fbgemm.sll_jagged_dense_bmm, x, y, x_offsets, N, allow_tf32)


def _jj_autograd(
    x: torch.Tensor,
    y: torch.Tensor,
    x_offsets: torch.Tensor,
    N: int,
    allow_tf32: bool,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    if needs_grad(x, y):
        return _JaggedJagged.apply(*_jagged_checked(x, y, x_offsets, N))
    return below_autograd(torch.ops.fbgemm.sll_jagged_jagged_bmm, x, y, x_offsets, N, allow_tf32)


def _jd_meta(
    x: torch.Tensor,
    y: torch.Tensor,
    x_offsets: torch.Tensor,
    N: int,
    allow_tf32: bool,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    """Upstream registers no Meta kernel: the shape of its CPU result."""
    return x.new_empty((x.size(0), y.size(-1)))


def _jj_meta(
    x: torch.Tensor,
    y: torch.Tensor,
    x_offsets: torch.Tensor,
    N: int,
    allow_tf32: bool,
    use_fbgemm_kernel: bool = True,
) -> torch.Tensor:
    """Upstream registers no Meta kernel: the shape of its CPU result."""
    return x.new_empty((x_offsets.size(0) - 1, x.size(1), y.size(1)))


KERNELS = {
    JD: {
        "PrivateUse1": sll_jagged_dense_bmm_npu,
        "AutogradPrivateUse1": _jd_autograd,
        "Meta": _jd_meta,
    },
    JJ: {
        "PrivateUse1": sll_jagged_jagged_bmm_npu,
        "AutogradPrivateUse1": _jj_autograd,
        "Meta": _jj_meta,
    },
}
