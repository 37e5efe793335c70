"""``fbgemm::sll_jagged2_to_padded_dense`` on npu: one ``n_b x n_b`` matrix per batch row to
``[B, max_length, max_length]``.

Math (upstream's CPU kernel): ``values [E]`` holds, from ``offsets[b]``, ``len_b = offsets[b + 1]
- offsets[b] = n_b**2`` elements, row-major; ``out[b, i, j] = values[offsets[b] + i * n_b + j]``
for ``i, j < n_b``, ``padding_value`` elsewhere (cast as ``torch.full`` casts it: integers
truncate).  Backward: ``grad_values[offsets[b] + i * n_b + j] = grad[b, i, j]``, 0 at elements no
matrix covers.  Any float or int32 / int64 values (upstream's kernel is plain torch); 1-D values
(upstream's ``view(n_b, n_b)`` of a slice; a 2-D ``[E, 1]`` one, which it also takes, is
refused by name).

How: ``n_b = round(sqrt(len_b))`` (float32: exact for every ``n_b < 2**24``), the family's square
index (mul, add, add, ge, logical_or), one gather of the clamped positions and the padding set
after it (``masked_fill_``; int64: ``where``).  Upstream raises for a length that is not a square
and for ``n_b > max_length`` (a shape mismatch): ours queues one data check for both, with
offsets in ``[0, 2**31)``, non-decreasing, inside ``values``.  No host loop, no sync.  Launches:
``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.jagged._utils import (
    JAGGED_DTYPES,
    assert_no_bad,
    fill_padding,
    int32_bad,
    padding_scalar,
    write_rows,
)
from fbgemm_npu.native.fbgemm.sll_attention._common import check_int, check_offsets, square_index

__all__ = ["KERNELS", "sll_jagged2_to_padded_dense_npu"]

_F = torch.ops.fbgemm
PADDED = "fbgemm::sll_jagged2_to_padded_dense"
_DTYPES = (*JAGGED_DTYPES, torch.float64)
_CHECK = (
    "argument 'offsets': every length offsets[b + 1] - offsets[b] must be a square n_b**2 with "
    "n_b <= max_length (upstream raises otherwise), offsets non-decreasing, in [0, 2**31) and "
    "at most values.numel()"
)


def _check(
    values: object, offsets: object, max_length: object
) -> tuple[torch.Tensor, torch.Tensor, int]:
    op = PADDED
    v = check_ndim(
        op, "values", check_dtype(op, "values", check_tensor(op, "values", values), _DTYPES), (1,)
    )
    o = check_offsets(op, "offsets", offsets)
    check_same_device(op, values=v, offsets=o)
    m = check_int(op, "max_length", max_length)
    if m < 0:  # upstream: torch.full's RuntimeError on a negative dim
        raise RuntimeError(f"{op}: argument 'max_length' must be >= 0, got {m}")
    return v, o, m


def _sizes(o: torch.Tensor, m: int, e: int, checks: bool) -> torch.Tensor:
    """``n_b = round(sqrt(len_b))`` (int64), with the queued data check when ``checks``."""
    lens = o[1:] - o[:-1]
    n = lens.float().sqrt_().round_().long()
    if checks and validation_enabled():
        bad = [int32_bad(o), lens < 0, n * n != lens, n > m, o[1:] > e]
        assert_no_bad(PADDED, bad, _CHECK)
    return n


def _index(
    o: torch.Tensor, m: int, e: int, checks: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(read, pad, write)`` ``[B, m, m]`` positions in ``e > 0`` values (+ the data check)."""
    n = _sizes(o, m, e, checks)
    pos, pad = square_index(o[:-1], n, m)
    write = write_rows(pos, pad, e, None)
    return pos.clamp_(0, e - 1), pad, write


def sll_jagged2_to_padded_dense_npu(
    values: torch.Tensor, offsets: torch.Tensor, max_length: int, padding_value: float = 0.0
) -> torch.Tensor:
    """``[B, max_length, max_length]``: see the module docstring.  Launches: sub, the float
    cast, sqrt_, round_, the int64 cast, the square index (5), where, remainder, clamp_,
    index_select, masked_fill_ (int64 values: a where and its scalar)."""
    v, o, m = _check(values, offsets, max_length)
    b, e = o.numel() - 1, v.numel()
    fill = padding_scalar(float(padding_value), v.dtype)
    if b == 0 or m == 0 or e == 0:
        if b > 0:  # a non-empty matrix cannot fit: the check still runs
            _sizes(o, m, e, True)
        with allocation_of(PADDED, f"the output [B, {m}, {m}] of 'max_length'"):
            return torch.full((b, m, m), fill, dtype=v.dtype, device=v.device)
    with allocation_of(PADDED, f"the output [B, {m}, {m}] of 'max_length'"):
        read, pad, _ = _index(o, m, e, True)
        g = v.index_select(0, read.view(-1))
        return fill_padding(g, pad.view(-1), fill).view(b, m, m)


def _backward(grad: torch.Tensor, o: torch.Tensor, m: int, e: int) -> torch.Tensor:
    """``grad_values [e]``: ``grad`` at each matrix's positions, 0 elsewhere."""
    b = o.numel() - 1
    if b == 0 or m == 0 or e == 0:
        return grad.new_zeros(e)
    _, _, write = _index(o, m, e, False)
    out = grad.new_zeros(e + 1)
    out.index_put_((write.view(-1),), grad.reshape(-1))
    return out[:e]


class _Padded(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, offsets, max_length, padding_value):  # type: ignore[override]
        out = below_autograd(
            _F.sll_jagged2_to_padded_dense, values, offsets, max_length, padding_value
        )
        ctx.save_for_backward(offsets)
        ctx.m, ctx.e = max_length, values.numel()
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (o,) = ctx.saved_tensors
        return _backward(grad, o, ctx.m, ctx.e), None, None, None


def _autograd(
    values: torch.Tensor, offsets: torch.Tensor, max_length: int, padding_value: float = 0.0
) -> torch.Tensor:
    if needs_grad(values):
        _check(values, offsets, max_length)
        return _Padded.apply(values, offsets, max_length, padding_value)
    return below_autograd(
        _F.sll_jagged2_to_padded_dense, values, offsets, max_length, padding_value
    )


def _meta(
    values: torch.Tensor, offsets: torch.Tensor, max_length: int, padding_value: float = 0.0
) -> torch.Tensor:
    """Upstream registers no Meta kernel: its CPU kernel's shape."""
    return values.new_empty((offsets.size(0) - 1, max_length, max_length))


KERNELS = {
    PADDED: {
        "PrivateUse1": sll_jagged2_to_padded_dense_npu,
        "AutogradPrivateUse1": _autograd,
        "Meta": _meta,
    }
}
