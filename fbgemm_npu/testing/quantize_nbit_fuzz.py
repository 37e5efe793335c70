"""Oracles for the quantize_nbit family's fuzz tests (``tests/fuzz/test_fuzz_quantize_nbit.py``).

The front layout (scale and bias in a row's first 4 bytes: ``...ToFloatOrHalf`` with
``scale_bias_last=False`` and ``...FrontToFloatOrHalf``) is upstream's CUDA math; upstream's CPU
build reads the last 4 bytes whatever the flag (and has no ``Front`` kernel), so the oracle is
upstream's CPU dequantization of the same rows with the 4 bytes moved last, rounded once from
float32 to the output dtype (as ``tests/fbgemm/quantize_nbit/test_quantize_nbit_parity.py``).
"""

from __future__ import annotations

import torch

__all__ = ["front_reference", "front_to_float_or_half_reference"]

F = torch.ops.fbgemm
DTYPES = {0: torch.float32, 1: torch.float16, 5: torch.bfloat16}


def front_reference(input: torch.Tensor, bit_rate: int, output_dtype: int) -> torch.Tensor:
    """``FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf``'s values: the rows with their
    first 4 bytes moved last, through upstream's CPU ``...ToFloat``, then the output dtype."""
    last = torch.cat([input[:, 4:], input[:, :4]], 1).contiguous()
    out = F.FusedNBitRowwiseQuantizedSBHalfToFloat(last, bit_rate)
    return out.to(DTYPES[output_dtype])


def front_to_float_or_half_reference(
    input: torch.Tensor, bit_rate: int, output_dtype: int = 0, scale_bias_last: bool = True
) -> torch.Tensor:
    """``FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf`` with ``scale_bias_last=False``."""
    assert not scale_bias_last
    return front_reference(input, bit_rate, output_dtype)
