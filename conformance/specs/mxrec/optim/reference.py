"""float64 references of ``mxrec::fused_sgd`` / ``mxrec::fused_lazy_adam``, written from the
math (Rec SDK's ``sgd_kernel.h`` and its LazyAdam golden ``gen_data.py``), row by row in Python
loops: an oracle, not a kernel.  Both return the updated buffers and leave the inputs alone."""

from __future__ import annotations

import torch

__all__ = ["fused_lazy_adam_reference", "fused_sgd_reference"]

F64 = torch.float64


def _rows(indices: torch.Tensor, rows: int) -> list[tuple[int, int]]:
    """``(position, row)`` of every index that names a row of the table."""
    flat = indices.reshape(-1).tolist()
    return [(i, r) for i, r in enumerate(flat) if 0 <= r < rows]


def fused_sgd_reference(var, gradient, indices, lr, weight_decay=0.0):  # type: ignore[no-untyped-def]
    """``var[r] -= lr * (g_i + wd * var_old[r])`` for each valid index, duplicates adding up."""
    old, out = var.to(F64), var.to(F64).clone()
    g, rate = gradient.to(F64), float(lr.reshape(()))
    for i, r in _rows(indices, var.size(0)):
        out[r] -= rate * (g[i] + weight_decay * old[r])
    return out


def fused_lazy_adam_reference(var, m, v, gradient, indices, lr, beta1=0.9, beta2=0.999,  # type: ignore[no-untyped-def]
                              epsilon=1e-7):  # fmt: skip
    """For each distinct valid row with ``G`` the sum of its gradients: ``m = b1 m + (1 - b1) G``,
    ``v = b2 v + (1 - b2) G^2``, ``var -= lr m / (sqrt|v| + eps)``; returns ``(var, m, v)``."""
    w, mm, vv = (t.to(F64).clone() for t in (var, m, v))
    g, rate = gradient.to(F64), float(lr.reshape(()))
    total: dict[int, torch.Tensor] = {}
    for i, r in _rows(indices, var.size(0)):
        total[r] = total[r] + g[i] if r in total else g[i].clone()
    for r, grad in total.items():
        mm[r] = beta1 * mm[r] + (1 - beta1) * grad
        vv[r] = beta2 * vv[r] + (1 - beta2) * grad * grad
        w[r] -= rate * mm[r] / (vv[r].abs().sqrt() + epsilon)
    return w, mm, vv
