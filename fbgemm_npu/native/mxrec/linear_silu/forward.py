"""``mxrec::in_linear_silu`` and ``mxrec::distance_in_linear_silu``: Rec SDK's fused
linear + SiLU + UVQK split, on any device.

Schemas (Rec SDK, ``in_linear_silu.cpp``)::

    distance_in_linear_silu(Tensor x, Tensor weight, Tensor bias, int[] attr_dict) -> Tensor[]
    in_linear_silu(Tensor x, Tensor weight, Tensor bias, int[] attr_dict) -> Tensor[]

Math: ``x`` ``[m, k]``, ``weight`` ``[n, k]``, ``bias`` ``[n]``, ``attr_dict`` the four split
widths ``[H_u, H_v, H_q, H_k]`` with ``sum == n``::

    z            = x @ weight^T + bias                       (linear_output, [m, n])
    [u, v, q, k] = split(silu(z), attr_dict, dim=1),  silu(z) = z * sigmoid(z)

returned as ``[u, v, q, k, z]`` (five fresh tensors in ``x``'s dtype; ``z`` is what the
backward needs).  The two ops compute the same; ``in_linear_silu`` is differentiable
(AutogradPrivateUse1 / AutogradCPU, :mod:`.autograd`), ``distance_in_linear_silu`` is not (as in
Rec SDK, which registers it at PrivateUse1 only).

dtypes: ``x`` and ``weight`` float16 / bfloat16 (Rec SDK's adapter README) or float32 (its
kernel README), the same; ``bias`` float32 (Rec SDK) or ``x``'s dtype.  Sizes: Rec SDK's kernel
wants ``k`` in [16, 8192], ``n`` in [64, 32768], split widths in [16, 8192], all multiples of 16,
and ``n % (4 k) == 0``: tiling limits of its AI-Core kernel, not of the math, so we accept any
``m, k >= 0`` and split widths ``>= 0`` summing to ``n`` (``m = 0``: empty outputs).

Launches: the cast of a float32 ``bias`` to a half ``x``'s dtype (1, only then), one ``addmm``
(``z``, accumulated in float32 by the matmul units), one ``silu`` per split read from its
strided column slice of ``z`` (4: each output its own contiguous tensor, no view of a shared
buffer): 6 for half inputs, 5 for float32.  No data check, no sync, no AI-CPU launch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    dtype_name,
)

__all__ = [
    "DISTANCE_IN_LINEAR_SILU",
    "FLOATS",
    "IN_LINEAR_SILU",
    "KERNELS",
    "SCHEMAS",
    "check_linear",
    "in_linear_silu",
    "split_widths",
]

IN_LINEAR_SILU = "mxrec::in_linear_silu"
DISTANCE_IN_LINEAR_SILU = "mxrec::distance_in_linear_silu"
_ARGS = "(Tensor x, Tensor weight, Tensor bias, int[] attr_dict) -> Tensor[]"
SCHEMAS = {
    DISTANCE_IN_LINEAR_SILU: f"distance_in_linear_silu{_ARGS}",
    IN_LINEAR_SILU: f"in_linear_silu{_ARGS}",
}
FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def split_widths(op: str, attr_dict: Sequence[int], n: int) -> list[int]:
    """The four split widths ``[H_u, H_v, H_q, H_k]``: each ``>= 0``, summing to ``n``."""
    widths = [int(h) for h in attr_dict]
    if len(widths) != 4:
        raise ValueError(
            f"{op}: argument 'attr_dict' must hold the 4 split widths [H_u, H_v, H_q, H_k], got "
            f"{len(widths)} entries"
        )
    if min(widths) < 0:
        raise ValueError(f"{op}: argument 'attr_dict' must hold widths >= 0, got {widths}")
    if sum(widths) != n:
        raise ValueError(
            f"{op}: argument 'attr_dict' must sum to weight.size(0) = {n}, got {widths} (sum "
            f"{sum(widths)})"
        )
    return widths


def check_linear(
    op: str, x: object, weight: object, bias: object | None, attr_dict: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, list[int]]:
    """Host checks (no launch) shared with the backward: a 2-D float ``x [m, k]``, ``weight
    [n, k]`` of its dtype, ``bias [n]`` float32 or ``x``'s dtype (``None`` allowed only where the
    caller passes it), one device, the four split widths."""
    xt = check_dtype(op, "x", check_ndim(op, "x", check_tensor(op, "x", x), (2,)), FLOATS)
    w = check_ndim(op, "weight", check_tensor(op, "weight", weight), (2,))
    check_dtype(op, "weight", w, (xt.dtype,))
    if w.size(1) != xt.size(1):
        raise ValueError(
            f"{op}: argument 'weight' must be [n, k] with k = x.size(1) = {xt.size(1)}, got "
            f"shape {tuple(w.shape)}"
        )
    n = w.size(0)
    b = None
    if bias is not None:
        b = check_ndim(op, "bias", check_tensor(op, "bias", bias), (1,))
        if b.dtype not in (torch.float32, xt.dtype):
            raise ValueError(
                f"{op}: argument 'bias' must have dtype float32 or x's dtype "
                f"{dtype_name(xt.dtype)}, got {dtype_name(b.dtype)}"
            )
        if b.size(0) != n:
            raise ValueError(
                f"{op}: argument 'bias' must be [n] with n = weight.size(0) = {n}, got shape "
                f"{tuple(b.shape)}"
            )
    check_same_device(op, x=xt, weight=w, bias=b)
    return xt, w, b, split_widths(op, attr_dict, n)


def _forward(
    op: str, x: object, weight: object, bias: object, attr_dict: Sequence[int]
) -> list[torch.Tensor]:
    xt, w, b, widths = check_linear(op, x, weight, check_tensor(op, "bias", bias), attr_dict)
    assert b is not None
    m, n = xt.size(0), w.size(0)
    with allocation_of(op, f"the [m, n] = {[m, n]} linear output of 'x' and 'weight'"):
        # addmm needs one dtype: a float32 bias is rounded to x's once (z is in x's dtype anyway)
        z = torch.addmm(b.to(xt.dtype), xt, w.t())
        outs, start = [], 0
        for h in widths:  # the four splits (a fixed 4, not a data loop)
            outs.append(F.silu(z[:, start : start + h]))
            start += h
    return [*outs, z]


def in_linear_silu(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, attr_dict: Sequence[int]
) -> list[torch.Tensor]:
    """PrivateUse1 / CPU: ``[u, v, q, k, linear_output]`` (5-6 launches, module docstring)."""
    return _forward(IN_LINEAR_SILU, x, weight, bias, attr_dict)


def distance_in_linear_silu(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, attr_dict: Sequence[int]
) -> list[torch.Tensor]:
    """PrivateUse1 / CPU: as :func:`in_linear_silu`, without autograd (Rec SDK's)."""
    return _forward(DISTANCE_IN_LINEAR_SILU, x, weight, bias, attr_dict)


def _meta(
    op: str, x: object, weight: object, bias: object, attr_dict: Sequence[int]
) -> list[torch.Tensor]:
    xt, w, _, widths = check_linear(op, x, weight, check_tensor(op, "bias", bias), attr_dict)
    m = xt.size(0)
    return [xt.new_empty((m, h)) for h in widths] + [xt.new_empty((m, w.size(0)))]


KERNELS = {
    IN_LINEAR_SILU: {
        "PrivateUse1": in_linear_silu,
        "CPU": in_linear_silu,
        "Meta": lambda x, w, b, a: _meta(IN_LINEAR_SILU, x, w, b, a),
    },
    DISTANCE_IN_LINEAR_SILU: {
        "PrivateUse1": distance_in_linear_silu,
        "CPU": distance_in_linear_silu,
        "Meta": lambda x, w, b, a: _meta(DISTANCE_IN_LINEAR_SILU, x, w, b, a),
    },
}
