"""Argument checks shared by the fused N-bit ops, raising ``RuntimeError`` (the class upstream's
``TORCH_CHECK``s raise, ``quantize_ops_cpu.cpp``) with messages naming the op and the argument
(docs/design.md rule 9)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from fbgemm_npu.native._checks import check_tensor, dtype_name, join_words

__all__ = ["SCALE_BIAS_BYTES", "check_bit_rate", "check_input", "short"]

SCALE_BIAS_BYTES = 4  # a half scale and a half bias per row


def short(op: str) -> str:
    """``"fbgemm::X"`` -> ``"X"``: upstream's kernels name themselves without the namespace."""
    return op.removeprefix("fbgemm::")


def check_bit_rate(op: str, bit_rate: int) -> int:
    """``bit_rate`` in 1..8: ``8 // bit_rate`` codes per byte.  Upstream divides by ``8 //
    bit_rate`` unchecked (0 or more than 8 end the process with SIGFPE; a negative one gives
    negative sizes); its reference kernel is well defined for 1..8, so those are served."""
    if isinstance(bit_rate, bool) or not isinstance(bit_rate, int) or not 1 <= bit_rate <= 8:
        raise RuntimeError(f"{op}: argument 'bit_rate' must be an int in 1..8, got {bit_rate!r}")
    return bit_rate


def check_input(
    op: str,
    t: object,
    allowed: Iterable[torch.dtype],
    error: type[Exception] = RuntimeError,
    arg: str = "input",
) -> torch.Tensor:
    """A 2-D tensor of one of ``allowed`` dtypes (upstream's ``TENSOR_NDIM_EQUALS(input, 2)``);
    ``error`` is the class upstream raises for a dtype it does not dispatch."""
    t = check_tensor(op, arg, t)
    allowed = tuple(allowed)
    if t.dtype not in allowed:
        names = join_words([dtype_name(d) for d in allowed])
        raise error(f"{op}: argument '{arg}' must have dtype {names}, got {dtype_name(t.dtype)}")
    if t.dim() != 2:
        raise RuntimeError(
            f"{op}: argument '{arg}' must have 2 dimension(s), got {t.dim()} "
            f"(shape {tuple(t.shape)})"
        )
    return t
