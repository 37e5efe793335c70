"""Budgets of FBGEMM's varlen HSTU ops, per query tile (``per="tile"``) after a once-per-call
``setup``, measured by tests/experimental/test_hstu_varlen_budgets.py over every mask variant of
the main path (causal, contexts + targets + rab, a local window + rab, func + rab, seqused) and
the paged path, in float16 and float32 (float32: fewer, no casts).

Setup (fwd 34-56, bwd 50-74, with int64 metadata, the most when the last tile is shorter): the
int32 lengths (int64 offsets and counts saturated into int32), the padded gathers of q / k / v
into key coordinates (``_gather``: index arithmetic, ``cat``, ``index_select``, ``where``), the
interval table (``_spans.build_spans``, 6-18 launches with contexts / targets / func), the tile
program's own setup (q scaled by alpha, k / v transposed, its output copied back), the way back
(zeros and one ``index_copy_`` per output); rab_padded (1) with rab.  Per tile (over the
``max_seqlen_k`` query rows with rab, ``max_seqlen_q`` without: ``_gather``): the tile
program (``_attention``: fwd 7 causal to 12 with targets / func and rab; bwd 15 to 22).  Paged:
``_paged.gather_pages`` (16) and the targets' gather on top.  No count depends on B or H.
0 syncs (every size is an argument), 0 AI-CPU (int32 index arithmetic, ``index_select`` /
``index_copy_``, no ``searchsorted``).  Data checks (queued, one stack): offsets, seqused,
lengths against max_seqlen_q / max_seqlen_k and each other, counts (15-32); paged: the page
data and the cached lengths (52).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# fmt: off

_NOTE = (
    "per query tile after the setup (the padded gathers in key coordinates, the interval table, "
    "the way back): main path = the most over causal, contexts + targets + rab, local + rab, "
    "func + rab and seqused (float16); path 'paged': the paged KV cache (forward only)"
)

BUDGETS: dict[str, Budget] = {
    # Triton path (hstu/_triton_attention.py, kernel mode triton, checks off, any dtype / tile
    # count): the setup without the tile layout + the fused kernels (fwd 1, bwd 2);
    # tests/triton/test_triton_hstu_budgets.py
    # int64 metadata: setup 34 (causal) .. 54 (contexts + targets + rab + seqused), 2 more
    # when the last tile is shorter; per tile 7 (causal) .. 12; int32 metadata 2-4 fewer;
    # paged 69 (+ 2) + 11
    "fbgemm::hstu_varlen_fwd_80": Budget(
        launches=12, setup=56, checks=32, ai_cpu=0, per="tile", note=_NOTE,
        paths={"paged": 11}, path_setup={"paged": 71}, path_checks={"paged": 52},
        triton={"call": 31, "context_targets_rab": 51, "local_rab": 38, "func_rab": 48,
                "seqused": 31, "paged": 66},  # fmt: skip
    ),
    # setup 50 .. 72 (contexts + targets + rab + seqused, has_drab), 2 more when the last tile
    # is shorter; per tile 15 (causal) .. 22
    "fbgemm::hstu_varlen_bwd_80": Budget(
        launches=22, setup=74, checks=32, ai_cpu=0, per="tile", note=_NOTE,
        triton={"call": 40, "context_targets_rab": 59, "local_rab": 46, "func_rab": 56,
                "seqused": 40},  # fmt: skip
    ),
}
