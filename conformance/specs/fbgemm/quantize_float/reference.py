"""References for the FP8 rowwise ops, written from upstream's CUDA kernels
(``fbgemm_gpu/src/quantize_ops/quantize_fp8_rowwise.cu``, ``quantize_padded_fp8_rowwise.cu``):
upstream's CPU kernels in fbgemm-gpu-cpu 1.8.0 raise for every input.

The element codes are upstream's own ``float_to_hfp8`` / ``hfp8_to_float``, reached through its
CPU ops ``FloatToHFP8Quantized`` / ``HFP8QuantizedToFloat`` (the CUDA kernels call the same
functions); the row scales are the CUDA kernels' float32 arithmetic, one row at a time in a
Python loop over rows (a reference, not a kernel): nothing is shared with fbgemm_npu's program.
"""

from __future__ import annotations

import math
import struct

import torch

__all__ = [
    "fp8_rowwise_dequantize",
    "fp8_rowwise_quantize",
    "padded_fp8_rowwise_dequantize",
    "padded_fp8_rowwise_quantize",
]

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


def _seq(values: list[float], keep_first: object) -> float:
    """The kernel's sequential min / max: ``r = keep_first(r, v) ? r : v`` (a NaN resets)."""
    r = values[0]
    for v in values[1:]:
        r = r if keep_first(r, v) else v
    return r


def padded_fp8_rowwise_quantize(t: torch.Tensor, forward: bool, row_dim: int) -> torch.Tensor:
    """``_float_to_paddedFP8rowwise_cuda_kernel``'s bytes, bucket by bucket."""
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16) or t.dim() < 1:
        raise RuntimeError("FloatToPaddedFP8RowwiseQuantized: bad 't'")
    if row_dim <= 0 or row_dim % 4:
        raise RuntimeError("FloatToPaddedFP8RowwiseQuantized: bad 'row_dim'")
    ebits, bias, max_pos = _format(forward)
    x = t.float().contiguous()
    ncols = x.size(-1)
    nb = (ncols + row_dim - 1) // row_dim
    pad = nb * row_dim - ncols
    lead = tuple(t.shape[:-1])
    nrows = 1
    for s in lead:
        nrows *= s
    ext = row_dim + 8
    out = torch.zeros(nrows, nb * ext, dtype=torch.uint8)
    rows = x.reshape(nrows, ncols)
    for r in range(nrows if ncols else 0):
        for b in range(nb):
            col = b * row_dim
            vals = rows[r, col : min(col + row_dim, ncols)]
            lo = _seq(vals.tolist(), lambda a, v: a <= v)
            hi = _seq(vals.tolist(), lambda a, v: a >= v)
            m = hi if (hi > -lo or math.isnan(-lo)) and not math.isnan(hi) else -lo
            if math.isnan(hi) or math.isnan(lo):  # fmaxf: NaN only when both are
                m = -lo if math.isnan(hi) else hi
            scale = _f32(max_pos / _f32(EPS + m)) if not math.isnan(m) else math.nan
            s = torch.tensor([scale], dtype=torch.float32)
            y = (vals.view(1, -1) * s).contiguous()
            base = b * ext
            out[r, base : base + vals.numel()] = F.FloatToHFP8Quantized(y, ebits, bias, max_pos)[0]
            out[r, base + row_dim : base + row_dim + 4] = s.view(torch.uint8)
            if b == nb - 1:
                tag = pad
            elif nrows == 1:
                tag = b - (nb - 1)
            else:
                tag = -((ncols - col) // row_dim)
            tt = torch.tensor([tag], dtype=torch.int32)
            out[r, base + row_dim + 4 : base + ext] = tt.view(torch.uint8)
    return out.reshape(*lead, nb * ext)


def padded_fp8_rowwise_dequantize(
    input: torch.Tensor,
    forward: bool,
    row_dim: int,
    output_last_dim: int = -1,
    output_dtype: int = 0,
) -> torch.Tensor:
    """The CUDA kernels' values: per bucket ``row_dim - max(tag, 0)`` values, the output size
    from the first row (one row: all positive tags; more: the skip walk)."""
    ebits, bias, _ = _format(forward)
    ext = row_dim + 8
    ncols = input.size(-1)
    if row_dim <= 0 or row_dim % 4 or ncols % ext or input.dtype != torch.uint8:
        raise RuntimeError("PaddedFP8RowwiseQuantizedToFloat: bad 'input' or 'row_dim'")
    nb = ncols // ext
    lead = tuple(input.shape[:-1])
    nrows = 1
    for s in lead:
        nrows *= s
    rows = input.contiguous().reshape(nrows, nb, ext)

    def tag(r: int, b: int) -> int:
        return int(rows[r, b, row_dim + 4 :].contiguous().view(torch.int32)[0])

    if output_last_dim >= 0:
        cols = output_last_dim
    elif nrows == 0:
        cols = ncols - 8 * nb
    else:
        if nrows == 1:
            total = sum(max(tag(0, b), 0) for b in range(nb))
        else:  # _single_thread_sum_padding_kernel
            total, b = 0, 0
            while b < nb:
                t = tag(0, b)
                b, total = (b - t, total) if t < 0 else (b + 1, total + t)
        cols = ncols - 8 * nb - total
    out = torch.zeros(nrows, cols, dtype=torch.float32)
    for r in range(nrows):
        got = []
        for b in range(nb):
            scale = rows[r, b, row_dim : row_dim + 4].contiguous().view(torch.float32)
            keep = row_dim - max(tag(r, b), 0)
            codes = rows[r, b, :keep].contiguous().view(1, -1)
            got.append(F.HFP8QuantizedToFloat(codes, ebits, bias)[0] / scale)
        if got:
            out[r] = torch.cat(got)
    return out.reshape(*lead, cols).to(OUT[output_dtype])
