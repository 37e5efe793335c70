"""Independent references of the zch family (``fbgemm_npu/native/fbgemm/zch/``), written from
the math in Python ints: MurmurHash3's x64 mix of the two 64-bit blocks ``(x, y)`` as upstream's
``murmur_hash3_2x64`` (``faster_hash_ops/common_utils.cuh``) computes it in ``uint64``."""

from __future__ import annotations

import torch

__all__ = ["murmur_hash3_reference", "murmur_reference"]

M64 = (1 << 64) - 1


def _rotl(a: int, r: int) -> int:
    return ((a << r) | (a >> (64 - r))) & M64


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = h * 0xFF51AFD7ED558CCD & M64
    h ^= h >> 33
    h = h * 0xC4CEB9FE1A85EC53 & M64
    return h ^ (h >> 33)


def murmur_reference(x: int, y: int, seed: int) -> int:
    """``murmur_hash3_2x64(uint64(x), uint64(y), uint64(seed))`` as the int64 of its 64 bits."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed & M64
    h1 ^= _rotl((x & M64) * c1 & M64, 31) * c2 & M64
    h1 = (_rotl(h1, 27) + h2) * 5 + 0x52DCE729 & M64
    h2 ^= _rotl((y & M64) * c2 & M64, 33) * c1 & M64
    h2 = (_rotl(h2, 31) + h1) * 5 + 0x38495AB5 & M64
    h1, h2 = h1 ^ 16, h2 ^ 16
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    r = h1 ^ h2
    return r - (1 << 64) if r >> 63 else r


def murmur_hash3_reference(input: torch.Tensor, y: int, seed: int) -> torch.Tensor:  # noqa: A002
    """``fbgemm::murmur_hash3``'s contract on npu for a 1-element int64 ``input``: the 0-d int64
    of the hash's 64 bits (upstream's CPU kernel raises where the hash is 2**63 or more)."""
    return torch.tensor(murmur_reference(int(input.reshape(-1)[0]), y, seed))


def zero_collision_hash_capped(
    input: torch.Tensor,  # noqa: A002
    identities: torch.Tensor,
    max_probe: int,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Upstream's CPU ``zero_collision_hash`` with ``max_probe`` capped at the identities' rows:
    the probing is circular, so past that many probes the slots repeat and the result is the
    same -- where upstream itself would loop ``max_probe`` (2**40, say) times per id."""
    cap = min(max_probe, identities.size(0))
    return torch.ops.fbgemm.zero_collision_hash(input, identities, cap, **kwargs)
