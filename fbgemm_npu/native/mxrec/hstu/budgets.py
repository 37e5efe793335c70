"""Budgets of the HSTU family, per query tile (``per="tile"``: a tile is ``t`` query rows of every
batch and head at once, ``t`` from ``_attention.tile_rows``), measured by
``tests/mxrec/hstu/test_hstu_budgets.py``.

The setup (offsets, the gather into the padded layout, k / v transposed, the gather back) is
paid once and sits inside the first tile's count; a call over ``n`` tiles takes at most
``n * launches``.  No count depends on B or N.  0 syncs with ``max_seq_len`` given; without it
the contract reads the longest sequence back (1 sync).  Data checks (queued): offsets at 0 and T,
non-decreasing, lengths and counts within ``[0, max_seq_len]``.  No AI-CPU route: int32 index
arithmetic, ``index_select`` gathers, segment ids without ``searchsorted``.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# fmt: off

_NOTE = (
    "per query tile; the setup (about 30 launches: offsets, the padded gather, k / v transposed, "
    "the gather back) is inside the first tile's count. Path 'context_targets': num_context / "
    "num_target given (the built-in mask's context and target rules, about 18 launches more per "
    "tile; a fused kernel would build the mask in its tile loop)"
)

BUDGETS: dict[str, Budget] = {
    # 1 tile, checks off, the most over float32 / float16 (2 casts more): 39 (causal), 38
    # (custom), 41 (bias + alpha); each further tile 13-17; context_targets 60, 32 more a tile
    "mxrec::hstu_jagged.equal": Budget(
        launches=41, checks=8, path_checks={"context_targets": 12}, ai_cpu=0, syncs_unsized=1,
        per="tile", paths={"context_targets": 60}, note=_NOTE,
    ),
    # 1 tile: 83 (causal), 88 (bias + alpha); each further 27-35; context_targets 107, 52 more
    "mxrec::hstu_jagged_backward.equal": Budget(
        launches=88, checks=8, path_checks={"context_targets": 12}, ai_cpu=0, syncs_unsized=1,
        per="tile", paths={"context_targets": 107}, note=_NOTE,
    ),
    # delta (q and k of their own offsets): two layouts; 1 tile, checks off: 53 (float16 bias),
    # each further 14-17; context_targets 72, 33 more a tile; checks both offsets and L_q <= L_k
    "mxrec::hstu_jagged.delta": Budget(
        launches=53, checks=13, path_checks={"context_targets": 17}, ai_cpu=0, syncs_unsized=1,
        per="tile", paths={"context_targets": 72}, note=_NOTE,
    ),
    # 1 tile: 101 (float16 bias); each further 28-36; context_targets 120, 53 more
    "mxrec::hstu_jagged_backward.delta": Budget(
        launches=101, checks=13, path_checks={"context_targets": 17}, ai_cpu=0, syncs_unsized=1,
        per="tile", paths={"context_targets": 120}, note=_NOTE,
    ),
    # normal layout: no gathers, no lengths, no data checks; 1 tile: 11-16 (float16, custom
    # mask and bias), each further tile 9-14 (setup 2: k / v transposed)
    "mxrec::hstu_dense": Budget(launches=16, ai_cpu=0, per="tile", note="per query tile"),
    # 1 tile: 29-40; each further 23-31 (setup: k / v transposed, dk / dv zeroed, cast, copied)
    "mxrec::hstu_dense_backward": Budget(launches=40, ai_cpu=0, per="tile", note="per query tile"),
}
