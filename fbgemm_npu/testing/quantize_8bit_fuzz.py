"""Inputs and an oracle for the quantize_8bit family's fuzz tests (``tests/fuzz/``).

``fused_rows`` builds valid fused 8-bit rows (upstream's CPU quantizer on drawn floats, or raw
bytes whose scale and bias are finite); ``mixed_dim_reference`` is the oracle of
``Fused8BitRowwiseQuantizedToFloatMixedDim`` (upstream has only a CUDA kernel): each table's
block through upstream's CPU ``Fused8BitRowwiseQuantizedToFloat`` (the same float32 FMA per
byte), side by side in zeros, as ``tests/fbgemm/quantize_8bit/test_quantize_8bit_mixed_dim.py``.
"""

from __future__ import annotations

import torch

__all__ = ["fused_rows", "mixed_dim_reference"]

F = torch.ops.fbgemm


def fused_rows(
    shape: tuple[int, ...], gen: torch.Generator, raw: bool, scale_bias_last: bool = True
) -> torch.Tensor:
    """uint8 rows ``[..., m + 8]`` for ``shape = (..., m)``: upstream's encoding of normal values
    of mixed scales, or (``raw``) random data bytes with a random finite float32 scale and bias
    (last, or first where ``scale_bias_last`` is false)."""
    lead, m = shape[:-1], shape[-1]
    if not raw:
        x = torch.randn(shape, generator=gen) * 10.0 ** torch.randint(-3, 4, (), generator=gen)
        q = F.FloatToFused8BitRowwiseQuantized(x if x.dim() >= 2 else x.view(1, -1))
        q = q.view(*lead, m + 8)
        if scale_bias_last:
            return q
        return torch.cat([q[..., m:], q[..., :m]], -1)
    data = torch.randint(0, 256, (*lead, m), generator=gen, dtype=torch.int32).to(torch.uint8)
    sb = (torch.randn((*lead, 2), generator=gen) * 100.0).view(torch.uint8)
    return torch.cat([data, sb] if scale_bias_last else [sb, data], -1)


def mixed_dim_reference(
    input: torch.Tensor, D_offsets: torch.Tensor, output_dtype: int
) -> torch.Tensor:
    """Each table's columns ``[D_offsets[t], D_offsets[t + 1])`` dequantized by upstream's CPU
    kernel and written at ``D_offsets[t] - 8 t`` of ``[B, C - 8 T]`` zeros (CUDA's math)."""
    bounds = D_offsets.tolist()
    tables = len(bounds) - 1
    rows, cols = input.shape
    out = torch.zeros(rows, cols - 8 * tables)
    if out.numel() == 0:  # no rows or no output columns: CUDA's kernel reads no offset
        return out.to((torch.float32, torch.float16)[output_dtype])
    for t in range(tables):
        a, b = bounds[t], bounds[t + 1]
        block = F.Fused8BitRowwiseQuantizedToFloat(input[:, a:b].contiguous())
        out[:, a - 8 * t : a - 8 * t + block.shape[1]] = block
    return out.to((torch.float32, torch.float16)[output_dtype])
