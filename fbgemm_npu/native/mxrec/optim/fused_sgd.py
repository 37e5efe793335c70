"""``mxrec::fused_sgd``: Rec SDK's fused sparse SGD update, in place (Rec SDK ships it for
TensorFlow only; the schema is the issue's)::

    fused_sgd(Tensor(a!) var, Tensor gradient, Tensor indices, Tensor lr,
              float weight_decay=0.0) -> Tensor(a!)

Math (Rec SDK's ``sgd_kernel.h``): for every ``i`` with ``0 <= indices[i] < rows``::

    var[indices[i]] -= lr * (gradient[i] + weight_decay * var_old[indices[i]])

``var_old`` is read before any update; duplicate indices accumulate (Rec SDK adds atomically),
each with its own gradient and the same ``var_old``; other indices are skipped.  ``lr``: a 0-d
or 1-element tensor on var's device (read on the device, never on the host).  dtypes: float32
(Rec SDK), float16 / bfloat16 too (the update rounded once, into var); indices int32 / int64,
``[n]`` or ``[n, 1]``.  Launches: the clamp, the validity test, ``lr`` times validity, the
scaled gradient, one ``index_add_`` (5; 6 for a half-precision var: lr's cast); with weight
decay the gather and an ``add`` (+2).
0 syncs, no data checks (bad indices are skipped by definition), no AI-CPU route.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native.mxrec.optim._rows import check_update, valid_rows

__all__ = ["FUSED_SGD", "KERNELS", "SCHEMAS", "fused_sgd"]

FUSED_SGD = "mxrec::fused_sgd"
SCHEMAS = {
    FUSED_SGD: "fused_sgd(Tensor(a!) var, Tensor gradient, Tensor indices, Tensor lr, "
    "float weight_decay=0.0) -> Tensor(a!)",
}


def fused_sgd(
    var: torch.Tensor,
    gradient: torch.Tensor,
    indices: torch.Tensor,
    lr: torch.Tensor,
    weight_decay: float = 0.0,
) -> torch.Tensor:
    """PrivateUse1 / CPU: ``var`` updated in place and returned (module docstring)."""
    v, g, idx, rate, _ = check_update(FUSED_SGD, var, gradient, indices, lr)
    if idx.numel() == 0 or v.numel() == 0:
        return var
    row, ok = valid_rows(idx, v.size(0))
    if weight_decay != 0.0:
        g = torch.add(g, v.index_select(0, row), alpha=weight_decay)
    step = torch.mul(ok, rate.to(v.dtype))  # lr where the index names a row, else 0
    v.index_add_(0, row, g * step.unsqueeze(1), alpha=-1)
    return var


def fused_sgd_meta(
    var: torch.Tensor,
    gradient: torch.Tensor,
    indices: torch.Tensor,
    lr: torch.Tensor,
    weight_decay: float = 0.0,
) -> torch.Tensor:
    check_update(FUSED_SGD, var, gradient, indices, lr)
    return var


KERNELS = {FUSED_SGD: {"PrivateUse1": fused_sgd, "CPU": fused_sgd, "Meta": fused_sgd_meta}}
