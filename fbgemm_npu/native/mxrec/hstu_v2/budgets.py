"""Budgets of the HSTU v2 family, per query tile (``per="tile"``, as the HSTU family's), measured
by ``tests/mxrec/hstu_v2/test_hstu_v2_budgets.py``.

``setup``: the launches a call pays once (the two padded gathers, the lengths, the spans, k / v
transposed, the gathers back); then ``launches`` per tile: a call over ``n`` tiles takes at most
``setup + n * launches``.  No count depends on B or N.  0 syncs: both max lengths are
required.  Data checks (queued): both offsets at 0 and T, non-decreasing; lengths within the
max lengths; ``L_q <= L_k``; counts ``>= 0``, within ``max_seqlen_q`` and ``n_c + n_t < L_q``.
No AI-CPU route (int32 index arithmetic, ``index_select`` gathers).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# fmt: off

_NOTE = (
    "per query tile, after a setup paid once (the padded gathers of q and of k / v, the "
    "spans, the tile layout, the gathers back; 2 more when the last tile is shorter). Path "
    "'context_targets': num_context / num_target (the spans' context and target rules: 2 "
    "intervals a row, so 4 more launches a tile). Path 'arbitrary': arbitrary_func with 2 "
    "(start, end) pairs a row (Rec SDK's tests' groups); each further pair costs 4 launches a "
    "tile (the tile program tests each interval)"
)

BUDGETS: dict[str, Budget] = {
    # Triton path (hstu/_triton_attention.py, kernel mode triton, checks off, any dtype / tile
    # count): the setup without the tile layout + the fused kernels (fwd 1, bwd 2);
    # tests/triton/test_triton_hstu_budgets.py
    # float16 with rab and alpha, int64 offsets and counts (their casts), checks off: setup 37 +
    # 10 a tile (a window with a left edge: its interval tests lo and hi), causal 36 + 8, none /
    # mask_type 2 / 3 fewer, float32 fewer; context_targets 51 + 12; arbitrary (2 pairs) 36 + 14;
    # every setup + 2 when the last tile is shorter
    "mxrec::hstu_forward_v2": Budget(
        launches=10, setup=39, checks=11, path_checks={"context_targets": 20}, ai_cpu=0,
        per="tile", paths={"context_targets": 12, "arbitrary": 14},
        path_setup={"context_targets": 53, "arbitrary": 38}, note=_NOTE,
        triton={"call": 33, "sliding": 34, "none": 31, "context_targets": 48, "arbitrary": 33},
    ),
    # the same inputs: setup 51 + 19 a tile (sliding), causal 50 + 17; context_targets 65 + 21;
    # arbitrary (2 pairs) 48 + 23; + 2 for a shorter last tile
    "mxrec::hstu_backward_v2": Budget(
        launches=19, setup=53, checks=11, path_checks={"context_targets": 20}, ai_cpu=0,
        per="tile", paths={"context_targets": 21, "arbitrary": 23},
        path_setup={"context_targets": 67, "arbitrary": 52}, note=_NOTE,
        triton={"call": 37, "sliding": 38, "none": 34, "context_targets": 52, "arbitrary": 37},
    ),
}
