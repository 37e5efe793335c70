"""``mxrec::relative_attn_bias_time`` (+ ``_with_index``, ``_backward``): Rec SDK's time bias.

Schemas (Rec SDK, ``relative_attn_bias_time.cpp``)::

    relative_attn_bias_time(Tensor timestamps, Tensor timestamps_weights, float bucket_divisor)
        -> Tensor
    relative_attn_bias_time_with_index(Tensor timestamps, Tensor timestamps_weights,
        float bucket_divisor) -> Tensor[]
    relative_attn_bias_time_backward(Tensor rab_time_grad, Tensor bucket_timestamps,
        int num_buckets) -> Tensor

Forward: ``timestamps`` ``(b, s)`` int32 (int64 too), ``timestamps_weights`` ``(L, W)`` float16 /
float32 / bfloat16 (``W = num_buckets + 1``), ``bucket_divisor > 0``::

    bucket[b, i, j] = min(trunc(log(max(|t[b, j] - t[b, i]|, 1)) / bucket_divisor), W - 1)
    rab[l, b, 2i + x, 2j + y] = weights[l, bucket[b, i, j]]      (x, y in {0, 1})

``rab`` is ``(L, b, 2s, 2s)`` (each item is two tokens: a 2x2 block per item pair);
``_with_index`` returns ``[rab, bucket]``, ``bucket`` ``(b, s, s)`` int32.  The top clamp is at
the last weight row ``W - 1`` (Rec SDK's op_host tiling code clamps the scaled log at
``W``, one past the table; its golden and GR's bias clamp at the last bucket).  The difference
is taken in int64 (two int32 timestamps differ by up to 2**32 - 1), the log in float32, as
Rec SDK's golden does; buckets are by log arithmetic, no ``searchsorted`` / ``bucketize``.

Backward (``num_buckets`` columns, Rec SDK's ``relative_attn_bias_backward`` kernel; autograd
passes ``W``)::

    grad_weights[l, k] = sum over (b, i, j, x, y) with bucket[b, i, j] == k of
                         rab_time_grad[l, b, 2i + x, 2j + y]

summed in float32 (a 2x2 block sum, then one ``index_add_`` along dim 0 of a float32 table),
returned in the gradient's dtype.  Buckets outside ``[0, num_buckets)`` are clamped (memory
safety) and refused by a queued data check.  Autograd (PrivateUse1 and CPU): ``rab`` is
differentiable in ``timestamps_weights`` only.

Launches: forward 11 (the int64 widening of ``timestamps``, the difference, its float32 cast,
``abs_``, ``clamp_min_``, ``log_``, ``div_``, ``clamp_max_``, the int32 cast = the bucket; the
2x2-expanded index, one ``index_select`` of the weights); backward 5 (the block sum, the
bucket clamp, the zero table, ``index_add_``, the transposed copy / cast), checks 2 (``eq``,
``all``).  None on a 910B's AI CPU; no sync.
"""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_on_device,
    check_same_device,
    check_tensor,
    validation_enabled,
)

__all__ = [
    "KERNELS",
    "RELATIVE_ATTN_BIAS_TIME",
    "RELATIVE_ATTN_BIAS_TIME_BACKWARD",
    "RELATIVE_ATTN_BIAS_TIME_WITH_INDEX",
    "SCHEMAS",
]

RELATIVE_ATTN_BIAS_TIME = "mxrec::relative_attn_bias_time"
RELATIVE_ATTN_BIAS_TIME_WITH_INDEX = "mxrec::relative_attn_bias_time_with_index"
RELATIVE_ATTN_BIAS_TIME_BACKWARD = "mxrec::relative_attn_bias_time_backward"
_ARGS = "(Tensor timestamps, Tensor timestamps_weights, float bucket_divisor)"
SCHEMAS = {
    RELATIVE_ATTN_BIAS_TIME: f"relative_attn_bias_time{_ARGS} -> Tensor",
    RELATIVE_ATTN_BIAS_TIME_WITH_INDEX: f"relative_attn_bias_time_with_index{_ARGS} -> Tensor[]",
    RELATIVE_ATTN_BIAS_TIME_BACKWARD: "relative_attn_bias_time_backward(Tensor rab_time_grad, "
    "Tensor bucket_timestamps, int num_buckets) -> Tensor",
}
WEIGHT_DTYPES = (torch.float16, torch.float32, torch.bfloat16)
TIME_DTYPES = (torch.int32, torch.int64)


def _check_forward(
    op: str, timestamps: object, timestamps_weights: object, bucket_divisor: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Host checks (no launch): ``(b, s)`` integer timestamps, ``(L, W >= 1)`` float weights on
    the same device, a finite divisor ``> 0``."""
    t = check_tensor(op, "timestamps", timestamps)
    w = check_tensor(op, "timestamps_weights", timestamps_weights)
    check_dtype(op, "timestamps", check_ndim(op, "timestamps", t, (2,)), TIME_DTYPES)
    w = check_ndim(op, "timestamps_weights", w, (2,))
    check_dtype(op, "timestamps_weights", w, WEIGHT_DTYPES)
    if w.size(1) == 0:
        raise ValueError(
            f"{op}: argument 'timestamps_weights' must have at least one bucket column (shape "
            f"(num_layers, num_buckets + 1)), got shape {tuple(w.shape)}"
        )
    if not (math.isfinite(bucket_divisor) and bucket_divisor > 0):
        raise ValueError(
            f"{op}: argument 'bucket_divisor' must be a finite float > 0, got {bucket_divisor}"
        )
    check_same_device(op, timestamps=t, timestamps_weights=w)
    return t, w


def _buckets(t: torch.Tensor, last: int, bucket_divisor: float) -> torch.Tensor:
    """``(b, s, s)`` int32 ``min(trunc(log(max(|t_j - t_i|, 1)) / divisor), last)`` (9
    launches).  int64 difference: exact for any two int32 (or int64 within 2**62) stamps."""
    t64 = t.to(torch.int64)
    f = (t64[:, None, :] - t64[:, :, None]).to(torch.float32)
    f.abs_().clamp_min_(1.0).log_().div_(bucket_divisor)
    # log >= 0, so only the top clamp; clamped in float so the int cast stays in range
    return f.clamp_max_(float(last)).to(torch.int32)


def _rab(w: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """``(L, b, 2s, 2s)``: each bucket a 2x2 block of its weight (2 launches: the expanded
    index, one gather of ``L * b * 4 s**2`` weights)."""
    b, s, _ = bucket.shape
    index = bucket[:, :, None, :, None].expand(b, s, 2, s, 2).reshape(-1)
    return w.index_select(1, index).view(w.size(0), b, 2 * s, 2 * s)


def _grid(t: torch.Tensor, w: torch.Tensor) -> str:
    """What an allocation failure names: the sizes 'timestamps' and 'timestamps_weights' ask."""
    b, s = t.shape
    return (
        f"the (b, s, s) = {(b, s, s)} bucket grid of 'timestamps' and the (L, b, 2s, 2s) = "
        f"{(w.size(0), b, 2 * s, 2 * s)} output of 'timestamps_weights'"
    )


def relative_attn_bias_time_with_index(
    timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float
) -> list[torch.Tensor]:
    """PrivateUse1 / CPU: ``[rab (L, b, 2s, 2s), bucket (b, s, s) int32]`` (11 launches)."""
    op = RELATIVE_ATTN_BIAS_TIME_WITH_INDEX
    t, w = _check_forward(op, timestamps, timestamps_weights, bucket_divisor)
    with allocation_of(op, _grid(t, w)):
        bucket = _buckets(t, w.size(1) - 1, bucket_divisor)
        return [_rab(w, bucket), bucket]


def relative_attn_bias_time(
    timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float
) -> torch.Tensor:
    """PrivateUse1 / CPU: ``rab (L, b, 2s, 2s)`` (11 launches)."""
    t, w = _check_forward(RELATIVE_ATTN_BIAS_TIME, timestamps, timestamps_weights, bucket_divisor)
    with allocation_of(RELATIVE_ATTN_BIAS_TIME, _grid(t, w)):
        return _rab(w, _buckets(t, w.size(1) - 1, bucket_divisor))


def _forward_meta(op: str, timestamps: object, weights: object, divisor: float) -> list:
    t, w = _check_forward(op, timestamps, weights, divisor)
    b, s = t.shape
    return [w.new_empty((w.size(0), b, 2 * s, 2 * s)), t.new_empty((b, s, s), dtype=torch.int32)]


def _check_backward(
    grad: object, bucket: object, num_buckets: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Host checks (no launch): ``(L, b, 2s, 2s)`` float grad, ``(b, s, s)`` integer buckets on
    its device, ``num_buckets >= 0`` (``> 0`` where a bucket exists)."""
    op = RELATIVE_ATTN_BIAS_TIME_BACKWARD
    g = check_tensor(op, "rab_time_grad", grad)
    k = check_tensor(op, "bucket_timestamps", bucket)
    check_dtype(op, "rab_time_grad", check_ndim(op, "rab_time_grad", g, (4,)), WEIGHT_DTYPES)
    k = check_ndim(op, "bucket_timestamps", k, (3,))
    check_dtype(op, "bucket_timestamps", k, TIME_DTYPES)
    b, s, s2 = k.shape
    if s2 != s or tuple(g.shape[1:]) != (b, 2 * s, 2 * s):
        raise ValueError(
            f"{op}: arguments 'rab_time_grad' (L, b, 2s, 2s) and 'bucket_timestamps' (b, s, s) "
            f"must agree, got shapes {tuple(g.shape)} and {tuple(k.shape)}"
        )
    if num_buckets < 0 or (num_buckets == 0 and k.numel() > 0):
        raise ValueError(
            f"{op}: argument 'num_buckets' must be > 0 (>= 0 without buckets), got {num_buckets}"
        )
    check_same_device(op, rab_time_grad=g, bucket_timestamps=k)
    return g, k


def relative_attn_bias_time_backward(
    rab_time_grad: torch.Tensor, bucket_timestamps: torch.Tensor, num_buckets: int
) -> torch.Tensor:
    """PrivateUse1 / CPU: ``(L, num_buckets)`` in the gradient's dtype (5 launches, checks 2)."""
    g, k = _check_backward(rab_time_grad, bucket_timestamps, num_buckets)
    n_layers, s = g.size(0), k.size(1)
    # the 2x2 block sums, laid out (b, s, s, L) so the scatter runs along dim 0; unflatten of
    # one dim is always a view (any strides), the float32 sum the only pass over the gradient
    blocks = g.unflatten(2, (s, 2)).unflatten(4, (s, 2)).permute(1, 2, 4, 0, 3, 5)
    src = blocks.sum((4, 5), dtype=torch.float32).view(-1, n_layers)
    what = f"the (num_buckets, L) = {(num_buckets, n_layers)} table of 'num_buckets'"
    with allocation_of(RELATIVE_ATTN_BIAS_TIME_BACKWARD, what):
        table = torch.zeros((num_buckets, n_layers), dtype=torch.float32, device=g.device)
        out = torch.empty((n_layers, num_buckets), dtype=g.dtype, device=g.device)
    if k.numel() > 0:
        index = k.clamp(0, num_buckets - 1)  # memory-safe under deferred checks
        if validation_enabled():
            check_on_device(
                RELATIVE_ATTN_BIAS_TIME_BACKWARD,
                torch.eq(index, k).all(),
                f"argument 'bucket_timestamps' must hold buckets in [0, {num_buckets})",
            )
        # a bucket index in another layout (transposed) is copied once into logical order
        table.index_add_(0, index.reshape(-1), src)
    return out.copy_(table.t())  # contiguous (L, num_buckets), cast where g is half


def _backward_meta(grad: torch.Tensor, bucket: torch.Tensor, num_buckets: int) -> torch.Tensor:
    g, _ = _check_backward(grad, bucket, num_buckets)
    return g.new_empty((g.size(0), num_buckets))


class _TimeBias(torch.autograd.Function):
    """``rab`` and its bucket index; the gradient of the weights by the backward op."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        timestamps: torch.Tensor,
        weights: torch.Tensor,
        bucket_divisor: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        op = torch.ops.mxrec.relative_attn_bias_time_with_index
        rab, bucket = below_autograd(op, timestamps, weights, bucket_divisor)
        ctx.save_for_backward(bucket)
        ctx.num_buckets = weights.size(1)
        ctx.mark_non_differentiable(bucket)
        return rab, bucket

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_rab: torch.Tensor, _grad_bucket: object
    ) -> tuple[None, torch.Tensor | None, None]:
        (bucket,) = ctx.saved_tensors
        if grad_rab is None or not ctx.needs_input_grad[1]:
            return None, None, None
        backward = torch.ops.mxrec.relative_attn_bias_time_backward
        return None, backward(grad_rab, bucket, ctx.num_buckets), None


def _time_autograd(
    timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float
) -> torch.Tensor:
    """AutogradPrivateUse1 / AutogradCPU: recorded only when the weights need a gradient."""
    if not needs_grad(timestamps_weights):
        return below_autograd(
            torch.ops.mxrec.relative_attn_bias_time, timestamps, timestamps_weights, bucket_divisor
        )
    return _TimeBias.apply(timestamps, timestamps_weights, bucket_divisor)[0]


def _with_index_autograd(
    timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float
) -> list[torch.Tensor]:
    """AutogradPrivateUse1 / AutogradCPU of ``_with_index``: ``rab`` differentiable."""
    if not needs_grad(timestamps_weights):
        return below_autograd(
            torch.ops.mxrec.relative_attn_bias_time_with_index,
            timestamps,
            timestamps_weights,
            bucket_divisor,
        )
    return list(_TimeBias.apply(timestamps, timestamps_weights, bucket_divisor))


KERNELS = {
    RELATIVE_ATTN_BIAS_TIME: {
        "PrivateUse1": relative_attn_bias_time,
        "CPU": relative_attn_bias_time,
        "AutogradPrivateUse1": _time_autograd,
        "AutogradCPU": _time_autograd,
        "Meta": lambda t, w, d: _forward_meta(RELATIVE_ATTN_BIAS_TIME, t, w, d)[0],
    },
    RELATIVE_ATTN_BIAS_TIME_WITH_INDEX: {
        "PrivateUse1": relative_attn_bias_time_with_index,
        "CPU": relative_attn_bias_time_with_index,
        "AutogradPrivateUse1": _with_index_autograd,
        "AutogradCPU": _with_index_autograd,
        "Meta": lambda t, w, d: _forward_meta(RELATIVE_ATTN_BIAS_TIME_WITH_INDEX, t, w, d),
    },
    RELATIVE_ATTN_BIAS_TIME_BACKWARD: {
        "PrivateUse1": relative_attn_bias_time_backward,
        "CPU": relative_attn_bias_time_backward,
        "Meta": _backward_meta,
    },
}
