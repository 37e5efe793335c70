"""Jagged batched matmuls: ``fbgemm::jagged_jagged_bmm`` (+ ``_forward``) and
``fbgemm::jagged_dense_bmm`` (+ ``_forward``) on npu.

Shapes: ``x_values [N, M]`` (jagged ``[B, len_b, M]``), ``x_offsets [B + 1]``, ``max_L``;
``n_b = clamp(len_b, 0, max_L)``, ``r = x_offsets[b] + l`` for ``l < n_b``.  Math::

    jagged_jagged_bmm:  out[b] = sum_{l < n_b} x[r]^T y[r]      y_values [N', K] -> [B, M, K]
    jagged_dense_bmm:   out[r] = x[r] @ y[b]   (0 elsewhere)    y [B, M, K]      -> [N, K]

Autograd as upstream's: for ``jagged_jagged_bmm``, ``grad_x = jagged_dense_bmm(y, grad^T)``
and ``grad_y = jagged_dense_bmm(x, grad)``; for ``jagged_dense_bmm``, ``grad_x =
jagged_dense_bmm(grad, y^T)`` and ``grad_y = jagged_jagged_bmm(x, grad)`` (its offsets output
is a copy: one ``clone``; the schema declares no alias).  Dtypes: float32, float16, bfloat16
(one dtype for both; upstream's CPU kernels refuse the rest); offsets int32 or int64.

How: the family's ``[B, max_L]`` dense index (add, ge, the rows' clamp), one ``index_select``
per jagged input with its padding positions zeroed (so nothing upstream never reads, a
non-finite value included, reaches a sum), one ``bmm``; ``jagged_dense_bmm`` scatters the
``[B, max_L, K]`` products back into ``N + 1`` zero rows (padding at the spare row: where,
remainder, zeros, ``index_copy_``).  No host loop, no sync, nothing on a 910B's AI CPU.  The
data check (queued; ``FBGEMM_NPU_VALIDATE=0`` drops it): offsets in ``[0, 2**31)``, every row
read inside each jagged input, and (``jagged_dense_bmm``, which scatters) non-decreasing
offsets.  Shapes upstream does not check (``y``'s batch and inner dims) are refused by name.
Launches: ``BUDGETS`` in ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_ndim,
    check_same_device,
    check_same_dtype,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.jagged._utils import (
    READ_CHECK,
    assert_no_bad,
    dense_index,
    read_rows,
    write_rows,
)
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows

__all__ = ["KERNELS", "jagged_dense_bmm_forward_npu", "jagged_jagged_bmm_forward_npu"]

_F = torch.ops.fbgemm
JJ_BMM = "fbgemm::jagged_jagged_bmm"
JJ_BMM_FORWARD = "fbgemm::jagged_jagged_bmm_forward"
JD_BMM = "fbgemm::jagged_dense_bmm"
JD_BMM_FORWARD = "fbgemm::jagged_dense_bmm_forward"
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_OVERLAP = ", or its entries decrease (rows that overlap: upstream keeps the last write)"


def _checked(op: str, arg: str, t: object, ndim: int) -> torch.Tensor:
    t = check_tensor(op, arg, t)
    return check_ndim(op, arg, check_dtype(op, arg, t, _DTYPES), (ndim,))


def _offsets(op: str, x_offsets: object, max_l: object) -> tuple[torch.Tensor, int]:
    o = check_tensor(op, "x_offsets", x_offsets)
    o = check_ndim(op, "x_offsets", check_dtype(op, "x_offsets", o, INDEX_DTYPES), (1,))
    if o.numel() == 0:
        raise ValueError(f"{op}: argument 'x_offsets' must have at least one entry (B + 1)")
    if isinstance(max_l, bool) or not isinstance(max_l, int):
        raise ValueError(f"{op}: argument 'max_L' must be an int, got {type(max_l).__name__}")
    return o, max(max_l, 0)  # upstream reads no row for max_L < 0


def _gather(
    op: str, o: torch.Tensor, length: int, tensors: list[torch.Tensor], monotone: bool
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """Each of ``tensors`` (``[N_i, C_i]``, ``N_i > 0``) gathered to ``[B, L, C_i]`` with 0 at
    the padding positions, the padding mask and the (clamped) rows ``[B, L]``."""
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    idx, pad = dense_index([o], [length], bad)  # type: ignore[misc]
    n = min(t.size(0) for t in tensors)
    rows = read_rows(idx, pad, n, bad)
    if bad is not None and monotone:
        bad.append(o[:-1] > o[1:])
    assert_no_bad(op, bad, f"argument 'x_offsets': {READ_CHECK}{_OVERLAP if monotone else ''}")
    b, flat, mask = o.numel() - 1, rows.view(-1), pad.unsqueeze(-1)
    out = []
    for t in tensors:
        g = t.index_select(0, flat).view(b, length, t.size(1))
        out.append(g.masked_fill_(mask, 0))
    return out, pad, rows


def jagged_jagged_bmm_forward_npu(
    x_values: torch.Tensor, y_values: torch.Tensor, x_offsets: torch.Tensor, max_L: int
) -> torch.Tensor:
    """``[B, M, K]``: see the module docstring."""
    op = JJ_BMM_FORWARD
    x, y = _checked(op, "x_values", x_values, 2), _checked(op, "y_values", y_values, 2)
    o, length = _offsets(op, x_offsets, max_L)
    check_same_dtype(op, x_values=x, y_values=y)
    check_same_device(op, x_values=x, y_values=y, x_offsets=o)
    b, m, k = o.numel() - 1, x.size(1), y.size(1)
    if b == 0 or m == 0 or k == 0 or length == 0:  # upstream reads no element
        return x.new_zeros((b, m, k))
    if min(x.size(0), y.size(0)) == 0:  # any non-empty row would read past the end
        if validation_enabled():
            assert_no_bad(op, [o[1:] > o[:-1]], f"argument 'x_offsets': {READ_CHECK}")
        return x.new_zeros((b, m, k))
    (gx, gy), _, _ = _gather(op, o, length, [x, y], False)
    return torch.bmm(gx.transpose(1, 2), gy)


def jagged_dense_bmm_forward_npu(
    x_values: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor, max_L: int
) -> torch.Tensor:
    """``[N, K]``: see the module docstring."""
    op = JD_BMM_FORWARD
    x, yd = _checked(op, "x_values", x_values, 2), _checked(op, "y", y, 3)
    o, length = _offsets(op, x_offsets, max_L)
    check_same_dtype(op, x_values=x, y=yd)
    check_same_device(op, x_values=x, x_offsets=o, y=yd)
    b, n, m, k = o.numel() - 1, x.size(0), x.size(1), yd.size(2)
    if yd.size(0) != b or yd.size(1) != m:
        raise ValueError(
            f"{op}: argument 'y' {tuple(yd.shape)} must be [B, M, K] with B = {b} "
            f"(x_offsets.numel() - 1) and M = {m} (x_values.size(1))"
        )
    if b == 0 or n == 0 or k == 0 or length == 0:
        return x.new_zeros((n, k))
    (gx,), pad, rows = _gather(op, o, length, [x], True)
    prod = torch.bmm(gx, yd)
    out_rows = write_rows(rows, pad, n, None)  # padding positions at the spare row n
    return scatter_rows(prod.view(b * length, k), out_rows.view(-1), n)


def _rows_of(g: torch.Tensor, n: int) -> torch.Tensor:
    """``g`` (``[N', C]``, rows past the offsets' reach 0) as ``n`` rows: upstream's autograd
    returns ``N'`` rows (the other input's) and fails when ``x_values`` and ``y_values`` differ
    in rows; the rows past the shorter one are never read, so their gradient is 0."""
    if g.size(0) >= n:
        return g[:n]
    return torch.cat([g, g.new_zeros((n - g.size(0), g.size(1)))])


class _JaggedJaggedBmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, o, max_l):  # type: ignore[override]
        ctx.save_for_backward(x, y, o)
        ctx.max_l = max_l
        return below_autograd(_F.jagged_jagged_bmm_forward, x, y, o, max_l)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, y, o = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = _F.jagged_dense_bmm_forward(y, o, grad.transpose(1, 2), ctx.max_l)
            gx = _rows_of(gx, x.size(0))
        if ctx.needs_input_grad[1]:
            gy = _rows_of(_F.jagged_dense_bmm_forward(x, o, grad, ctx.max_l), y.size(0))
        return gx, gy, None, None


class _JaggedDenseBmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, o, y, max_l):  # type: ignore[override]
        ctx.save_for_backward(x, o, y)
        ctx.max_l = max_l
        return below_autograd(_F.jagged_dense_bmm_forward, x, o, y, max_l)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, o, y = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = _F.jagged_dense_bmm_forward(grad, o, y.transpose(1, 2), ctx.max_l)
        if ctx.needs_input_grad[2]:
            gy = _F.jagged_jagged_bmm_forward(x, grad, o, ctx.max_l)
        return gx, None, gy, None


def _jj_autograd(
    x_values: torch.Tensor, y_values: torch.Tensor, x_offsets: torch.Tensor, max_L: int
) -> torch.Tensor:
    if needs_grad(x_values, y_values):
        return _JaggedJaggedBmm.apply(x_values, y_values, x_offsets, max_L)
    return below_autograd(_F.jagged_jagged_bmm_forward, x_values, y_values, x_offsets, max_L)


def jagged_dense_bmm_npu(
    x_values: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor, max_L: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``fbgemm::jagged_dense_bmm`` below autograd: the forward and a copy of the offsets."""
    return jagged_dense_bmm_forward_npu(x_values, x_offsets, y, max_L), x_offsets.clone()


def _jd_autograd(
    x_values: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor, max_L: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if needs_grad(x_values, y):
        out = _JaggedDenseBmm.apply(x_values, x_offsets, y, max_L)
        return out, below_autograd(torch.clone, x_offsets)
    return below_autograd(_F.jagged_dense_bmm, x_values, x_offsets, y, max_L)


def _jd_meta(
    x_values: torch.Tensor, x_offsets: torch.Tensor, y: torch.Tensor, max_L: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream registers no Meta kernel for the composite op: shapes of its CPU kernel."""
    return x_values.new_empty((x_values.size(0), y.size(-1))), torch.empty_like(x_offsets)


KERNELS = {
    JJ_BMM: {"PrivateUse1": jagged_jagged_bmm_forward_npu, "AutogradPrivateUse1": _jj_autograd},
    JJ_BMM_FORWARD: {"PrivateUse1": jagged_jagged_bmm_forward_npu},
    JD_BMM: {
        "PrivateUse1": jagged_dense_bmm_npu,
        "AutogradPrivateUse1": _jd_autograd,
        "Meta": _jd_meta,
    },
    JD_BMM_FORWARD: {"PrivateUse1": jagged_dense_bmm_forward_npu},
}
