"""Checks shared by the fused 8-bit row-wise ops, raising ``RuntimeError`` (the class upstream's
``TORCH_CHECK``s raise, ``quantize_ops_cpu.cpp``) with messages naming the op and the argument
(docs/design.md rule 9)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from fbgemm_npu.native._checks import check_tensor, dtype_name, join_words

__all__ = ["check_output", "check_rows", "require"]


def require(ok: bool, op: str, what: str) -> None:
    """Raise ``RuntimeError("<op>: <what>")`` unless ``ok`` (a host condition)."""
    if not ok:
        raise RuntimeError(f"{op}: {what}")


def check_rows(op: str, arg: str, value: object, dtypes: Iterable[torch.dtype]) -> torch.Tensor:
    """``value``: a tensor of one of ``dtypes`` with 2 or more dims (upstream quantizes the last
    dim, every leading dim a row), detached."""
    t = check_tensor(op, arg, value)
    allowed = tuple(dtypes)
    require(
        t.dtype in allowed,
        op,
        f"argument '{arg}' must have dtype {join_words([dtype_name(d) for d in allowed])}, "
        f"got {dtype_name(t.dtype)}",
    )
    require(
        t.dim() >= 2,
        op,
        f"argument '{arg}' must have 2 or more dims, got a {t.dim()}-D tensor of shape "
        f"{tuple(t.shape)}",
    )
    return t.detach()


def check_output(op: str, output: object, dtype: torch.dtype, like: torch.Tensor) -> torch.Tensor:
    """The ``output`` argument of an ``...Out`` op: a tensor of ``dtype`` on ``like``'s device
    (upstream writes ``dtype`` elements into its buffer whatever its dtype: a float16 buffer
    for ``Fused8BitRowwiseQuantizedToFloatOut`` corrupts the heap)."""
    out = check_tensor(op, "output", output)
    require(
        out.dtype == dtype,
        op,
        f"argument 'output' must have dtype {dtype_name(dtype)}, got {dtype_name(out.dtype)}",
    )
    require(
        out.device == like.device,
        op,
        f"argument 'output' must be on {like.device}, got {out.device}",
    )
    return out
