"""References for the FP8 rowwise ops, written from upstream's CUDA kernels
(``fbgemm_gpu/src/quantize_ops/quantize_fp8_rowwise.cu``, ``quantize_padded_fp8_rowwise.cu``):
upstream's CPU kernels in fbgemm-gpu-cpu 1.8.0 raise for every input.

The element codes are upstream's own ``float_to_hfp8`` / ``hfp8_to_float``, reached through its
CPU ops ``FloatToHFP8Quantized`` / ``HFP8QuantizedToFloat`` (the CUDA kernels call the same
functions); the row scales are the CUDA kernels' float32 arithmetic, one row at a time in a
Python loop over rows (a reference, not a kernel): nothing is shared with fbgemm_npu's program.
"""

from __future__ import annotations

import struct

import torch

__all__ = ["fp8_rowwise_dequantize", "fp8_rowwise_quantize"]

F = torch.ops.fbgemm
EPS = struct.unpack("<f", struct.pack("<f", 1e-20))[0]  # upstream's kEpsilon = 1e-20f
OUT = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16}


def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def _format(forward: bool) -> tuple[int, int, float]:
    return (4, 15, 0.9375) if forward else (5, 31, 0.875)


def fp8_rowwise_quantize(t: torch.Tensor, forward: bool) -> torch.Tensor:
    """The CUDA kernel's bytes (more than 20 rows' path), the padding bytes zero."""
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16) or t.dim() < 1:
        raise RuntimeError("FloatToFP8RowwiseQuantized: 't' must be float32/16 or bfloat16, >= 1-D")
    ebits, bias, max_pos = _format(forward)
    x = t.float().contiguous()
    ncols = x.size(-1)
    aligned = (ncols + 3) // 4 * 4
    nrows = x.numel() // ncols if ncols else int(torch.tensor(x.shape[:-1]).prod())
    rows = x.reshape(nrows, ncols)
    out = torch.zeros(nrows, aligned + 8, dtype=torch.uint8)
    for r in range(nrows if ncols else 0):
        m = EPS
        for v in rows[r].tolist():  # fmaxf(m, fabs(v)): a NaN never wins
            if abs(v) > m:
                m = abs(v)
        scale = _f32(max_pos / _f32(EPS + m))  # float32 add, then float32 divide
        s = torch.tensor([scale], dtype=torch.float32)
        y = (rows[r : r + 1] * s).contiguous()  # one float32 product per element
        out[r, :ncols] = F.FloatToHFP8Quantized(y, ebits, bias, max_pos)[0]
        out[r, aligned : aligned + 4] = s.view(torch.uint8)
    return out.reshape(*t.shape[:-1], aligned + 8)


def fp8_rowwise_dequantize(
    input: torch.Tensor, forward: bool, output_dtype: int = 0
) -> torch.Tensor:
    """``hfp8_to_float(b) / scale`` per row in float32, then the output dtype (RNE)."""
    ebits, bias, _ = _format(forward)
    ncols = input.size(-1)
    cols = ncols - 8
    nrows = input.numel() // ncols
    rows = input.contiguous().reshape(nrows, ncols)
    out = torch.zeros(rows.size(0), cols, dtype=torch.float32)
    for r in range(rows.size(0) if cols else 0):
        scale = rows[r, cols : cols + 4].contiguous().view(torch.float32)
        out[r] = F.HFP8QuantizedToFloat(rows[r : r + 1, :cols].contiguous(), ebits, bias)[0] / scale
    return out.reshape(*input.shape[:-1], cols).to(OUT[output_dtype])
