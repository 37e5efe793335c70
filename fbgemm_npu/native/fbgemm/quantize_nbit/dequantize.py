"""Fused N-bit rows with a half scale and bias back to float / half:
``fbgemm::FusedNBitRowwiseQuantizedSBHalfToFloat``, ``...ToHalf``, ``...ToFloatOrHalf`` and
``FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf`` (scale and bias before the codes).

Math, per row of ``ncols`` bytes (``nb = ncols - 4`` code bytes, ``per = 8 // bit_rate``)::

    q[i]  = (byte[i // per] // 2 ** ((i % per) * bit_rate)) % 2 ** bit_rate    # i < nb * per
    out[i] = float(scale) * q[i] + float(bias)       # float32; half output: rounded once more

``scale * q`` is exact in float32 (an 11-bit mantissa times at most 8 bits), so a fused
multiply-add and upstream's separate multiply and add give the same value.  ``input`` 2-D uint8
with ``ncols >= 4`` (upstream sizes a negative output below that), ``bit_rate`` in 1..8.

``...ToFloatOrHalf``: ``output_dtype`` 0 (float32) or 1 (float16), as upstream's CPU kernel;
``scale_bias_last=False`` reads scale and bias from the first 4 bytes as upstream's CUDA kernel
does (its CPU kernel ignores the flag and reads the last 4: a row laid out front-first would be
misread).  ``...FrontToFloatOrHalf`` (no kernel in upstream's CPU build of 1.8; CUDA's math,
scale and bias first): ``output_dtype`` 0, 1 or 5 (bfloat16, as upstream's newer CPU kernel).

Launches (``budgets.py``): the scale / bias bytes copied (``clone``), their float cast; the codes'
int32 cast, ``floor_divide``, ``remainder``, float cast, ``addcmul``; half / bfloat16 output:
its cast.  No sync, no AI-CPU op.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import allocation_of
from fbgemm_npu.native.fbgemm.quantize_nbit._common import (
    SCALE_BIAS_BYTES,
    check_bit_rate,
    check_input,
)
from fbgemm_npu.native.fbgemm.quantize_nbit._pack import codes_per_byte, unpack_codes

__all__ = [
    "KERNELS",
    "dequantize_rows",
    "fused_nbit_front_to_float_or_half_fake",
    "fused_nbit_front_to_float_or_half_npu",
    "fused_nbit_to_float_npu",
    "fused_nbit_to_float_or_half_npu",
    "fused_nbit_to_half_npu",
]

TO_FLOAT = "fbgemm::FusedNBitRowwiseQuantizedSBHalfToFloat"
TO_HALF = "fbgemm::FusedNBitRowwiseQuantizedSBHalfToHalf"
TO_FLOAT_OR_HALF = "fbgemm::FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf"
FRONT = "fbgemm::FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf"
# SparseType's values (fbgemm_gpu.split_embedding_configs): FP32 0, FP16 1, BF16 5
_SPARSE = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16}


def dequantize_rows(
    rows: torch.Tensor, bit_rate: int, dtype: torch.dtype, scale_bias_last: bool = True
) -> torch.Tensor:
    """Fused rows ``[R, ncols]`` uint8 to ``[R, (ncols - 4) * per]`` of ``dtype`` (module
    docstring).  Checked arguments only."""
    n, ncols = rows.shape
    nb = ncols - SCALE_BIAS_BYTES
    per = codes_per_byte(bit_rate)
    if n == 0 or nb == 0:
        return torch.empty(n, nb * per, dtype=dtype, device=rows.device)
    if scale_bias_last:
        data, sb = rows[:, :nb], rows[:, nb:]
    else:
        data, sb = rows[:, SCALE_BIAS_BYTES:], rows[:, :SCALE_BIAS_BYTES]
    # a fresh [R, 4] copy can be read as [R, 2] half whatever the row stride's parity
    scale_bias = (
        sb.clone(memory_format=torch.contiguous_format).view(torch.float16).to(torch.float32)
    )
    codes = unpack_codes(data, bit_rate).to(torch.float32)
    out = torch.addcmul(scale_bias[:, 1:2], codes, scale_bias[:, 0:1])
    return out if dtype == torch.float32 else out.to(dtype)


def _dequantize(
    op: str, input: torch.Tensor, bit_rate: int, dtype: torch.dtype, last: bool = True
) -> torch.Tensor:
    rows = check_input(op, input, (torch.uint8,)).detach()
    bit_rate = check_bit_rate(op, bit_rate)
    _check_columns(op, rows)
    out_cols = (rows.size(1) - SCALE_BIAS_BYTES) * codes_per_byte(bit_rate)
    with allocation_of(op, f"the output [{rows.size(0)}, {out_cols}] of 'input'"):
        return dequantize_rows(rows, bit_rate, dtype, last)


def _check_columns(op: str, rows: torch.Tensor) -> None:
    if rows.size(1) < SCALE_BIAS_BYTES:
        raise RuntimeError(
            f"{op}: argument 'input' must have at least {SCALE_BIAS_BYTES} columns (the half "
            f"scale and bias of each row), got {rows.size(1)}"
        )


def _output_dtype(op: str, output_dtype: int, allowed: tuple[int, ...]) -> torch.dtype:
    if isinstance(output_dtype, bool) or output_dtype not in allowed:
        names = ", ".join(f"{k} ({str(_SPARSE[k]).removeprefix('torch.')})" for k in allowed)
        raise RuntimeError(
            f"{op}: argument 'output_dtype' must be a SparseType value among {names}, "
            f"got {output_dtype!r}"
        )
    return _SPARSE[output_dtype]


def fused_nbit_to_float_npu(input: torch.Tensor, bit_rate: int) -> torch.Tensor:
    """``FusedNBitRowwiseQuantizedSBHalfToFloat``: float32 output (module docstring)."""
    return _dequantize(TO_FLOAT, input, bit_rate, torch.float32)


def fused_nbit_to_half_npu(input: torch.Tensor, bit_rate: int) -> torch.Tensor:
    """``FusedNBitRowwiseQuantizedSBHalfToHalf``: float16 output, the float32 value rounded."""
    return _dequantize(TO_HALF, input, bit_rate, torch.float16)


def fused_nbit_to_float_or_half_npu(
    input: torch.Tensor, bit_rate: int, output_dtype: int = 0, scale_bias_last: bool = True
) -> torch.Tensor:
    """``FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf``: ``output_dtype`` 0 / 1; scale and bias
    first when ``scale_bias_last`` is false (module docstring)."""
    op = TO_FLOAT_OR_HALF
    dtype = _output_dtype(op, output_dtype, (0, 1))
    return _dequantize(op, input, bit_rate, dtype, bool(scale_bias_last))


def fused_nbit_front_to_float_or_half_npu(
    input: torch.Tensor, bit_rate: int, output_dtype: int
) -> torch.Tensor:
    """``FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf``: scale and bias in the first 4
    bytes, ``output_dtype`` 0 / 1 / 5 (module docstring)."""
    op = FRONT
    dtype = _output_dtype(op, output_dtype, (0, 1, 5))
    return _dequantize(op, input, bit_rate, dtype, False)


def fused_nbit_front_to_float_or_half_fake(
    input: torch.Tensor, bit_rate: int, output_dtype: int
) -> torch.Tensor:
    """Meta kernel (upstream's CPU build has none): the output's shape and dtype."""
    op = FRONT
    dtype = _output_dtype(op, output_dtype, (0, 1, 5))
    rows = check_input(op, input, (torch.uint8,))
    _check_columns(op, rows)
    per = codes_per_byte(check_bit_rate(op, bit_rate))
    return rows.new_empty((rows.size(0), (rows.size(1) - SCALE_BIAS_BYTES) * per), dtype=dtype)


KERNELS = {
    TO_FLOAT: {"PrivateUse1": fused_nbit_to_float_npu},
    TO_HALF: {"PrivateUse1": fused_nbit_to_half_npu},
    TO_FLOAT_OR_HALF: {"PrivateUse1": fused_nbit_to_float_or_half_npu},
    FRONT: {
        "PrivateUse1": fused_nbit_front_to_float_or_half_npu,
        "Meta": fused_nbit_front_to_float_or_half_fake,
    },
}
