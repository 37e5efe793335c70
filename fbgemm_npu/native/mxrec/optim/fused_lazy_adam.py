"""``mxrec::fused_lazy_adam``: Rec SDK's fused LazyAdam update of the touched rows, in place
(Rec SDK ships it for TensorFlow only; the schema is the issue's)::

    fused_lazy_adam(Tensor(a!) var, Tensor(b!) m, Tensor(c!) v, Tensor gradient,
                    Tensor indices, Tensor lr, float beta1=0.9, float beta2=0.999,
                    float epsilon=1e-7) -> (Tensor(a!), Tensor(b!), Tensor(c!))

Math (Rec SDK's golden ``gen_data.py``), for each distinct row ``r`` named by ``indices`` with
``G_r`` the sum of its gradient rows::

    m[r]   = beta1 * m[r] + (1 - beta1) * G_r
    v[r]   = beta2 * v[r] + (1 - beta2) * G_r ** 2
    var[r] -= lr * m[r] / (sqrt(|v[r]|) + epsilon)

No bias correction (the caller folds it into ``lr``, as Rec SDK's does).  Duplicates: Rec SDK
leaves them undefined (its test uses distinct indices); here they are summed first and the row
updated once -- TensorFlow's rule for sparse gradients (``_deduplicate_indexed_slices``), which
is what a LazyAdam user gets from TF.  Indices ``< 0`` (Rec SDK) or ``>= rows`` are skipped.
``lr``: a 0-d or 1-element tensor on var's device.  dtypes float32 (Rec SDK), float16 /
bfloat16 too (state math in float32, each buffer rounded once); indices int32 / int64.

Launches: the distinct rows (``_rows.distinct_rows``: a sort by float keys, no integer sort),
the gathers of m and v, the update, the masked differences of m and v and the masked step of
var, each added by one ``index_add_``: 38 (44 in half precision), over the catalogue's 6 (a
fused kernel would keep a row's m / v / var update in one pass).  0 syncs, no data checks, no
AI-CPU route.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native.mxrec.optim._rows import check_update, distinct_rows

__all__ = ["FUSED_LAZY_ADAM", "KERNELS", "SCHEMAS", "fused_lazy_adam"]

FUSED_LAZY_ADAM = "mxrec::fused_lazy_adam"
SCHEMAS = {
    FUSED_LAZY_ADAM: "fused_lazy_adam(Tensor(a!) var, Tensor(b!) m, Tensor(c!) v, "
    "Tensor gradient, Tensor indices, Tensor lr, float beta1=0.9, float beta2=0.999, "
    "float epsilon=1e-7) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
}


def _write(target: torch.Tensor, row: torch.Tensor, old: torch.Tensor, new: torch.Tensor,
           skip: torch.Tensor) -> None:  # fmt: skip
    """``target[row[k]] = new[k]`` where not ``skip[k]`` (distinct rows): the difference to the
    gathered ``old`` in target's dtype, masked (not multiplied: a skipped slot's values may be
    inf), added with one ``index_add_``."""
    delta = new.to(target.dtype) - old
    delta.masked_fill_(skip.unsqueeze(1), 0)
    target.index_add_(0, row, delta)


def fused_lazy_adam(
    var: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    gradient: torch.Tensor,
    indices: torch.Tensor,
    lr: torch.Tensor,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-7,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PrivateUse1 / CPU: ``(var, m, v)`` updated in place and returned (module docstring)."""
    w, g, idx, rate, st = check_update(FUSED_LAZY_ADAM, var, gradient, indices, lr, m=m, v=v)
    if idx.numel() == 0 or w.numel() == 0:
        return var, m, v
    d = distinct_rows(idx, g, w.size(0))
    m_old, v_old = (t.index_select(0, d.row) for t in (st["m"], st["v"]))
    m_new = torch.lerp(d.grad, m_old.float(), beta1)  # b1 m + (1 - b1) G
    v_new = torch.lerp(d.grad * d.grad, v_old.float(), beta2)
    step = m_new / v_new.abs().sqrt_().add_(epsilon)
    for target, old, new in ((st["m"], m_old, m_new), (st["v"], v_old, v_new)):
        _write(target, d.row, old, new, d.skip)
    # var moves by -lr * step: added as it is (one rounding into var, as the golden's)
    delta = (step * rate.float()).to(w.dtype).masked_fill_(d.skip.unsqueeze(1), 0)
    w.index_add_(0, d.row, delta, alpha=-1)
    return var, m, v


def fused_lazy_adam_meta(
    var: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    gradient: torch.Tensor,
    indices: torch.Tensor,
    lr: torch.Tensor,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-7,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    check_update(FUSED_LAZY_ADAM, var, gradient, indices, lr, m=m, v=v)
    return var, m, v


KERNELS = {
    FUSED_LAZY_ADAM: {
        "PrivateUse1": fused_lazy_adam,
        "CPU": fused_lazy_adam,
        "Meta": fused_lazy_adam_meta,
    }
}
