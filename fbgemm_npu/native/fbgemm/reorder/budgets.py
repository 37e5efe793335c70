"""Budgets of the reorder family, one entry per op it registers (see
fbgemm_npu.native.family.Budget); ``tests/fbgemm/reorder/test_reorder_budgets.py`` measures each.

The same for int32 and int64 offsets / batch offsets and every value dtype, whatever B, T and
NA: the index is built per ad (``NA``) and per element, never per request or table on the host.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

_NOTE = (
    "AI CPU 0: the request of each ad and the slot of each element by int32 index_add + cumsum "
    "(native/_index.py segment_ids), no searchsorted / repeat_interleave / int64 cumsum; int64 "
    "slot arithmetic by add / mul only; every gather index clamped (bad data stays in bounds). "
    "A fused kernel would do the gather in 1-2 launches, as upstream's CUDA kernels do."
)
_OVER = (
    " Over the catalogue's 12: two index programs, per slot (the request of each ad and its "
    "source slot: 9) and per element (the slot of each element and its source: 6), then the "
    "clamped gather; a fused AI Core kernel walking the slots would close the gap."
)

BUDGETS: dict[str, Budget] = {
    # the slot index: segment ids of the ads (clamp, index_add, cumsum), clamp_, the gather of
    # each ad's request bounds, sub (n_b), add (base), mul + add over [T, NA]; clamp_ and the
    # gather of the lengths.  broadcast: t + T b in one add; max_batch_size: zeros + copy_.
    # checks: batch_offsets non-decreasing (ge, all) and its ends, one DataChecks (+5)
    "fbgemm::reorder_batched_ad_lengths": Budget(
        launches=11,
        checks=7,
        syncs=0,
        ai_cpu=0,
        paths={"broadcast_lengths": 7, "max_batch_size": 13},
        note=_NOTE + " max_batch_size (13) pads by zeros + copy_, one over the catalogue's 12.",
    ),
    # the lengths' slot index (9; broadcast 5), the source spans (clamp_, index_select), d =
    # C[s] - R[q] (sub), the slot of each element (segment ids: 3), d[q] (index_select), + j
    # (add_ of the cached arange), clamp_, the gather into the output.  checks: batch_offsets
    # (2), C non-decreasing (2), R consistent with C (sub, eq, all), one DataChecks (+5)
    "fbgemm::reorder_batched_ad_indices": Budget(
        launches=19,
        checks=12,
        syncs=0,
        ai_cpu=0,
        paths={"broadcast_indices": 15},
        target=12,
        note=_NOTE + _OVER,
    ),
    # reorder_batched_ad_indices' program over embedding rows
    "fbgemm::reorder_batched_sequence_embeddings": Budget(
        launches=19, checks=12, syncs=0, ai_cpu=0, target=12, note=_NOTE + _OVER
    ),
    # reorder_batched_ad_indices' program (19; broadcast 15) on the cat of the list (1), minus
    # each request's base C[first_b] - P_b: C at T bo (mul, clamp_, index_select; broadcast: a
    # strided view), the pinned upload of P, sub, its gather per ad and the sub_ from d (+8;
    # broadcast +5); max_batch_size: the padded spans (zeros, copy_).  checks: as the indices'
    # plus each request's runs inside its tensor (le, all)
    "fbgemm::cat_reorder_batched_ad_indices": Budget(
        launches=27,
        checks=14,
        syncs=0,
        ai_cpu=0,
        paths={
            "broadcast_indices": 20,
            "max_batch_size": 29,
            "broadcast_indices + max_batch_size": 22,
        },
        target=12,
        note=_NOTE + _OVER + " The list adds its cat and each request's base (8).",
    ),
}
