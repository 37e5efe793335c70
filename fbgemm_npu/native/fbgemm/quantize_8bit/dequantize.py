"""Fused 8-bit rows to float rows on npu: ``fbgemm::Fused8BitRowwiseQuantizedToFloat`` (+``Out``),
``Fused8BitRowwiseQuantizedToHalf``, ``Fused8BitRowwiseQuantizedToBfloat16`` and
``Fused8BitRowwiseQuantizedToFloatOrHalf``.

Upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0, ``quantize_ops_cpu.cpp`` calling fbgemm's
``Fused8BitRowwiseQuantizedSBFloatToFloatOrHalf``): a uint8 row of ``n`` bytes holds ``m`` data
bytes ``q`` and a float32 ``scale`` and ``bias``, after the data (``scale_bias_last``, the
default) or before it; with ``quant_padding_float_type=False`` (only with scale and bias first)
they are float16 (4 bytes, not 8).  Output ``[..., m]``, ``m = n - 8`` (``n - 4``):
``y = fma(q, scale, bias)`` in float32 (one rounding: measured, a float32 multiply then add
differs in the last bit), rounded to float16 / bfloat16 for those outputs.  Every leading dim is
a row.

On npu the fused multiply-add runs in float64, where ``q * scale`` is exact (8 by 24 bits) and
only the add rounds, then one cast to float32: that is upstream's single rounding except where
the float64 sum lands exactly on a float32 halfway point (possible only when ``|bias| / scale``
exceeds ``2**20``, and then for about one value in ``2**29``): 1 ulp of float32 there.  The
float16 / bfloat16 outputs are rounded from that float32, as upstream's: float16 to nearest
even; bfloat16 to nearest even in each row's first ``m // 8 * 8`` columns (upstream's 8-wide
vector loop) and with ties away from zero in the rest (its scalar tail, ``cpu_float2bfloat16``:
``0x8000`` added to the bits; ours adds it to an int32 view and keeps the high halves: no
shifts).  Measured column by column on upstream (widths 1 to 70).  The scale and bias
are read by ``view`` of their bytes as float32 (float16) after a contiguous copy: no shifts.
Inputs: uint8 only (upstream fails on others), 2 or more dims, a last dim holding the scale and
bias; ``output_dtype`` 0 (FP32), 1 (FP16) or 5 (BF16).  ``...Out``: ``output`` must be float32
(upstream writes float32 into any buffer: a float16 one corrupts the heap).  Launches:
budgets.py.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import allocation_of
from fbgemm_npu.native.fbgemm.quantize_8bit._common import check_output, check_rows, require

__all__ = [
    "KERNELS",
    "bfloat16_half_up",
    "dequantize_rows_into",
    "fused8bit_to_bfloat16_npu",
    "fused8bit_to_float_npu",
    "fused8bit_to_float_or_half_npu",
    "fused8bit_to_float_out_npu",
    "fused8bit_to_half_npu",
]

TO_FLOAT = "fbgemm::Fused8BitRowwiseQuantizedToFloat"
TO_FLOAT_OUT = "fbgemm::Fused8BitRowwiseQuantizedToFloatOut"
TO_HALF = "fbgemm::Fused8BitRowwiseQuantizedToHalf"
TO_BF16 = "fbgemm::Fused8BitRowwiseQuantizedToBfloat16"
TO_FLOAT_OR_HALF = "fbgemm::Fused8BitRowwiseQuantizedToFloatOrHalf"
# SparseType.as_int() -> dtype: FP32, FP16, BF16 (upstream refuses the others)
OUTPUT_DTYPES = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16}


def _layout(
    op: str, x: torch.Tensor, scale_bias_last: bool, quant_padding_float_type: bool
) -> tuple[int, int]:
    """``(m, w)``: the data bytes and the bytes of one of scale / bias (4, or 2 for float16)."""
    require(
        quant_padding_float_type or not scale_bias_last,
        op,
        "2-byte padding (quant_padding_float_type=False) only works with scale_bias_last=False",
    )
    w = 4 if quant_padding_float_type else 2
    n = x.shape[-1]
    require(
        n >= 2 * w,
        op,
        f"argument 'input' must have a last dim of at least {2 * w} (the scale and bias), got {n}",
    )
    return n - 2 * w, w


def out_shape(x: torch.Tensor, m: int) -> list[int]:
    return [*x.shape[:-1], m]


def dequantize_rows_into(
    out: torch.Tensor, x: torch.Tensor, m: int, w: int, scale_bias_last: bool
) -> torch.Tensor:
    """Write the float rows of the fused uint8 rows ``x`` (``m`` data bytes, scale and bias of
    ``w`` bytes each) into ``out`` (float32 / float16 / bfloat16, shape ``[..., m]``).

    Math: ``out = T(float32(addcmul(bias, q, scale)))`` in float64 (module docstring).
    Launches: the contiguous copy of the scale / bias bytes, their float64 cast, the data's
    float64 cast, ``addcmul``, the cast into ``out``: 5 (float32 output), 6 with the float32
    step before float16; bfloat16: the float32 step, and for the columns past ``m // 8 * 8``
    the int32 ``add`` and their own copy: 8 with both parts, 7 with the tail only, 6 with no
    tail; nothing when ``out`` is empty.
    """
    if out.numel() == 0:
        return out
    if scale_bias_last:
        q, sb = x[..., :m], x[..., m:]
    else:
        q, sb = x[..., 2 * w :], x[..., : 2 * w]
    # the bytes of each row's scale and bias, contiguous, read as floats (a view: no shifts)
    sb = sb.clone(memory_format=torch.contiguous_format)
    sb = sb.view(torch.float32 if w == 4 else torch.float16).to(torch.float64)
    # q * scale is exact in float64 (8 by 24 bits): the add is the one rounding, as an FMA's
    y = torch.addcmul(sb[..., 1:2], q.to(torch.float64), sb[..., 0:1])
    if out.dtype == torch.float16:
        y = y.to(torch.float32)  # upstream rounds its float32 result to float16 (RNE)
    elif out.dtype == torch.bfloat16:
        # contiguous (the cast's own output, no launch more): a transposed input's strides
        # would reach y, and bfloat16_half_up reads its int32 view as int16 pairs
        y = y.to(torch.float32, memory_format=torch.contiguous_format)
        body = m // 8 * 8  # upstream's 8-wide vector part rounds to even, its tail half up
        if body < m:
            out[..., body:].copy_(bfloat16_half_up(y[..., body:]))
        if body > 0:
            out[..., :body].copy_(y[..., :body])
        return out
    return out.copy_(y)


def bfloat16_half_up(y: torch.Tensor) -> torch.Tensor:
    """float32 ``y`` rounded to bfloat16 as upstream's ``cpu_float2bfloat16``: ties away from
    zero (``(bits + 0x8000) >> 16``; torch's cast breaks ties to even: measured, they differ).
    The high half of each int32 is its odd int16 (little end first): a view, no shift.
    Launches: the int32 ``add``; the caller's copy reads the view."""
    bits = y.view(torch.int32).add(0x8000)
    return bits.view(torch.int16)[..., 1::2].view(torch.bfloat16)


def _dequantize(
    op: str,
    input: object,
    dtype: torch.dtype,
    scale_bias_last: bool = True,
    quant_padding_float_type: bool = True,
) -> torch.Tensor:
    x = check_rows(op, "input", input, (torch.uint8,))
    m, w = _layout(op, x, scale_bias_last, quant_padding_float_type)
    # a stride-0 input of 2**40 rows passes every check: its output cannot be allocated
    with allocation_of(op, f"the output {out_shape(x, m)} of 'input'"):
        out = torch.empty(out_shape(x, m), dtype=dtype, device=x.device)
        return dequantize_rows_into(out, x, m, w, scale_bias_last)


def fused8bit_to_float_npu(input: torch.Tensor) -> torch.Tensor:
    """``Fused8BitRowwiseQuantizedToFloat``: uint8 ``[..., m + 8]`` to float32 ``[..., m]``;
    5 launches."""
    return _dequantize(TO_FLOAT, input, torch.float32)


def fused8bit_to_half_npu(input: torch.Tensor) -> torch.Tensor:
    """``Fused8BitRowwiseQuantizedToHalf``: to float16 ``[..., m]``; 6 launches."""
    return _dequantize(TO_HALF, input, torch.float16)


def fused8bit_to_bfloat16_npu(input: torch.Tensor) -> torch.Tensor:
    """``Fused8BitRowwiseQuantizedToBfloat16``: to bfloat16 ``[..., m]``; 8 launches
    (fewer without a tail or a body of 8-column blocks)."""
    return _dequantize(TO_BF16, input, torch.bfloat16)


def _output_dtype(op: str, output_dtype: int) -> torch.dtype:
    require(
        output_dtype in OUTPUT_DTYPES,
        op,
        f"argument 'output_dtype' must be 0 (FP32), 1 (FP16) or 5 (BF16), got {output_dtype}",
    )
    return OUTPUT_DTYPES[output_dtype]


def fused8bit_to_float_or_half_npu(
    input: torch.Tensor,
    output_dtype: int = 0,
    scale_bias_last: bool = True,
    quant_padding_float_type: bool = True,
) -> torch.Tensor:
    """``Fused8BitRowwiseQuantizedToFloatOrHalf``: to the ``SparseType`` ``output_dtype``
    (0 FP32, 1 FP16, 5 BF16), scale and bias last or first, float32 or (first only) float16;
    5 launches (float32), 6 (float16), 8 (bfloat16)."""
    dtype = _output_dtype(TO_FLOAT_OR_HALF, output_dtype)
    return _dequantize(TO_FLOAT_OR_HALF, input, dtype, scale_bias_last, quant_padding_float_type)


def _checked_out(
    output: object, input: object, scale_bias_last: bool, quant_padding_float_type: bool
) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    x = check_rows(TO_FLOAT_OUT, "input", input, (torch.uint8,))
    out = check_output(TO_FLOAT_OUT, output, torch.float32, x)
    m, w = _layout(TO_FLOAT_OUT, x, scale_bias_last, quant_padding_float_type)
    with allocation_of(TO_FLOAT_OUT, f"the output {out_shape(x, m)} of 'input'"):
        out.resize_(out_shape(x, m))
    return out, x, m, w


def fused8bit_to_float_out_npu(
    output: torch.Tensor,
    input: torch.Tensor,
    scale_bias_last: bool = True,
    quant_padding_float_type: bool = True,
) -> torch.Tensor:
    """``Fused8BitRowwiseQuantizedToFloatOut``: the float32 rows written into ``output``
    (resized to ``[..., m]`` as upstream's ``resize_``) and returned; 5 launches."""
    out, x, m, w = _checked_out(output, input, scale_bias_last, quant_padding_float_type)
    with allocation_of(TO_FLOAT_OUT, f"the output {out_shape(x, m)} of 'input'"):
        return dequantize_rows_into(out, x, m, w, scale_bias_last)


def fused8bit_to_float_out_meta(
    output: torch.Tensor,
    input: torch.Tensor,
    scale_bias_last: bool = True,
    quant_padding_float_type: bool = True,
) -> torch.Tensor:
    """Meta kernel (upstream has none): ``output`` resized to ``[..., m]``."""
    return _checked_out(output, input, scale_bias_last, quant_padding_float_type)[0]


KERNELS = {
    TO_FLOAT: {"PrivateUse1": fused8bit_to_float_npu},
    TO_HALF: {"PrivateUse1": fused8bit_to_half_npu},
    TO_BF16: {"PrivateUse1": fused8bit_to_bfloat16_npu},
    TO_FLOAT_OR_HALF: {"PrivateUse1": fused8bit_to_float_or_half_npu},
    TO_FLOAT_OUT: {"PrivateUse1": fused8bit_to_float_out_npu, "Meta": fused8bit_to_float_out_meta},
}
