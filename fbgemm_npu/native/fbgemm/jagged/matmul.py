"""Batched dense vector x jagged 2-D matrix: ``fbgemm::batched_dense_vec_jagged_2d_mul``
(+ ``_forward``, ``_backward``) on npu.

Shapes: ``v [B*H, L]``, ``a_values [N, H*D]`` (jagged ``[B, len_b, H*D]``), ``a_offsets [B + 1]``;
``H = v.size(0) / B`` (1 when B = 0), ``D = a_values.size(1) // H``, ``L = v.size(1)``.  Math::

    out[b*H + h, d] = sum_{l < min(len_b, L)} v[b*H + h, l] * a[start_b + l, h*D + d]   [B*H, D]

Backward::

    v_grad[b*H + h, l]          = sum_d grad[b*H + h, d] * a[start_b + l, h*D + d]  (0 past len)
    a_grad[start_b + l, h*D + d] = v[b*H + h, l] * grad[b*H + h, d]               (0 elsewhere)

Products are formed in the input dtype and summed with a float32 accumulator for half types, as
upstream's ``acc_type`` loops do.  Dtypes: float32, float16, bfloat16 (one dtype for v
and a_values); offsets int32 or int64.

How: ``dense_index`` (k = 1: add, ge; rows clamped into ``a_values``, so padding positions read
some row), one ``index_select`` of the ``[B, L]`` rows of ``a``, a broadcast ``mul`` with ``v``,
a ``masked_fill_`` of the padding products (so a non-finite ``v`` past a row's end cannot leak
in, as upstream never reads it) and a ``sum`` over ``L``; no step runs on a 910B's AI CPU (the
backward scatters with ``index_add_`` at dim 0, not an accumulating ``index_put_``); the data
check comes on top (``FBGEMM_NPU_VALIDATE=0`` drops it): offsets in ``[0, 2**31)``,
non-decreasing (upstream has no consistent result for decreasing ones: see ``_DECREASING``) and
rows inside ``a_values``.  ``v`` must have rows (H >= 1 heads; upstream divides by H).  The
backward computes both gradients on the forward's index.  Launches and syncs: ``BUDGETS`` in
``budgets.py`` (docs/ops.md).
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
    beyond_rows,
    dense_index,
    int32_bad,
    read_rows,
)

__all__ = [
    "KERNELS",
    "batched_dense_vec_jagged_2d_mul_backward_npu",
    "batched_dense_vec_jagged_2d_mul_forward_npu",
]

_F = torch.ops.fbgemm
BATCHED_DENSE_VEC_JAGGED_2D_MUL = "fbgemm::batched_dense_vec_jagged_2d_mul"
BATCHED_DENSE_VEC_JAGGED_2D_MUL_FORWARD = "fbgemm::batched_dense_vec_jagged_2d_mul_forward"
BATCHED_DENSE_VEC_JAGGED_2D_MUL_BACKWARD = "fbgemm::batched_dense_vec_jagged_2d_mul_backward"
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Upstream's forward reads the first row of a row whose offsets decrease (its loop starts before
# the length test) while its backward reads none, and its backward assigns (not adds) the
# products of rows that overlap: no result to match, so both refuse decreasing offsets.
_DECREASING = (
    ", or its entries decrease (upstream has no consistent result for such rows: its forward "
    "reads their first row, its backward keeps one product of rows that overlap)"
)


def _check(
    op: str, v: object, a_values: object, a_offsets: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int, int]:
    """Returns v, a_values, a_offsets, B, H, D."""
    v = check_ndim(op, "v", check_dtype(op, "v", check_tensor(op, "v", v), _DTYPES), (2,))
    a = check_tensor(op, "a_values", a_values)
    a = check_ndim(op, "a_values", check_dtype(op, "a_values", a, _DTYPES), (2,))
    o = check_tensor(op, "a_offsets", a_offsets)
    o = check_ndim(op, "a_offsets", check_dtype(op, "a_offsets", o, INDEX_DTYPES), (1,))
    check_same_dtype(op, v=v, a_values=a)
    check_same_device(op, v=v, a_values=a, a_offsets=o)
    if o.numel() == 0:
        raise ValueError(f"{op}: argument 'a_offsets' must have at least one entry (B + 1)")
    b = o.numel() - 1
    if b > 0 and (v.size(0) % b != 0 or v.size(0) == 0):
        # v.size(0) == 0: H = 0 heads, which upstream then divides a_values.size(1) by (SIGFPE)
        raise ValueError(
            f"{op}: B = {b} (a_offsets.numel() - 1) must divide v.size(0) = {v.size(0)} into "
            "H >= 1 heads"
        )
    h = 1 if b == 0 else v.size(0) // b
    return v, a, o, b, h, (a.size(1) // h if h > 0 else 0)


def _gather(
    op: str,
    a: torch.Tensor,
    o: torch.Tensor,
    b: int,
    h: int,
    d: int,
    length: int,
    monotone: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """``a`` rows on the ``[B, L]`` grid as ``[B, L, H, D]`` (padding positions hold some row),
    the padding mask and the row index; ``None`` when ``a`` has no rows (every position must
    then be padding).  ``monotone``: the data check also refuses decreasing offsets (a ``gt``
    and the ``cat`` of the two checks)."""
    n = a.size(0)
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    idx, pad = dense_index([o], [length], bad)  # type: ignore[misc]
    rows = read_rows(idx, pad, n, bad) if n > 0 else None
    if bad is not None:
        if rows is None:
            bad.append(beyond_rows(idx, pad, n))
        if monotone:
            bad.append(o[:-1] > o[1:])
    what = READ_CHECK + (_DECREASING if monotone else "")
    assert_no_bad(op, bad, f"argument 'a_offsets': {what}")
    if rows is None:
        return None
    flat = rows.reshape(-1)
    return a[:, : h * d].index_select(0, flat).view(b, length, h, d), pad, flat


def batched_dense_vec_jagged_2d_mul_forward_npu(
    v: torch.Tensor, a_values: torch.Tensor, a_offsets: torch.Tensor
) -> torch.Tensor:
    """``out [B*H, D]``: see the module docstring."""
    op = BATCHED_DENSE_VEC_JAGGED_2D_MUL_FORWARD
    v, a, o, b, h, d = _check(op, v, a_values, a_offsets)
    length = v.size(1)
    if b == 0 or d == 0:
        return v.new_zeros((b * h, d))
    if length == 0:  # no position; upstream still reads v[:, 0] for a decreasing row
        if validation_enabled():
            bad = [int32_bad(o), o[:-1] > o[1:]]
            assert_no_bad(op, bad, f"argument 'a_offsets': {READ_CHECK}{_DECREASING}")
        return v.new_zeros((b * h, d))
    got = _gather(op, a, o, b, h, d, length, monotone=True)
    if got is None:
        return v.new_zeros((b * h, d))
    g, pad, _ = got
    # [B, L, H, 1] * [B, L, H, D]: v[b*H + h, l] broadcast over d.
    prod = v.reshape(b, h, length).transpose(1, 2).unsqueeze(-1) * g
    prod.masked_fill_(pad.view(b, length, 1, 1), 0)
    return prod.sum(1).view(b * h, d)


def batched_dense_vec_jagged_2d_mul_backward_npu(
    grad_output: torch.Tensor, v: torch.Tensor, a_values: torch.Tensor, a_offsets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(v_grad [B*H, L], a_values_grad [N, a_values.size(1)])``."""
    op = BATCHED_DENSE_VEC_JAGGED_2D_MUL_BACKWARD
    v, a, o, b, h, _ = _check(op, v, a_values, a_offsets)
    grad = check_ndim(op, "grad_output", check_tensor(op, "grad_output", grad_output), (2,))
    check_same_dtype(op, grad_output=grad, v=v)
    check_same_device(op, grad_output=grad, v=v)
    d, length = grad.size(1), v.size(1)
    if grad.size(0) != b * h or (h * d > a.size(1)):
        raise ValueError(
            f"{op}: argument 'grad_output' {tuple(grad.shape)} must be [B*H, D] = [{b * h}, D] "
            f"with H*D <= a_values.size(1) = {a.size(1)}"
        )
    if b == 0 or d == 0 or length == 0:
        return torch.zeros_like(v), torch.zeros_like(a)
    # monotone: upstream's backward assigns each row's product, so rows that overlap (only
    # decreasing offsets make them) keep the last one, where the gradient is their sum
    got = _gather(op, a, o, b, h, d, length, monotone=True)
    if got is None:
        return torch.zeros_like(v), torch.zeros_like(a)
    g, pad, rows = got
    mask = pad.view(b, length, 1, 1)
    gr = grad.view(b, 1, h, d)
    # v's strides, as upstream's Meta kernel (empty_like(v)): the sum over d writes [B, L, H]
    # straight into the [B, H, L] split of v_grad's rows (a view for any strides of v).
    v_grad = torch.empty_like(v)
    by_position = v_grad.view(b, h, length).permute(0, 2, 1)  # [B, L, H]
    torch.sum(g * gr, -1, out=by_position)
    by_position.masked_fill_(pad.unsqueeze(-1), 0)  # after the sum: [B, L, H], not [B, L, H, D]
    outer = v.new_empty((b, length, h, d))  # written in place: contiguous, no copy to flatten
    torch.mul(v.reshape(b, h, length).transpose(1, 2).unsqueeze(-1), gr, out=outer)
    outer.masked_fill_(mask, 0)  # padding positions add 0 to the row they read
    a_grad = torch.zeros_like(a)  # index_add_ at dim 0: on a 910B's AI Core for half types too
    a_grad[:, : h * d].index_add_(0, rows, outer.view(b * length, h * d))
    return v_grad, a_grad


class _BatchedDenseVecJagged2DMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v, a_values, a_offsets):  # type: ignore[override]
        ctx.save_for_backward(v, a_values, a_offsets)
        return below_autograd(_F.batched_dense_vec_jagged_2d_mul_forward, v, a_values, a_offsets)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        v, a, o = ctx.saved_tensors
        gv, ga = _F.batched_dense_vec_jagged_2d_mul_backward(grad, v, a, o)
        return gv, ga, None


def _autograd(v: torch.Tensor, a_values: torch.Tensor, a_offsets: torch.Tensor) -> torch.Tensor:
    if needs_grad(v, a_values):
        return _BatchedDenseVecJagged2DMul.apply(v, a_values, a_offsets)
    return below_autograd(_F.batched_dense_vec_jagged_2d_mul_forward, v, a_values, a_offsets)


def batched_dense_vec_jagged_2d_mul_npu(
    v: torch.Tensor, a_values: torch.Tensor, a_offsets: torch.Tensor
) -> torch.Tensor:
    """``fbgemm::batched_dense_vec_jagged_2d_mul`` below autograd: the forward."""
    return batched_dense_vec_jagged_2d_mul_forward_npu(v, a_values, a_offsets)


KERNELS = {
    BATCHED_DENSE_VEC_JAGGED_2D_MUL: {
        "PrivateUse1": batched_dense_vec_jagged_2d_mul_npu,
        "AutogradPrivateUse1": _autograd,
    },
    BATCHED_DENSE_VEC_JAGGED_2D_MUL_FORWARD: {
        "PrivateUse1": batched_dense_vec_jagged_2d_mul_forward_npu
    },
    BATCHED_DENSE_VEC_JAGGED_2D_MUL_BACKWARD: {
        "PrivateUse1": batched_dense_vec_jagged_2d_mul_backward_npu
    },
}
