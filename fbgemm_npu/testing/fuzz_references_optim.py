"""Fuzz oracles of the optim family: the float64 references of
``conformance/specs/mxrec/optim/reference.py``, written back into the CPU buffers in place (the
fuzz harness compares every mutated argument, and the ops update var / m / v in place)."""

from __future__ import annotations

from conformance.specs.mxrec.optim.reference import fused_lazy_adam_reference, fused_sgd_reference

__all__ = ["fused_lazy_adam", "fused_sgd"]


def fused_sgd(var, gradient, indices, lr, weight_decay=0.0):  # type: ignore[no-untyped-def]
    return var.copy_(fused_sgd_reference(var, gradient, indices, lr, weight_decay))


def fused_lazy_adam(var, m, v, gradient, indices, lr, beta1=0.9, beta2=0.999, epsilon=1e-7):  # type: ignore[no-untyped-def]
    new = fused_lazy_adam_reference(var, m, v, gradient, indices, lr, beta1, beta2, epsilon)
    for buf, value in zip((var, m, v), new, strict=True):
        buf.copy_(value)
    return var, m, v
