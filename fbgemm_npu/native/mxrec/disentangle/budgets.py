"""Budgets of the disentangle family (``mxrec::disentangle_attention`` and its backward), one
entry per op; held by ``tests/mxrec/disentangle/test_disentangle_budgets.py``.

No data checks (every relative position is clamped into the ``2s`` columns by the op's
contract), no syncs, no AI-CPU launch on a 910B: int64 ``add`` / ``clamp`` for the index, float
``gather`` / ``scatter_add_``, ``matmul`` / ``baddbmm`` on the cube units.  Counts are for
contiguous inputs; ``matmul`` counts as one launch however it broadcasts.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

_BACKWARD = (
    "over the catalogue's 16 (forward 11 meets it): the softmax backward and the 4 matmuls of "
    "dQ / dK / dV / dP are 7 with the index, and each positional term adds 6 (a zeroed "
    "(b, n, s, 2s) buffer, its scatter_add_, the head-broadcast P copied and one baddbmm_ "
    "into dQ or dK, the matmul and the batch sum of dP); a fused kernel would scatter inside "
    "the matmuls.  b == 1 needs no broadcast copy (2 fewer)"
)

BUDGETS: dict[str, Budget] = {
    # index add + clamp_; per term matmul + gather; the terms' add_; baddbmm; mask add_;
    # softmax; matmul with V.  One term: 8; int32 relative_pos: + the int64 cast
    "mxrec::disentangle_attention": Budget(
        launches=11, ai_cpu=0, paths={"one_term": 8, "int32": 12, "one_term_int32": 9}
    ),
    # only grad_attn_output given (the usual autograd call), "c2p|p2c"; one term 14; each of
    # grad_attn_probs, grad_attn_weights, the mask's gradient and an int32 relative_pos + 1
    # (all_grads: all four)
    "mxrec::disentangle_attention_backward": Budget(
        launches=20,
        ai_cpu=0,
        paths={
            "one_term": 14,
            "probs_grad": 21,
            "weights_grad": 21,
            "mask_grad": 21,
            "int32": 21,
            "all_grads": 24,
        },
        target=16,
        note=_BACKWARD,
    ),
}
