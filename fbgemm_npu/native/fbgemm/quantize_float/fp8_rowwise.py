"""``fbgemm::FloatToFP8RowwiseQuantized`` / ``FP8RowwiseQuantizedToFloat`` on npu.

Upstream's CPU kernels in fbgemm-gpu-cpu 1.8.0 raise ``fp8 is not supported by CPU`` for every
input, so the semantics are upstream's CUDA kernels' (``quantize_fp8_rowwise.cu``) and its Meta
kernels' shapes (``quantize_ops_meta.cpp``), judged by a reference written from them
(``conformance/specs/fbgemm/quantize_float/reference.py``):

- quantize: ``input`` float32 / float16 / bfloat16 of rank >= 1, rows along the last dim of
  ``ncols``.  ``forward=True``: HFP8 with 4 exponent bits, bias 15, ``max_pos = 0.9375``;
  ``False``: 5, 31, 0.875.  Per row ``m = max(1e-20, max_j |x_j|)`` (a NaN ignored, as
  ``fmaxf`` does in the kernel for more than 20 rows and as upstream's later CPU kernel) and
  ``scale = max_pos / (1e-20 + m)`` in float32; the row's bytes are ``ncols`` codes of
  ``x * scale`` (``float_to_hfp8``, ``_hfp8.encode``), zeros up to ``ncols_aligned = 4 *
  ceil(ncols / 4)`` (upstream leaves these bytes uninitialised), then the float32 ``scale``
  and a float32 ``0.0``: ``ncols_aligned + 8`` bytes.  No row or no column: zeros.
  (Upstream's CUDA kernel for at most 20 rows takes ``max(max_j x_j, -min_j x_j)`` without the
  ``1e-20`` floor: an all-zero row's scale then differs by 2x; we follow the general path.)
- dequantize: uint8 rows of ``ncols`` bytes, a multiple of 4 and at least 8 (others refused by
  name; upstream's Meta gives ``4 * ceil(ncols / 4) - 8`` and its kernel reads a misaligned
  scale), ``out = hfp8_to_float(b) / scale`` in float32 for the ``ncols - 8`` leading bytes,
  cast to ``output_dtype`` (SparseType: 0 FP32, 1 FP16, 5 BF16; others refused by name).
"""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._checks import check_dtype, check_tensor
from fbgemm_npu.native.fbgemm.quantize_float import _hfp8

__all__ = ["KERNELS", "OUTPUT_DTYPES", "float_to_fp8_rowwise_npu", "fp8_rowwise_to_float_npu"]

TO_FP8 = "fbgemm::FloatToFP8RowwiseQuantized"
FROM_FP8 = "fbgemm::FP8RowwiseQuantizedToFloat"
EPSILON = 1e-20  # upstream's kEpsilon (a float32 constant: torch rounds the scalar the same way)
OUTPUT_DTYPES = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16}  # SparseType.as_int()


def fp8_format(forward: bool) -> tuple[int, int, float]:
    """(ebits, exponent_bias, max_pos) of upstream's forward / backward FP8."""
    return (4, 15, 0.9375) if forward else (5, 31, 0.875)


def _check_rank(op: str, t: torch.Tensor) -> None:
    if t.dim() < 1:
        raise ValueError(f"{op}: argument 'input' must have at least 1 dimension, got a 0-D tensor")


def float_to_fp8_rowwise_npu(t: torch.Tensor, forward: bool) -> torch.Tensor:
    """Rowwise FP8 of ``t`` (float32 / float16 / bfloat16, rank >= 1): per row ``ncols`` HFP8
    codes of ``x * scale``, zero padding to a multiple of 4, the float32 ``scale = max_pos /
    (1e-20 + max(1e-20, max |x|))`` and 4 zero bytes (module docstring).  Launches: the float32
    cast (float16 / bfloat16 input), abs, ``nan_to_num``, ``amax``, ``clamp_min_``, ``add_``,
    ``full_like``, ``div_``, the product, ``_hfp8.ENCODE_LAUNCHES`` (21), the zero output, the
    two copies into it: 32 (33)."""
    op = TO_FP8
    x = check_dtype(
        op, "t", check_tensor(op, "t", t), (torch.float32, torch.float16, torch.bfloat16)
    ).detach()
    if x.dim() < 1:
        raise ValueError(f"{op}: argument 't' must have at least 1 dimension, got a 0-D tensor")
    ebits, bias, max_pos = fp8_format(forward)
    ncols = x.size(-1)
    aligned = (ncols + 3) // 4 * 4
    out = torch.zeros((*x.shape[:-1], aligned + 8), dtype=torch.uint8, device=x.device)
    if x.numel() == 0:
        return out
    xf = x if x.dtype == torch.float32 else x.float()
    # the row's largest magnitude, NaN ignored (fmaxf), at least upstream's epsilon
    big = xf.abs().nan_to_num_(nan=0.0, posinf=math.inf).amax(-1, keepdim=True)
    den = big.clamp_min_(EPSILON).add_(EPSILON)
    scale = torch.full_like(den, max_pos).div_(den)  # max_pos / den, one float32 rounding
    codes = _hfp8.encode(xf * scale, ebits, bias, max_pos)
    out[..., :ncols].copy_(codes)
    out[..., aligned : aligned + 4].copy_(scale.view(torch.uint8))
    return out


def fp8_rowwise_to_float_npu(
    input: torch.Tensor, forward: bool, output_dtype: int = 0
) -> torch.Tensor:
    """Dequantize rowwise FP8 rows (uint8, rank >= 1, ``ncols`` a multiple of 4 and >= 8):
    ``out = hfp8_to_float(b) / scale`` for the ``ncols - 8`` leading bytes, in ``output_dtype``
    (module docstring).  Launches: the scale bytes' copy, ``_hfp8.DECODE_LAUNCHES`` (11), the
    division: 13; float16 / bfloat16 output: the cast, 14."""
    op = FROM_FP8
    x = check_dtype(op, "input", check_tensor(op, "input", input), (torch.uint8,)).detach()
    _check_rank(op, x)
    if output_dtype not in OUTPUT_DTYPES:
        raise ValueError(
            f"{op}: argument 'output_dtype' must be 0 (FP32), 1 (FP16) or 5 (BF16), "
            f"got {output_dtype}"
        )
    dtype = OUTPUT_DTYPES[output_dtype]
    ncols = x.size(-1)
    if ncols % 4 != 0 or ncols < 8:
        raise ValueError(
            f"{op}: argument 'input' must have rows of a multiple of 4 bytes, at least 8 (the "
            f"codes, their padding, the float32 scale and 4 spare bytes), got {ncols}"
        )
    cols = ncols - 8
    if x.numel() == 0 or cols == 0:
        return torch.zeros((*x.shape[:-1], cols), dtype=dtype, device=x.device)
    ebits, bias, _ = fp8_format(forward)
    # a fresh copy (clone, not contiguous: a 1-D row's slice is contiguous at any storage
    # offset, which a float32 view refuses)
    scale = x[..., cols : cols + 4].clone(memory_format=torch.contiguous_format)
    scale = scale.view(torch.float32)
    values = _hfp8.decode(x[..., :cols], ebits, bias).div_(scale)
    return values if dtype == torch.float32 else values.to(dtype)


KERNELS = {
    TO_FP8: {"PrivateUse1": float_to_fp8_rowwise_npu},
    FROM_FP8: {"PrivateUse1": fp8_rowwise_to_float_npu},
}
