"""Budgets of the zch family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/zch/test_zch_budgets.py`` measures each.

Where the int64 hash runs on a 910B: MurmurHash3 is 64-bit integer arithmetic, built (``_hash.py``)
from int64 ``mul`` / ``add`` (wrapping modulo 2**64), ``floor_divide`` (the shifts: ``>>`` and
``<<`` have no AI-Core kernel on a 910B, docs/hardware.md), ``remainder``, ``bitwise_and`` and
``bitwise_xor``.  docs/hardware.md lists int64 ``mul``, ``add``, ``floor_divide`` and
``remainder`` as AI Core; int64 ``bitwise_and`` / ``bitwise_xor`` / ``fmod`` are in no route
table we have read, so they are counted as AI Core (``ai_cpu=0``) by assumption, and that int64
``mul`` wraps exactly as on the CPU is assumed too: both to be confirmed on a real host (a
profiler trace and this family's parity tests).  If CANN lowers int64 ``mul`` through float or
splits it, the hash needs 32-bit limbs (about 4x the launches).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # the hash alone (_hash.HASH_LAUNCHES): 44 elementwise int64 ops, y and seed folded on the host
    "fbgemm::murmur_hash3": Budget(
        launches=44, ai_cpu=0, note="int64 bitwise ops assumed AI Core: see the module docstring"
    ),
    # hash 44; h % b (unsigned) 4; the [N, max_probe] slot table: add, remainder; gather of
    # identities[:, 0], eq, where, amin (the first match); the hit: add, remainder; lt, where
    # (disable_fallback: the same).  Paths, each the ceiling of the calls a spec maps to it (the
    # first that applies: chunked, no_probe, opt_in, int32_identities, int32): int32 ids: their
    # int64 cast; int32_identities: fmod + cast (upstream's id % (2**31 - 1)); opt_in (with
    # int32 identities): h % num_reserved_slots (4) + the block; no_probe (int32 ids, opt-in):
    # the hash and the fallback only; chunked (int32 identities, opt-in): per-id moduli (sub,
    # clamp, 2**64 mod m: 5 more per h % m), the offsets added to slots (clamped), hit and
    # fallback; its checks: amin x2, maximum + amax, add + amax, the queued check's 5
    "fbgemm::zero_collision_hash": Budget(
        launches=58,
        ai_cpu=0,
        paths={
            "int32": 59,
            "int32_identities": 60,
            "chunked": 77,
            "opt_in": 65,
            "no_probe": 54,
        },
        path_checks={"chunked": 11},
        note="int64 bitwise ops assumed AI Core: see the module docstring",
    ),
}
