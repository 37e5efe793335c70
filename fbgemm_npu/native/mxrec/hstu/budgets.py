"""Budgets of the HSTU family, per query tile (``per="tile"``: a tile is ``t`` query rows of every
batch and head at once, ``t`` from ``_attention.tile_rows``), measured by
``tests/mxrec/hstu/test_hstu_budgets.py``.

A call over ``n`` tiles takes at most ``setup + n * launches`` (``Budget.setup``: the offsets,
the padded gather, the mask's key intervals, the tile layout and the gather back, paid once).
No count depends on B or N.  0 syncs with ``max_seq_len`` given; without it the contract reads
the longest sequence back (1 sync).  Data checks (queued): offsets at 0 and T, non-decreasing,
lengths within ``[0, max_seq_len]``, counts ``>= 0`` with ``num_context + num_target`` at most
each sequence's length.  No AI-CPU route: int32 index arithmetic, ``index_select`` gathers,
``index_copy_`` back, no ``searchsorted``.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# fmt: off

_NOTE = (
    "setup (once per call: offsets, the padded gather, the mask's key intervals, q / k / v in "
    "the tile layout, the gather back; 2 more when the last tile is shorter) + launches per query "
    "tile. Per tile (float32, causal, no bias) forward 5: q.k bmm, the mask test and fill, silu, "
    "the score.v bmm written in place; +2 in half precision (scores in float32), +1 bias, +1 "
    "custom mask; path 'context_targets' (num_context / num_target given): a second key "
    "interval per row, +4 a tile, +14 setup"
)
_BWD = (
    _NOTE + ". Backward per tile (float32) 9: q.k, mask, dO.v, silu, silu_backward, dv and dk "
    "baddbmm_, dq bmm written in place; half precision +6 (float32 scores, two casts, dv / dk "
    "accumulate in float32 apart from the bmm); over the catalogue's 12: a fused kernel (one "
    "pass over a tile in AI Core local memory) is the remedy"
)

# Triton path (``_triton_attention.py``, kernel mode triton, checks off): the op's setup without the
# tile layout (offsets, the padded gather, the key intervals, the gather back) + the fused
# kernels (forward 1, backward 2), the same for every dtype, bias or not, any tile count

BUDGETS: dict[str, Budget] = {
    # measured (tests/mxrec/hstu/test_hstu_budgets.py, checks off): per tile float32 5, float16
    # 7, + bias 1, custom mask 1 -> 8; context_targets 12; setup 22-24 (38 context_targets) + 2
    "mxrec::hstu_jagged.equal": Budget(
        launches=8, setup=26, checks=8, path_checks={"context_targets": 14}, ai_cpu=0,
        syncs_unsized=1, per="tile", paths={"context_targets": 12},
        path_setup={"context_targets": 40}, note=_NOTE,
        triton={"call": 21, "context_targets": 35},
    ),
    # per tile float32 9 (11 bias), float16 15 (17 bias / custom mask); context_targets 21;
    # setup 30-37 (51) + 2
    "mxrec::hstu_jagged_backward.equal": Budget(
        launches=17, setup=39, checks=8, path_checks={"context_targets": 14}, ai_cpu=0,
        syncs_unsized=1, per="tile", paths={"context_targets": 21},
        path_setup={"context_targets": 53}, target=12, note=_BWD,
        triton={"call": 24, "context_targets": 38},
    ),
    # delta (q and k of their own offsets): two padded layouts, setup 38 (52) + 2; per tile as
    # equal; checks both offsets and L_q <= L_k
    "mxrec::hstu_jagged.delta": Budget(
        launches=8, setup=40, checks=13, path_checks={"context_targets": 19}, ai_cpu=0,
        syncs_unsized=1, per="tile", paths={"context_targets": 12},
        path_setup={"context_targets": 55}, note=_NOTE,
        triton={"call": 35, "context_targets": 51},
    ),
    "mxrec::hstu_jagged_backward.delta": Budget(
        launches=17, setup=54, checks=13, path_checks={"context_targets": 19}, ai_cpu=0,
        syncs_unsized=1, per="tile", paths={"context_targets": 21},
        path_setup={"context_targets": 69}, target=12, note=_BWD,
        triton={"call": 39, "context_targets": 55},
    ),
    # normal layout: no gathers, no lengths, no data checks; setup 4 (9 causal: the intervals) + 2
    # Triton: 5 (the causal key intervals) + 1; mask_type 2 / 3 ('unmasked'): the kernel alone
    "mxrec::hstu_dense": Budget(
        launches=8, setup=11, ai_cpu=0, per="tile", note=_NOTE,
        triton={"call": 6, "unmasked": 1},
    ),
    # setup 10-19 (k / v transposed, dk / dv / dbias zeroed, casts back) + 2
    "mxrec::hstu_dense_backward": Budget(
        launches=17, setup=21, ai_cpu=0, per="tile", target=12, note=_BWD,
        triton={"call": 7, "unmasked": 2},
    ),
}
