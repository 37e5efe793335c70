"""Jagged softmax: ``fbgemm::jagged_softmax`` (+ ``_forward``, ``_backward``) on npu.

Shapes: ``values [N, D]`` (jagged ``[B, len_b, D]``), ``x_offsets [B + 1]``, ``max_L``;
``n_b = clamp(len_b, 0, max_L)`` (``len_b = x_offsets[b + 1] - x_offsets[b]``).  Math, per row
``b`` and column ``d``, over its first ``n_b`` rows (``r = x_offsets[b] + l``, ``l < n_b``)::

    out[r, d] = exp(x[r, d] - m) / sum_{l' < n_b} exp(x[start_b + l', d] - m),  m = max_l' x

Backward (``y = out``, ``g = grad_output``)::

    grad_in[r, d] = y[r, d] * (g[r, d] - sum_{l' < n_b} g[start_b + l', d] * y[start_b + l', d])

Every other row of the result is 0 (upstream leaves it uninitialised: ``empty``).  Dtypes:
float32, float16, bfloat16 (upstream's CPU kernel refuses the rest); offsets int32 or int64.
``jagged_softmax`` returns ``(out, x_offsets)``, the offsets copied (one ``clone``: the schema
declares no alias).

How: the family's ``[B, max_L]`` dense index (:func:`checked_dense_index`: add, ge, the rows'
clamp), one ``index_select`` of the rows, ``-inf`` at the padding positions, ``softmax`` over
the jagged dim and the scatter back into ``N + 1`` zero rows (padding positions at the spare
row: where, remainder, zeros, ``index_copy_``).  The backward gathers ``g`` and ``y`` on the
same index, zeroes the padding products (so a non-finite ``g`` past a row's end, which upstream
never reads, cannot leak in), sums them, and scatters ``y * (g - sum)``.  No host loop, no
sync; nothing on a 910B's AI CPU.  The data check (queued; ``FBGEMM_NPU_VALIDATE=0`` drops it):
offsets in ``[0, 2**31)``, rows inside ``values`` and non-decreasing offsets (rows that overlap
would be written twice: upstream keeps the last, a scatter keeps any).  Launches: ``BUDGETS``.
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

__all__ = ["KERNELS", "jagged_softmax_backward_npu", "jagged_softmax_forward_npu"]

_F = torch.ops.fbgemm
JAGGED_SOFTMAX = "fbgemm::jagged_softmax"
JAGGED_SOFTMAX_FORWARD = "fbgemm::jagged_softmax_forward"
JAGGED_SOFTMAX_BACKWARD = "fbgemm::jagged_softmax_backward"
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_OVERLAP = ", or its entries decrease (rows that overlap: upstream keeps the last write)"


def _check(
    op: str, arg: str, values: object, x_offsets: object, max_l: object
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Returns values, x_offsets and ``max(max_L, 0)`` (upstream reads no row for max_L < 0)."""
    v = check_ndim(op, arg, check_dtype(op, arg, check_tensor(op, arg, values), _DTYPES), (2,))
    o = check_tensor(op, "x_offsets", x_offsets)
    o = check_ndim(op, "x_offsets", check_dtype(op, "x_offsets", o, INDEX_DTYPES), (1,))
    check_same_device(op, **{arg: v, "x_offsets": o})
    if o.numel() == 0:
        raise ValueError(f"{op}: argument 'x_offsets' must have at least one entry (B + 1)")
    if isinstance(max_l, bool) or not isinstance(max_l, int):
        raise ValueError(f"{op}: argument 'max_L' must be an int, got {type(max_l).__name__}")
    return v, o, max(max_l, 0)


def _index(
    op: str, o: torch.Tensor, length: int, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gather rows ``[B, L]`` (clamped into ``n > 0`` rows), the padding mask and the scatter
    rows ``[B * L]`` (padding at the spare row ``n``), with the queued data check."""
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    idx, pad = dense_index([o], [length], bad)  # type: ignore[misc]
    rows = read_rows(idx, pad, n, bad)
    if bad is not None:
        bad.append(o[:-1] > o[1:])
    assert_no_bad(op, bad, f"argument 'x_offsets': {READ_CHECK}{_OVERLAP}")
    return rows, pad, write_rows(rows, pad, n, None).view(-1)


def jagged_softmax_forward_npu(
    values: torch.Tensor, x_offsets: torch.Tensor, max_L: int
) -> torch.Tensor:
    """``out [N, D]``: see the module docstring."""
    op = JAGGED_SOFTMAX_FORWARD
    v, o, length = _check(op, "values", values, x_offsets, max_L)
    n, d, b = v.size(0), v.size(1), o.numel() - 1
    if n == 0 or d == 0 or b == 0 or length == 0:
        return v.new_zeros((n, d))
    rows, pad, out_rows = _index(op, o, length, n)
    g = v.index_select(0, rows.view(-1)).view(b, length, d)
    g.masked_fill_(pad.unsqueeze(-1), float("-inf"))
    # an all-padding row (n_b = 0) softmaxes to NaN: it goes to the spare row only
    s = torch.softmax(g, 1)
    return scatter_rows(s.view(b * length, d), out_rows, n)


def jagged_softmax_backward_npu(
    grad_output: torch.Tensor, output: torch.Tensor, x_offsets: torch.Tensor, max_L: int
) -> torch.Tensor:
    """``grad_values [N, D]``: see the module docstring."""
    op = JAGGED_SOFTMAX_BACKWARD
    y, o, length = _check(op, "output", output, x_offsets, max_L)
    g = check_ndim(op, "grad_output", check_tensor(op, "grad_output", grad_output), (2,))
    check_same_dtype(op, grad_output=g, output=y)
    check_same_device(op, grad_output=g, output=y)
    if g.shape != y.shape:
        raise ValueError(
            f"{op}: argument 'grad_output' {tuple(g.shape)} must have output's shape "
            f"{tuple(y.shape)}"
        )
    n, d, b = y.size(0), y.size(1), o.numel() - 1
    if n == 0 or d == 0 or b == 0 or length == 0:
        return y.new_zeros((n, d))
    rows, pad, out_rows = _index(op, o, length, n)
    flat = rows.view(-1)
    gy = y.index_select(0, flat).view(b, length, d)
    gg = g.index_select(0, flat).view(b, length, d)
    prod = gg * gy
    prod.masked_fill_(pad.unsqueeze(-1), 0)
    res = (gg - prod.sum(1, keepdim=True)) * gy
    return scatter_rows(res.view(b * length, d), out_rows, n)


class _JaggedSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, x_offsets, max_l):  # type: ignore[override]
        out = below_autograd(_F.jagged_softmax_forward, values, x_offsets, max_l)
        ctx.save_for_backward(out, x_offsets)
        ctx.max_l = max_l
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        out, o = ctx.saved_tensors
        return _F.jagged_softmax_backward(grad, out, o, ctx.max_l), None, None


def jagged_softmax_npu(
    values: torch.Tensor, x_offsets: torch.Tensor, max_L: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``fbgemm::jagged_softmax`` below autograd: the forward and a copy of the offsets."""
    out = jagged_softmax_forward_npu(values, x_offsets, max_L)
    return out, x_offsets.clone()


def _autograd(
    values: torch.Tensor, x_offsets: torch.Tensor, max_L: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if needs_grad(values):
        out = _JaggedSoftmax.apply(values, x_offsets, max_L)
        return out, below_autograd(torch.clone, x_offsets)
    return below_autograd(_F.jagged_softmax, values, x_offsets, max_L)


def _meta(
    values: torch.Tensor, x_offsets: torch.Tensor, max_L: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream registers no Meta kernel for the composite op: shapes of its CPU kernel."""
    return torch.empty_like(values), torch.empty_like(x_offsets)


KERNELS = {
    JAGGED_SOFTMAX: {
        "PrivateUse1": jagged_softmax_npu,
        "AutogradPrivateUse1": _autograd,
        "Meta": _meta,
    },
    JAGGED_SOFTMAX_FORWARD: {"PrivateUse1": jagged_softmax_forward_npu},
    JAGGED_SOFTMAX_BACKWARD: {"PrivateUse1": jagged_softmax_backward_npu},
}
