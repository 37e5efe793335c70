"""Host checks shared by the norm family's ops (no launch)."""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._checks import check_dtype, check_ndim, check_tensor, dtype_name

__all__ = ["FLOATS", "check_eps", "check_row_params", "check_same_shape"]

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def check_same_shape(
    op: str, name: str, t: object, like: torch.Tensor, like_name: str
) -> torch.Tensor:
    """``t`` a tensor of ``like``'s shape and dtype."""
    t = check_tensor(op, name, t)
    if t.shape != like.shape:
        raise ValueError(
            f"{op}: argument '{name}' must have {like_name}'s shape {tuple(like.shape)}, got "
            f"{tuple(t.shape)}"
        )
    if t.dtype != like.dtype:
        raise ValueError(
            f"{op}: argument '{name}' must have {like_name}'s dtype {dtype_name(like.dtype)}, "
            f"got {dtype_name(t.dtype)}"
        )
    return t


def check_row_params(
    op: str, names: tuple[str, str], params: tuple[object, object], x: torch.Tensor
) -> list[torch.Tensor]:
    """The layer norm's weight and bias: 1-D ``[C]`` (``C = x.size(-1)``) of ``x``'s dtype."""
    out = []
    c = x.size(-1)
    for name, p in zip(names, params, strict=True):
        t = check_ndim(op, name, check_tensor(op, name, p), (1,))
        check_dtype(op, name, t, (x.dtype,))
        if t.size(0) != c:
            raise ValueError(
                f"{op}: argument '{name}' must be [C] with C = {c} (the last dim of x), got shape "
                f"{tuple(t.shape)}"
            )
        out.append(t)
    return out


def check_eps(op: str, name: str, eps: float) -> float:
    """A finite ``eps > 0`` (the normalisation divides by ``sqrt(var + eps)``)."""
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"{op}: argument '{name}' must be a finite float > 0, got {eps}")
    return float(eps)
