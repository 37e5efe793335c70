"""MurmurHash3's 64-bit ``x86_128`` mix of one int64 block, as upstream's ``murmur_hash3_2x64``
(``fbgemm_gpu/src/faster_hash_ops/common_utils.cuh``), on int64 tensors: the zch family's
shared arithmetic.

Upstream computes in ``uint64``; a tensor holds the same 64 bits as ``int64``.  Every step is
exact modulo ``2**64`` with signed ops:

- ``a * c`` (``c`` a constant of 64 bits, passed as its signed value) and ``a + b`` wrap modulo
  ``2**64`` on int64, as the unsigned ops do;
- ``a << r`` is ``a * 2**r`` (wraps the same way); the logical ``a >> s`` is
  ``floor_divide(a, 2**s)`` (an arithmetic shift: the sign copied into the top ``s`` bits)
  ``& (2**(64 - s) - 1)`` (those bits cleared).  No shift op: a 910B runs ``<<`` / ``>>`` on
  its AI CPU (docs/hardware.md); ``floor_divide``, ``mul``, ``add`` are its int64 AI-Core
  arithmetic, ``bitwise_and`` / ``bitwise_xor`` on int64 are assumed AI Core (not in the
  route table; to be confirmed with a profiler, see budgets.py);
- ``rotl(a, r) = a * 2**r + (a >>> (64 - r))``: the two parts share no bit, so ``+`` is ``|``.

``y`` and ``seed`` are host ints (the schema's), so the second block is folded on the host and
a call launches only the first block's and the finalisation's ops: :data:`HASH_LAUNCHES`.
"""

from __future__ import annotations

import torch

__all__ = ["HASH_LAUNCHES", "murmur_hash3_2x64", "signed64", "unsigned_mod"]

MASK = (1 << 64) - 1
C1 = 0x87C37B91114253D5
C2 = 0x4CF5AD432745937F
F1 = 0xFF51AFD7ED558CCD
F2 = 0xC4CEB9FE1A85EC53
# mul, floor_divide, bitwise_and, add per rotation; floor_divide, bitwise_and, bitwise_xor per
# "h ^= h >>> 33": 1 + 4 + 1 + 1 + 4 (k1, h1) + 4 (the two "* 5 + c") + 2 (^ 16)
# + 2 + 2 * 11 (fmix) + 3 (the last adds and xor)
HASH_LAUNCHES = 44


def signed64(c: int) -> int:
    """The int64 holding the 64 bits of the Python int ``c`` (modulo ``2**64``)."""
    c &= MASK
    return c - (1 << 64) if c >> 63 else c


def _rotl_host(a: int, r: int) -> int:
    a &= MASK
    return ((a << r) | (a >> (64 - r))) & MASK


def _shr(a: torch.Tensor, s: int) -> torch.Tensor:
    """The logical ``a >>> s`` of int64 bit patterns (``0 < s < 64``): 2 launches."""
    return torch.floor_divide(a, 1 << s).bitwise_and_((1 << (64 - s)) - 1)


def _rotl(a: torch.Tensor, r: int) -> torch.Tensor:
    """``rotl64(a, r)`` (``0 < r < 64``): 4 launches."""
    return torch.mul(a, 1 << r).add_(_shr(a, 64 - r))


def _fmix(h: torch.Tensor) -> torch.Tensor:
    """MurmurHash3's ``fmix64``, in place on ``h`` (a fresh tensor): 11 launches."""
    h.bitwise_xor_(_shr(h, 33))
    h.mul_(signed64(F1))
    h.bitwise_xor_(_shr(h, 33))
    h.mul_(signed64(F2))
    return h.bitwise_xor_(_shr(h, 33))


def murmur_hash3_2x64(x: torch.Tensor, y: int, seed: int) -> torch.Tensor:
    """``murmur_hash3_2x64(x, y, seed)`` of every element of the int64 tensor ``x``, as the int64
    holding upstream's uint64 result; :data:`HASH_LAUNCHES` launches (module docstring).

    ``y`` and ``seed`` are taken modulo ``2**64`` as upstream's ``static_cast<uint64_t>``.
    """
    seed &= MASK
    # the second block depends on host ints only
    k2 = _rotl_host((y & MASK) * C2, 33) * C1 & MASK
    h2 = _rotl_host(seed ^ k2, 31)
    k1 = _rotl(torch.mul(x, signed64(C1)), 31).mul_(signed64(C2))
    h1 = _rotl(k1.bitwise_xor_(signed64(seed)), 27)
    # h1 = (h1 + seed) * 5 + c, then h2 = (h2 + h1) * 5 + c': host constants folded in
    h1_t = h1.mul_(5).add_(signed64(seed * 5 + 0x52DCE729))
    h2_t = torch.mul(h1_t, 5).add_(signed64(h2 * 5 + 0x38495AB5)).bitwise_xor_(16)
    h1_t.bitwise_xor_(16)
    h1_t.add_(h2_t)
    h2_t.add_(h1_t)
    h1_t = _fmix(h1_t)
    h2_t = _fmix(h2_t)
    h1_t.add_(h2_t)
    h2_t.add_(h1_t)
    return h1_t.bitwise_xor_(h2_t)


def unsigned_mod(h: torch.Tensor, m: torch.Tensor | int) -> torch.Tensor:
    """``uint64(h) % m`` for int64 bit patterns ``h`` and moduli ``0 < m < 2**62`` (a host int
    or an int64 tensor): ``uint64(h) = h + 2**64`` where ``h < 0``, so the result is
    ``(h mod m + [h < 0] * (2**64 mod m)) mod m`` with floor ``remainder`` (non-negative).
    Launches: remainder, lt, add, remainder (a tensor ``m``: + 5, ``2**64 mod m`` and its
    product with ``[h < 0]``)."""
    if isinstance(m, int):
        wrap: torch.Tensor | int = (1 << 64) % m
    else:  # 2**64 mod m = 2 * (2**63 mod m) mod m, and 2**63 = (2**63 - 1) + 1
        r63 = torch.remainder(torch.remainder((1 << 63) - 1, m).add_(1), m)
        wrap = torch.remainder(r63.mul_(2), m)
    low = torch.remainder(h, m)
    negative = torch.lt(h, 0)
    if isinstance(wrap, int):
        low.add_(negative, alpha=wrap)
    else:
        low.add_(torch.mul(negative, wrap))
    return torch.remainder(low, m)
