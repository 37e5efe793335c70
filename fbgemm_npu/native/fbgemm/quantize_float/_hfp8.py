"""HFP8 codes (upstream's ``float_to_hfp8`` / ``hfp8_to_float``) as int32 / float32 tensor programs.

An HFP8 byte is ``s eee.. mmm..``: a sign bit, ``ebits`` exponent bits and ``mbits = 7 - ebits``
mantissa bits, exponent bias ``bias``, gradual underflow, no inf / NaN.  Upstream
(``fbgemm_gpu/include/fbgemm_gpu/quantize_ops_utils.h``) encodes ``x`` as follows, and so do we,
on the float32 bit pattern ``I`` read with ``.view(torch.int32)`` (no shifts: ``floor_divide``
and ``remainder`` stand for them, docs/hardware.md):

- ``a = fminf(|x|, max_pos)``: saturation; inf and a quiet NaN give ``max_pos`` (``fminf`` drops
  a NaN), done on the bits as ``min(I & 0x7FFFFFFF, bits(max_pos))``.  A signalling NaN (glibc's
  ``fminf`` returns it quieted) takes the subnormal branch below, whose bouncer sum keeps it: its
  code is the low byte of its bits.
- ``a >= 2**(1 - bias)`` (normal): upstream adds and subtracts a float32 "bouncer" to round ``a``
  to ``mbits`` mantissa bits, round half to even; on the bits that is ``q = RNE(I / 2**k)`` with
  ``k = 16 + ebits``, computed as ``(I + 2**(k-1) - 1 + odd(I // 2**k)) // 2**k``.  Upstream then
  subtracts ``(127 - bias) << 23``, shifts left by ``8 - ebits`` in 32 bits and keeps the top byte:
  the code ``(q - (127 - bias) * 2**mbits) mod 256`` (the mod is upstream's 32-bit shift dropping
  an exponent past the field when ``max_pos`` is past the format's largest value).
- else (subnormal): ``round_half_even(a * 2**(bias + mbits - 1))``, upstream's bouncer sum's low
  byte (an exact power-of-two scaling, then ``torch.round``).
- the sign: the code ``| 128`` for a set float32 sign bit (``-0.0`` and a negative NaN too).

Decoding: ``m = b mod 128``; ``m >= 2**mbits``: float32 bits ``m * 2**k + (127 - bias) << 23``
(upstream's shifted bits times ``2**(127 - bias)``, exact); else ``m * 2**(1 - bias - mbits)``;
negated for ``b >= 128``.

Arguments are held to the range where every step above is exact in float32 on any device (no
float32 subnormal is ever needed, so a device that flushes them gives the same bytes):
``1 <= ebits <= 7``, ``0 <= exponent_bias <= 126 - mbits``, ``max_pos`` 0 or in
``[2**-126, 2**100]``.  Outside it upstream's bit tricks overflow the float32 exponent (a
negative or infinite ``max_pos``, ``ebits = 8``, a bias past 127) and its bytes are artefacts;
ours raise ``ValueError`` naming the op and the argument.
"""

from __future__ import annotations

import math
import struct

import torch

__all__ = [
    "DECODE_LAUNCHES",
    "ENCODE_LAUNCHES",
    "check_format",
    "check_max_pos",
    "decode",
    "encode",
    "float32_of",
]

ENCODE_LAUNCHES = 21  # bitwise_and, clamp_max, 6 (normal), 3 (subnormal), lt, where, 5 (NaN),
# lt, bitwise_or, where
DECODE_LAUNCHES = 11  # cast, remainder, mul, add_, cast, mul_, lt, where, ge, neg, where
MAX_POS_LIMIT = 2.0**100


def float32_of(value: float) -> float:
    """``value`` rounded to float32 as C++ does when a double argument meets a float parameter."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def check_format(op: str, ebits: int, exponent_bias: int) -> int:
    """Refuse a format outside the exact range (module docstring); returns ``mbits``."""
    if not 1 <= ebits <= 7:
        raise ValueError(f"{op}: argument 'ebits' must be in [1, 7], got {ebits}")
    mbits = 7 - ebits
    if not 0 <= exponent_bias <= 126 - mbits:
        raise ValueError(
            f"{op}: argument 'exponent_bias' must be in [0, {126 - mbits}] for ebits {ebits} "
            f"(every code then a float32 normal), got {exponent_bias}"
        )
    return mbits


def check_max_pos(op: str, max_pos: float) -> float:
    """``max_pos`` as the float32 upstream reads; 0 or in [2**-126, 2**100] (module docstring)."""
    if not (isinstance(max_pos, (int, float)) and math.isfinite(max_pos)):
        raise ValueError(f"{op}: argument 'max_pos' must be a finite number, got {max_pos!r}")
    if not (max_pos == 0 or 2.0**-126 <= max_pos <= MAX_POS_LIMIT):
        raise ValueError(
            f"{op}: argument 'max_pos' must be 0 or in [2**-126, 2**100], got {max_pos}"
        )
    return float32_of(float(max_pos))


def encode(x: torch.Tensor, ebits: int, bias: int, max_pos: float) -> torch.Tensor:
    """HFP8 codes (int32 in [0, 255]) of the float32 tensor ``x``, upstream's bytes exactly
    (module docstring).  ``ENCODE_LAUNCHES`` launches (``mbits = 0``: 2 fewer)."""
    mbits, k = 7 - ebits, 16 + ebits
    xb = x.view(torch.int32)
    ab = torch.bitwise_and(xb, 0x7FFFFFFF)  # |x| on the bits: no float op sees a NaN payload
    # saturation on the bits (int order is float order for |x|): inf and every NaN -> max_pos
    c = torch.clamp_max(ab, _bits(max_pos))
    # normal: round half to even at 2**k (the subtraction of the rebias folded into the add);
    # mbits = 0: upstream's bouncer sees an odd quotient whatever the exponent: ties round up
    if mbits > 0:
        up = torch.remainder(torch.floor_divide(c, 2**k), 2).add_(c)
    else:
        up = c.add(1)
    up.add_(2 ** (k - 1) - 1 - ((127 - bias) << 23))
    normal = up.floor_divide_(2**k).remainder_(256)
    # subnormal: a fixed-point count of the smallest step 2**(1 - bias - mbits)
    sub = torch.mul(c.view(torch.float32), 2.0 ** (bias + mbits - 1)).round_().to(torch.int32)
    code = torch.where(c < ((128 - bias) << 23), sub, normal)
    # a signalling NaN: upstream's fminf returns it quieted, its bouncer sum keeps it, and the
    # low byte of its bits is the code
    snan = torch.logical_and(ab > 0x7F800000, ab < 0x7FC00000)
    code = torch.where(snan, torch.remainder(xb, 256), code)
    return torch.where(xb < 0, torch.bitwise_or(code, 128), code)


def _bits(value: float) -> int:
    """The int32 bit pattern of the float32 ``value``."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


def decode(codes: torch.Tensor, ebits: int, bias: int) -> torch.Tensor:
    """float32 values of HFP8 codes (a uint8 tensor, any strides), upstream's ``hfp8_to_float``
    bit for bit.  ``DECODE_LAUNCHES`` launches."""
    mbits, k = 7 - ebits, 16 + ebits
    c = codes.to(torch.int32)
    m = torch.remainder(c, 128)
    normal = torch.mul(m, 2**k).add_((127 - bias) << 23).view(torch.float32)
    sub = m.to(torch.float32).mul_(2.0 ** (1 - bias - mbits))
    v = torch.where(m < 2**mbits, sub, normal)
    return torch.where(c >= 128, v.neg(), v)
