"""The home slot of a key in upstream's pruning hash tables, on int64 tensors.

Upstream (``embedding_forward_quantized_cpu_template.cpp``, ``pruned_hash_function``) hashes
``static_cast<uint32_t>(idx)`` with MurmurHash3's ``fmix32`` for int32 indices and
``static_cast<uint64_t>(idx)`` with ``fmix64`` for int64 indices, and takes the result modulo the
table's capacity (unsigned).  No shift op here: a 910B runs ``<<`` / ``>>`` on its AI CPU
(docs/hardware.md); a right shift of a non-negative value is ``floor_divide`` by ``2**s``.

* ``fmix32`` is computed exactly in int64 without any overflow: every value is below ``2**32``
  and each 32-bit product ``h * c mod 2**32`` is split as ``h * c_lo + ((h * c_hi) mod 2**16)
  * 2**16`` (``c = c_hi * 2**16 + c_lo``), products below ``2**48``.
* ``fmix64`` holds the uint64 bits in int64: ``mul`` wraps modulo ``2**64`` (the zch family's
  assumption, ``native/fbgemm/zch/_hash.py``: to be confirmed on a 910B), the logical shift is
  ``floor_divide`` then ``bitwise_and`` (the copied sign bits cleared), and the unsigned modulo
  adds ``2**64 mod m`` where the int64 is negative.
"""

from __future__ import annotations

import torch

__all__ = ["HASH32_LAUNCHES", "HASH64_LAUNCHES", "home_slot", "wrap_of"]

M32 = (1 << 32) - 1
M16 = (1 << 16) - 1
C32 = (0x85EBCA6B, 0xC2B2AE35)
F64 = (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
# int32 keys: cast, and (the uint32 bits), 3 x (floor_divide, xor), 2 x (mul, mul, and, mul,
# add) for the split products, then the remainder: 2 + 6 + 10 + 1
HASH32_LAUNCHES = 19
# int64 keys: 3 x (floor_divide, and, xor), 2 x mul, then remainder, lt, mul, add, remainder
HASH64_LAUNCHES = 16


def _signed64(c: int) -> int:
    return c - (1 << 64) if c >> 63 else c


def _mul32(h: torch.Tensor, c: int) -> torch.Tensor:
    """``h * c mod 2**32`` for ``0 <= h < 2**32``, exact in int64 (no product reaches 2**63)."""
    hi = torch.mul(h, c >> 16).bitwise_and_(M16).mul_(1 << 16)
    return torch.mul(h, c & M16).add_(hi).bitwise_and_(M32)


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h.bitwise_xor(torch.floor_divide(h, 1 << 16))
    h = _mul32(h, C32[0])
    h.bitwise_xor_(torch.floor_divide(h, 1 << 13))
    h = _mul32(h, C32[1])
    return h.bitwise_xor_(torch.floor_divide(h, 1 << 16))


def _shr64(h: torch.Tensor, s: int) -> torch.Tensor:
    return torch.floor_divide(h, 1 << s).bitwise_and_((1 << (64 - s)) - 1)


def _fmix64(h: torch.Tensor) -> torch.Tensor:
    h = h.bitwise_xor(_shr64(h, 33))
    h.mul_(_signed64(F64[0]))
    h.bitwise_xor_(_shr64(h, 33))
    h.mul_(_signed64(F64[1]))
    return h.bitwise_xor_(_shr64(h, 33))


def wrap_of(capacity: torch.Tensor) -> torch.Tensor:
    """``2**64 mod m`` for the int64 moduli ``capacity`` (each in ``[1, 2**62)``): ``2**64 = 2 *
    2**63`` and ``2**63 = (2**63 - 1) + 1``.  Launches: remainder, add, remainder, mul,
    remainder."""
    r63 = torch.remainder(torch.remainder((1 << 63) - 1, capacity).add_(1), capacity)
    return torch.remainder(r63.mul_(2), capacity)


def home_slot(
    keys: torch.Tensor,
    key_dtype: torch.dtype,
    capacity: torch.Tensor,
    wrap: torch.Tensor | None,
) -> torch.Tensor:
    """``pruned_hash_function(key) % capacity`` (int64, in ``[0, capacity)``) of every key, hashed
    as upstream hashes a ``key_dtype`` index: int32 -> ``fmix32`` of the uint32 bits, int64 ->
    ``fmix64`` of the uint64 bits.  ``capacity`` (>= 1) and ``wrap`` (:func:`wrap_of`, read for
    int64 keys only) broadcast with ``keys``.  Launches: :data:`HASH32_LAUNCHES` /
    :data:`HASH64_LAUNCHES`."""
    if key_dtype == torch.int32:
        h = keys.to(torch.int32).to(torch.int64).bitwise_and_(M32)
        return torch.remainder(_fmix32(h), capacity)
    if wrap is None:
        raise ValueError("home_slot: int64 keys need the 2**64 mod capacity column")
    h = _fmix64(keys.to(torch.int64))
    low = torch.remainder(h, capacity)
    low.add_(torch.mul(torch.lt(h, 0), wrap))
    return torch.remainder(low, capacity)
