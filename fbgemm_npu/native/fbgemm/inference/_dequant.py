"""Rows of the inference TBE's weight types, decoded to float32 as upstream's CPU kernel does.

Each function takes the gathered byte window ``raw [N, W]`` (uint8, row ``i`` = the bytes of
index ``i``'s row, ``W`` a multiple of 4 at least the row's width) and returns ``[N, D]``
float32 values (upstream's accumulation type):

* FP32 / FP16: the window read as that dtype (a view), FP16 widened (1 launch; FP32: none);
* INT8 / INT4 / INT2: ``scale * q + bias`` with ``scale, bias`` the row's two leading halves
  (``addcmul``).  N-bit values are unpacked low bits first by ``floor(b / [1, 16])`` then ``% 16``
  (INT4; INT2: ``[1, 4, 16, 64]``, ``% 4``) on the bytes widened to float32 -- exact for byte
  values and power-of-two divisors, and no shifts (AI CPU on a 910B, docs/hardware.md).
  Launches: the scale / bias cast, the byte cast, (N-bit) floor_divide and remainder, addcmul;
* FP8 (upstream's ``Float8_to_float`` with ``exponent_bits`` / ``exponent_bias``): a 256-entry
  float32 table built on the host from the same bit arithmetic and gathered by byte value
  (the int32 cast, the gather: 2 launches).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import tracing
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.inference._layout import FP8, FP16, FP32, INT_TYPES

__all__ = ["dequantize", "fp8_table"]

_DIVISORS: dict[tuple[torch.device, int], torch.Tensor] = {}
_FP8: dict[tuple[torch.device, int, int], torch.Tensor] = {}


def fp8_table(exponent_bits: int, exponent_bias: int, device: torch.device) -> torch.Tensor:
    """``table[b]`` = upstream's ``Float8_to_float(b, exponent_bits, exponent_bias)`` (float32,
    256 values): the 7 magnitude bits placed under float32's exponent field, scaled by
    ``2**(127 - exponent_bias)`` (exact: a power of two), the sign bit copied."""
    key = (device, exponent_bits, exponent_bias)
    hit = _FP8.get(key)
    if hit is not None and not tracing():
        return hit
    b = torch.arange(256, dtype=torch.int32)
    mag = (b % 128 * 2 ** (16 + exponent_bits)).view(torch.float32)
    # float32 multiplier from its bit pattern, as upstream builds it (2**(127 - bias))
    mult = torch.tensor([(254 - exponent_bias) * 2**23], dtype=torch.int32).view(torch.float32)
    host = torch.where(b >= 128, -(mag * mult), mag * mult)
    table = upload(host, torch.float32, device)
    if not tracing():
        _FP8[key] = table
    return table


def _divisors(bits: int, device: torch.device) -> torch.Tensor:
    key = (device, bits)
    hit = _DIVISORS.get(key)
    if hit is not None and not tracing():
        return hit
    per = 8 // bits
    d = upload([float(2 ** (bits * k)) for k in range(per)], torch.float32, device)
    if not tracing():
        _DIVISORS[key] = d
    return d


def dequantize(raw: torch.Tensor, ty: int, D: int, fp8: tuple[int, int]) -> torch.Tensor:
    """``[N, D]`` float32 values of the rows in ``raw [N, W]`` (uint8) of weight type ``ty``."""
    N = raw.size(0)
    if ty == FP32:
        return raw[:, : 4 * D].view(torch.float32)
    if ty == FP16:
        return raw[:, : 2 * D].view(torch.float16).float()
    if ty == FP8:
        return fp8_table(*fp8, raw.device)[raw[:, :D].to(torch.int32)]
    bits = INT_TYPES[ty]
    sb = raw[:, :4].view(torch.float16).float()  # [N, 2]: scale, bias
    q = raw[:, 4 : 4 + D * bits // 8].float()
    if bits < 8:
        q = torch.floor_divide(q.unsqueeze(2), _divisors(bits, raw.device))
        q = torch.remainder(q, float(2**bits)).view(N, D)
    return torch.addcmul(sb[:, 1:], q, sb[:, :1])
