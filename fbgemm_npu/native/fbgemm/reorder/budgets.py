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
    "source slot: 8) and per element (the slot of each element and its source: 6), then the "
    "clamped gather; a fused AI Core kernel walking the slots would close the gap."
)

BUDGETS: dict[str, Budget] = {
    # the slot index: segment ids of the ads (clamp, index_add, cumsum; of bo[:-1], so in range
    # unclamped), the gather of each ad's request bounds, sub (n_b), add (base), mul + add over
    # [T, NA]; clamp_ and the gather of the lengths.  broadcast: t + T b in one add, in range
    # whatever the data (no clamp); max_batch_size: zeros + copy_.
    # checks: batch_offsets non-decreasing (ge, all) and its ends, one DataChecks (+5)
    "fbgemm::reorder_batched_ad_lengths": Budget(
        launches=10,
        checks=7,
        syncs=0,
        ai_cpu=0,
        paths={"broadcast_lengths": 5, "max_batch_size": 12},
        note=_NOTE,
    ),
    # the lengths' slot index (8; broadcast 4), the source spans (clamp_ but broadcast,
    # index_select), d =
    # C[s] - R[q] (sub), the slot of each element (segment ids: 3), d[q] (index_select), + j
    # (add_ of the cached arange), clamp_, the gather into the output.  checks: batch_offsets
    # (2), C non-decreasing (2), R consistent with C (sub, eq, all), one DataChecks (+5)
    "fbgemm::reorder_batched_ad_indices": Budget(
        launches=18,
        checks=12,
        syncs=0,
        ai_cpu=0,
        paths={"broadcast_indices": 13},
        target=12,
        note=_NOTE + _OVER,
    ),
    # reorder_batched_ad_indices' program over embedding rows
    "fbgemm::reorder_batched_sequence_embeddings": Budget(
        launches=18, checks=12, syncs=0, ai_cpu=0, target=12, note=_NOTE + _OVER
    ),
    # reorder_batched_ad_indices' program (18; broadcast 13) on the cat of the list (1), minus
    # each request's base C[first_b] - P_b: C at T bo (mul, clamp_, index_select; broadcast: a
    # strided view), the pinned upload of P, sub, its gather per ad and the sub_ from d (+8;
    # broadcast +5); max_batch_size: the padded spans (zeros, copy_).  checks: as the indices'
    # plus each request's runs inside its tensor (le, all)
    "fbgemm::cat_reorder_batched_ad_indices": Budget(
        launches=26,
        checks=14,
        syncs=0,
        ai_cpu=0,
        paths={
            "broadcast_indices": 18,
            "max_batch_size": 28,
            "broadcast_indices + max_batch_size": 20,
        },
        target=12,
        note=_NOTE + _OVER + " The list adds its cat and each request's base (8).",
    ),
}
