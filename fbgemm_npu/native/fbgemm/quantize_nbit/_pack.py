"""Packing of N-bit codes into bytes and back, as upstream's fused N-bit rows store them.

Layout (fbgemm's ``QuantUtils``): ``per = 8 // bit_rate`` codes share a byte, little end first:
code ``i`` of a row sits in bits ``[(i % per) * bit_rate, (i % per + 1) * bit_rate)`` of byte
``i // per``.  For ``bit_rate`` in 1..8 (``per`` = 8, 4, 2, 2, 1, 1, 1, 1: a 3-bit code takes
bits 0-2 and 3-5, as upstream's reference kernel writes it).

No shifts (``<<`` / ``>>`` have no AI-Core kernel on a 910B, docs/hardware.md "shifts"): packing
multiplies each code by ``2 ** ((i % per) * bit_rate)`` and sums a byte's codes in int32 (the
codes occupy disjoint bits, so the sum is the bitwise or); unpacking is an int32 ``floor_divide``
by the same powers and a ``remainder`` by ``2 ** bit_rate``.  The powers are a cached ``[per]``
int32 tensor per device (built fresh when traced: a cached real tensor would be foreign to a
fake-tensor trace), filled by ``_index.warm_caches`` too.  Shared with the IntNBit TBE, which
reads the same rows.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import on_warm, tracing

__all__ = ["codes_per_byte", "pack_codes", "powers", "unpack_codes", "warm_powers"]

_POWERS: dict[tuple[torch.device, int], torch.Tensor] = {}


def codes_per_byte(bit_rate: int) -> int:
    """``8 // bit_rate``: how many codes one byte holds (``bit_rate`` in 1..8)."""
    return 8 // bit_rate


def powers(bit_rate: int, device: torch.device) -> torch.Tensor:
    """``[2 ** (j * bit_rate) for j < per]`` as int32 on ``device`` (cached; do not write)."""
    per = codes_per_byte(bit_rate)
    if tracing():
        return torch.tensor([2 ** (j * bit_rate) for j in range(per)], dtype=torch.int32).to(device)
    key = (torch.device(device), bit_rate)
    buf = _POWERS.get(key)
    if buf is None:
        buf = torch.tensor([2 ** (j * bit_rate) for j in range(per)], dtype=torch.int32).to(device)
        _POWERS[key] = buf
    return buf


@on_warm
def warm_powers(device: torch.device) -> None:
    """Fill the powers of every bit rate on ``device`` (``_index.warm_caches`` calls this before
    a measurement: the first upload is no launch of the call being counted)."""
    for bit_rate in range(1, 9):
        powers(bit_rate, device)


def pack_codes(codes: torch.Tensor, bit_rate: int) -> torch.Tensor:
    """``[R, C]`` int32 codes in ``[0, 2 ** bit_rate)`` -> ``[R, C // per]`` uint8 bytes.

    ``C`` must be a multiple of ``per``.  Launches: ``mul`` by the powers, ``sum`` (int32) and
    the uint8 cast; ``per == 1``: the cast only.
    """
    rows, cols = codes.shape
    per = codes_per_byte(bit_rate)
    if per == 1:
        return codes.to(torch.uint8)
    grouped = codes.reshape(rows, cols // per, per) * powers(bit_rate, codes.device)
    return grouped.sum(dim=2, dtype=torch.int32).to(torch.uint8)


def unpack_codes(data: torch.Tensor, bit_rate: int) -> torch.Tensor:
    """``[R, B]`` uint8 bytes -> ``[R, B * per]`` int32 codes (the inverse of :func:`pack_codes`).

    Launches: the int32 cast, ``floor_divide`` by the powers, ``remainder`` by ``2 ** bit_rate``.
    """
    rows, nbytes = data.shape
    per = codes_per_byte(bit_rate)
    wide = data.to(torch.int32).unsqueeze(2)
    shifted = torch.floor_divide(wide, powers(bit_rate, data.device))
    return torch.remainder(shifted, 2**bit_rate).reshape(rows, nbytes * per)
