"""``fbgemm::FloatToBfloat16Quantized`` / ``Bfloat16QuantizedToFloat`` on npu.

Semantics, from upstream's CPU kernels (``FloatToBFloat16Quantized_ref``) and measured on
fbgemm-gpu-cpu 1.8.0: the input is float32 (any rank, empty too; other dtypes raise), the output
bfloat16 of its shape, each element ``(bits(x) + 2**15) >> 16`` in uint32 arithmetic: round half
*up* on the magnitude (not torch's round half to even), a NaN's payload carried (the top payloads
of a positive NaN wrap to ``-0.0``: ``0x7FFF8000 + 2**15`` overflows into the sign), inf kept.
Decoding is exact: the bfloat16 bits ``<< 16``.

Program: on the int32 view of the bits, ``hi = floor(floor(I / 2**15) + 1) / 2)`` is
``floor((I + 2**15) / 2**16)`` without the int32 overflow of ``I + 2**15``; ``hi`` is in
``[-2**15, 2**15]`` and its low 16 bits (the little-endian first half of each int32, a copy of a
strided int16 view: no narrowing cast whose overflow rule a device may choose) are the output's
bits.  Decoding: the int16 bits widened to int32 (sign extension) times ``2**16`` are the float32
bits.  No shifts (AI CPU on a 910B, docs/hardware.md).  Upstream has no Meta kernel for either
op; ours are registered with them (rule 1).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_dtype, check_tensor

__all__ = [
    "KERNELS",
    "bfloat16_to_float_meta",
    "bfloat16_to_float_npu",
    "float_to_bfloat16_meta",
    "float_to_bfloat16_npu",
]

TO_BF16 = "fbgemm::FloatToBfloat16Quantized"
FROM_BF16 = "fbgemm::Bfloat16QuantizedToFloat"


def _input(op: str, value: object, dtype: torch.dtype) -> torch.Tensor:
    return check_dtype(op, "input", check_tensor(op, "input", value), (dtype,)).detach()


def float_to_bfloat16_npu(input: torch.Tensor) -> torch.Tensor:
    """``out.bits = (bits(x) + 2**15) >> 16`` (uint32), float32 ``input`` of any shape ->
    bfloat16 of that shape (module docstring).  Launches: ``floor_divide``, ``add_``,
    ``floor_divide_``, the copy of the low halves into the output: 4 (an empty input: 0)."""
    x = _input(TO_BF16, input, torch.float32)
    out = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
    if x.numel() == 0:
        return out
    hi = torch.empty(x.shape, dtype=torch.int32, device=x.device)  # contiguous, any input strides
    torch.floor_divide(x.view(torch.int32), 2**15, out=hi).add_(1).floor_divide_(2)
    # the low 16 bits of each int32 (little-endian: its first int16) are the bfloat16 bits
    out.view(torch.int16).copy_(hi.view(-1).view(torch.int16)[0::2].view(x.shape))
    return out


def bfloat16_to_float_npu(input: torch.Tensor) -> torch.Tensor:
    """``out.bits = bits(x) << 16``: bfloat16 ``input`` of any shape -> float32 of that shape,
    exact (NaN payloads too).  Launches: the int32 cast of the int16 bits, ``mul``: 2."""
    x = _input(FROM_BF16, input, torch.bfloat16)
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=torch.float32, device=x.device)
    wide = x.view(torch.int16).to(torch.int32, memory_format=torch.contiguous_format)
    return wide.mul_(2**16).view(torch.float32)


def float_to_bfloat16_meta(input: torch.Tensor) -> torch.Tensor:
    """Meta kernel (upstream has none): the bfloat16 output of the input's shape."""
    x = _input(TO_BF16, input, torch.float32)
    return torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)


def bfloat16_to_float_meta(input: torch.Tensor) -> torch.Tensor:
    """Meta kernel (upstream has none): the float32 output of the input's shape."""
    x = _input(FROM_BF16, input, torch.bfloat16)
    return torch.empty(x.shape, dtype=torch.float32, device=x.device)


KERNELS = {
    TO_BF16: {"PrivateUse1": float_to_bfloat16_npu, "Meta": float_to_bfloat16_meta},
    FROM_BF16: {"PrivateUse1": bfloat16_to_float_npu, "Meta": bfloat16_to_float_meta},
}
