"""Budgets of the optim family (``mxrec::fused_sgd``, ``mxrec::fused_lazy_adam``), held by
``tests/mxrec/optim/test_optim_budgets.py``.  0 syncs, no data checks (an index outside the
table is skipped by definition), no AI-CPU route: float32 ``index_add_`` at dim 0, an int32
cumsum, a float-key sort instead of ``unique`` / an integer sort (docs/hardware.md)."""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# fmt: off
BUDGETS: dict[str, Budget] = {
    # clamp, validity, lr x validity, the scaled gradient, index_add_ (+1: lr cast to a half
    # precision var); weight decay: the gather and an add
    "mxrec::fused_sgd": Budget(launches=6, ai_cpu=0, paths={"weight_decay": 8}),
    "mxrec::fused_lazy_adam": Budget(
        launches=44, ai_cpu=0, target=6,
        note="the distinct rows first (duplicates summed, TensorFlow's rule: a float-key sort, "
        "int32 run ids, one index_add_ of the gradients, one index_copy_ of the rows), then "
        "the gathers, the Adam math and a masked index_add_ per buffer; a fused kernel would "
        "update a row's m, v and var in one pass",
    ),
}
