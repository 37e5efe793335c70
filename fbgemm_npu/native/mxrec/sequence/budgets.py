"""Budgets of the sequence family (``mxrec::multislice_concat``, ``mxrec::reverse_sequence``),
one entry per op; held by ``tests/mxrec/sequence/test_sequence_budgets.py``.

No syncs, no AI-CPU launch on a 910B: ``index_select`` gathers (columns for the slices, rows
for the reversal), int64 index arithmetic by ``sub`` / ``mul`` / ``add`` / ``lt`` (AI Core),
the slice index uploaded pinned and non-blocking (no stall).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # per output: one index_select of the columns; once per call: the upload of the index
    "mxrec::multislice_concat": Budget(launches=1, per="output", setup=1, ai_cpu=0),
    # the length clamp, lt, L - 1, (L - 1) - 2 s, mul by the mask, the flat row add,
    # index_select;
    # checks: eq + all of the clamped lengths (queued)
    "mxrec::reverse_sequence": Budget(launches=7, checks=2, ai_cpu=0),
}
