"""Budgets of the FuXi family, per query tile (``per="tile"``: ``t`` query rows of every batch and
head at once, ``t`` from ``_program.tiles``), measured by
``tests/mxrec/hstu_fuxi/test_hstu_fuxi_budgets.py``.

A call over ``n`` tiles takes at most ``setup + n * launches`` (``Budget.setup``: the offsets'
upload, the padded gather, the spans, q / k / v heads-major, the way back, paid once).  No count
depends on B or N.  0 data checks and 0 syncs: ``seqOffset`` is a host list, checked on the
host.  No AI-CPU route.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# fmt: off

_NOTE = (
    "setup (once per call: the offsets' upload, the padded gather, the mask's key intervals, q / "
    "k / v heads-major, the jagged rows back) + launches per query tile. Forward per tile "
    "(float16, causal) 8: q.k matmul and its float32 cast, the mask test, silu, the scale and "
    "cast, the fill, the P.v matmul, the copy out; float32 -1, custom mask +1; path 'biases' "
    "(timestampBias and positionBias): the stack of the three channels +1, the custom mask on "
    "the bias channels +1"
)
_BWD = (
    _NOTE + ". Backward per tile (float32, causal) 10: q.k, the mask test and fill, dO.v, silu, "
    "silu_backward, the P cast, dv and dk baddbmm_, dq bmm and copy; half precision +6 (float32 "
    "scores, casts, dv / dk accumulated apart from the bmm), custom mask +4; biases +4 (the "
    "fill of dP, the bias-gradient sum, the channel stack and fill); over the catalogue's 12: a "
    "fused kernel (one pass over a tile in AI Core local memory) is the remedy"
)

BUDGETS: dict[str, Budget] = {
    # measured (checks off): per tile float16 8 (custom mask 9), float32 7 (8); biases 9 (11);
    # setup jagged 20-22, normal 3-8 (the causal intervals)
    "mxrec::hstu_fuxi": Budget(
        launches=9, setup=22, ai_cpu=0, per="tile", paths={"biases": 11},
        path_setup={"biases": 22}, note=_NOTE,
    ),
    # per tile float32 10 (custom mask 14), float16 16 (20); biases float32 14 (17), float16 20
    # (23); setup 27-29, biases 30-33 (the float32 bias-gradient accumulator and its reductions)
    "mxrec::hstu_dense_backward_fuxi": Budget(
        launches=20, setup=29, ai_cpu=0, per="tile", paths={"biases": 23},
        path_setup={"biases": 33}, target=12, note=_BWD,
    ),
}
