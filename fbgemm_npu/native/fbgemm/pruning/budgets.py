"""Budgets of the pruning family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/pruning/test_pruning_budgets.py`` measures each.

Where the hash runs on a 910B: ``_hash.py`` builds MurmurHash3's ``fmix32`` / ``fmix64`` from
int64 ``mul``, ``add``, ``floor_divide``, ``remainder`` (AI Core in docs/hardware.md) and
``bitwise_and`` / ``bitwise_xor`` (in no route table we have read: counted as AI Core by
assumption, as the zch family does); ``fmix64`` also assumes int64 ``mul`` wraps modulo
``2**64`` (``fmix32`` never overflows).  No shift, sort, searchsorted, int64 cumsum or int64
index_add: segment ids by int32 ``index_add`` + ``cumsum`` (``native/_index.py``).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # the probe count P is data (module docstring of lookup.py): the 1 sync reads the longest
    # displacement, the data checks with it (their 5: non_decreasing x 2 (ge, all), cat with
    # the bounds).  Table meta: sub, clamp_min, stack (int64 keys: + wrap_of's 5).  The slots'
    # pass: segment ids (3) + clamp, the meta gather, sub, the keys' hash (int32: 19 with the
    # int64 keys' cast: 20; int64: 16), sub, remainder, ne, ge, lt, logical_and x 2, where,
    # amax; the probes: segment ids (4), meta gather, the indices' hash, add, remainder, add_,
    # clamp_, the [N, P] key gather, eq x 2, logical_or, where, amin, clamp_max, gather, the
    # row gather, lt, ne, logical_and, where (a scalar: fill + where), eq, where, and the
    # values' cast to the indices' dtype (89: int32 indices of an int64 table).
    # ``int32_table``: int32 indices and table, neither cast (87); ``int64``: int64 indices and
    # table, the 64-bit hash (fewer launches than fmix32's split products, + wrap_of; an int32
    # table: the main path's count bounds it).  ``empty`` (no index, or no slot): the clone, and
    # the checks queued (9) instead of read
    "fbgemm::pruned_hashmap_lookup": Budget(
        launches=89,
        checks=5,
        syncs=1,
        ai_cpu=0,
        paths={"int32_table": 87, "int64": 82, "empty": 1},
        path_checks={"empty": 9},
        note="1 sync: the probe count (the longest displacement of the table), read with the "
        "data checks; an O(C) pass over the slots per call (a host-known bound would drop both)",
    ),
    # segment ids of the indices (4), the [T, 2] meta (sub, stack) and its gather, the int64
    # cast of int32 indices, gt, add, clamp_, the remapping gather, its cast to the indices'
    # dtype, where (14: int32 indices, int64 remappings); ``one_cast``: one of the two casts
    # (int32 remappings), ``int64``: neither; checks (15): the offsets' and remapping offsets'
    # conditions (ge, lt, logical_and, logical_not, logical_or, all for the indices) queued in
    # one assert_on_device.  ``empty``: the clone and the queued checks (9)
    "fbgemm::pruned_array_lookup": Budget(
        launches=14,
        checks=15,
        ai_cpu=0,
        paths={"one_cast": 13, "int64": 12, "empty": 1},
        path_checks={"empty": 9},
    ),
    # host-side build (insert.py: sequential linear probing is order-dependent; upstream's own
    # set_index_remappings inserts on CPU too): the int64 casts of the int32 pieces (4) and their
    # cat, one device-to-host read (the 1 sync), the table back by a pinned non-blocking upload
    # and copy_ into hash_table[:, :2] (7).  ``int64``: int64 indices and table, no cast (3).
    # The host checks and upstream's CPU kernel launch nothing on the device
    "fbgemm::pruned_hashmap_insert": Budget(
        launches=7,
        syncs=1,
        ai_cpu=0,
        paths={"int64": 3},
        note="1 sync: a one-time, model-load op built on the host (upstream's CPU kernel on "
        "host copies, then one non-blocking upload back)",
    ),
}
