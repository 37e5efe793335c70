"""Checks of the misc family's newer ops that raise ``RuntimeError``, the class upstream's
``TORCH_CHECK``s raise (``sparse_ops_cpu.cpp``), with messages naming the op and the argument
(docs/design.md rule 9)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import torch

from fbgemm_npu.native._checks import check_dtype, check_ndim

__all__ = ["require", "runtime_dtype", "runtime_ndim"]

T = TypeVar("T")


def require(ok: bool, op: str, what: str) -> None:
    """Raise ``RuntimeError("<op>: <what>")`` unless ``ok`` (a host condition)."""
    if not ok:
        raise RuntimeError(f"{op}: {what}")


def _as_runtime(check: Callable[..., T], *args: object) -> T:
    try:
        return check(*args)
    except ValueError as exc:  # the shared helpers raise ValueError; upstream RuntimeError
        raise RuntimeError(str(exc)) from None


def runtime_dtype(op: str, arg: str, t: torch.Tensor, allowed: Iterable[torch.dtype]) -> None:
    """:func:`check_dtype`, raising ``RuntimeError``."""
    _as_runtime(check_dtype, op, arg, t, tuple(allowed))


def runtime_ndim(op: str, arg: str, t: torch.Tensor, allowed: Iterable[int]) -> None:
    """:func:`check_ndim`, raising ``RuntimeError``."""
    _as_runtime(check_ndim, op, arg, t, tuple(allowed))
