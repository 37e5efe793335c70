"""Budgets of the linear_silu family (``mxrec::in_linear_silu``, ``distance_in_linear_silu``,
``in_linear_silu_backward``), one entry per op; held by
``tests/mxrec/linear_silu/test_linear_silu_budgets.py``.

No data checks (every condition is on shapes), no syncs, no AI-CPU launch on a 910B: ``addmm``
/ ``mm`` on the cube units, ``silu`` / ``silu_backward`` / ``cat`` / ``sum`` on the AI Core.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

_FORWARD = dict(launches=6, ai_cpu=0, paths={"float32": 5})

BUDGETS: dict[str, Budget] = {
    # half x with a float32 bias: the bias cast, addmm, one silu per split (4); a bias in x's
    # dtype (float32 x): no cast.  Target 6 (docs/ops.md): met
    "mxrec::in_linear_silu": Budget(**_FORWARD),
    "mxrec::distance_in_linear_silu": Budget(**_FORWARD),
    # cat of the 4 gradients, silu_backward, 2 mm, the float32 bias-grad sum; no bias: 4.
    # autograd with linear_output's own gradient: + its add_.  Target 10: met
    "mxrec::in_linear_silu_backward": Budget(
        launches=5, ai_cpu=0, paths={"no_bias": 4, "linear_output_grad": 6}
    ),
}
