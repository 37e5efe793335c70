"""Budgets of the norm family (``mxrec::ln_mul``, ``token_mixing``, ``norm_multiply_dropout``,
``norm_multiply_dropout_backward``), one entry per op; held by
``tests/mxrec/norm/test_norm_budgets.py``.

The layer norm is torch's ``native_layer_norm`` / ``native_layer_norm_backward``, one torch_npu
kernel each (AI Core); the dropout mask one ``uniform_`` (``torch.rand``) and a ``ge``.  No data
checks, no syncs, no AI-CPU launch.  Path ``backward``: the autograd backward of an op with no
backward op of its own (Rec SDK has none), counted over ``torch.autograd.grad``.  Target 8
(docs/ops.md) for each: met.
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

BUDGETS: dict[str, Budget] = {
    # native_layer_norm, mul; backward: mul (dy * u), native_layer_norm_backward, mul (du)
    "mxrec::ln_mul": Budget(launches=2, ai_cpu=0, paths={"backward": 3}),
    # add (x + x^T), native_layer_norm; backward: native_layer_norm_backward, add (ds + ds^T)
    "mxrec::token_mixing": Budget(launches=2, ai_cpu=0, paths={"backward": 2}),
    # native_layer_norm, mul (u), rand (uniform_), ge, mask mul_, scale mul_; no dropout: 2
    "mxrec::norm_multiply_dropout": Budget(launches=6, ai_cpu=0, paths={"no_dropout": 2}),
    # native_layer_norm (the statistics again), mask mul, scale mul_, mul (d_u), mul (g),
    # native_layer_norm_backward; no dropout: 4
    "mxrec::norm_multiply_dropout_backward": Budget(launches=6, ai_cpu=0, paths={"no_dropout": 4}),
}
