"""The fused optimizers of the TBE backward, as tensor programs over de-duplicated rows.

Each optimizer maps, for the ``L`` run slots of one table class, the aggregated gradient ``g``
(``[L, D]`` fp32), the current rows ``w`` (``[L, D]`` fp32) and its state rows (``[L]`` for a
rowwise state, ``[L, D]`` otherwise, fp32) to new rows and new states.  The math follows
upstream's optimizer descriptions (``fbgemm_gpu/codegen/genscript/optimizers.py``): the CPU
kernel where upstream has one, else the CUDA kernel (users arrive from CUDA; ``max_norm`` of
rowwise AdaGrad is CUDA-only upstream and is applied here).  Half-precision weights are updated
in fp32 and rounded to nearest when written back (upstream's CUDA kernels may round
stochastically; ``stochastic_rounding`` is accepted and ignored).

``lr`` is a Python float when upstream's ``learning_rate_tensor`` lives on the host (its
default) and a 0-D device tensor otherwise.  Each step function runs per table class, one ATen
op per term of its math (the gathers and write-backs are the caller's).  The whole backward with
its optimizer step (the lookups' ``backward`` paths): ``BUDGETS`` in ``budgets.py``
(docs/ops.md); rowwise_adagrad_with_counter's counter / CowClip math on row scalars puts its
training step over the catalogue's target (a fused kernel is the remedy; its step is in
:mod:`.counter_adagrad`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from fbgemm_npu.native._index import arange_cached, tracing
from fbgemm_npu.native.fbgemm.tbe.counter_adagrad import constants, rowwise_adagrad_with_counter

__all__ = ["OPTIMIZERS", "OptimizerSpec", "StepArgs", "gwd_factor"]

Tensor = torch.Tensor
Scalar = float | Tensor


@dataclass
class StepArgs:
    """Hyper-parameters of one step, named as upstream's invoker names them."""

    lr: Scalar = 0.0
    iter: int = 0
    hp: dict[str, float] = field(default_factory=dict)
    # [L] fp32 embedding dim of each row when the rows are padded with zeros to max_D (the
    # traced lookup, :mod:`.traced`); None: every row's D is the rows' width
    width: Tensor | None = None

    def get(self, name: str, default: float = 0.0) -> float:
        return self.hp.get(name, default)

    def row_mean(self, row_sum: Tensor, g: Tensor) -> Tensor:
        """A row sum over ``g``'s columns divided by the row's D (``g.size(1)`` unpadded)."""
        return row_sum / (g.size(1) if self.width is None else self.width)


@dataclass(frozen=True)
class OptimizerSpec:
    """States (name, rowwise) in the pt2 op's argument order, and the step function."""

    states: tuple[tuple[str, bool], ...]
    # new states: tensors, or a Python float where a state takes one value at every slot
    step: Callable[[Tensor, Tensor, list[Tensor], StepArgs], tuple[Tensor, list[Any]]]
    # Optional fast form: (g, states, keep, a) -> (weights delta, state deltas), exact zeros where
    # keep == 0, no need for the current weights; usable when delta_ok(a) holds.
    delta: Callable[..., tuple[Tensor, list[Tensor]]] | None = None
    delta_ok: Callable[[StepArgs], bool] = lambda a: False


def _axpy(w: Tensor, g: Tensor, scale: Tensor, lr: Scalar) -> Tensor:
    """``w - lr * g * scale``: one ``addcmul`` for a host ``lr``."""
    if isinstance(lr, Tensor):
        return w - lr * (g * scale)
    return torch.addcmul(w, g, scale, value=-lr)


def _sq_mean(g: Tensor, a: StepArgs) -> Tensor:
    """``mean(g^2)`` per row (over its own D when padded: zeros add nothing to the sum)."""
    if a.width is None:
        return (g * g).mean(1)
    return (g * g).sum(1) / a.width


def _norm(x: Tensor) -> Tensor:
    return torch.linalg.vector_norm(x, dim=1)


def sgd(g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs) -> tuple[Tensor, list[Tensor]]:
    """``w - lr * g`` (one ``add``; a multiply and a subtraction with a device lr)."""
    if isinstance(a.lr, Tensor):
        return w - a.lr * g, []
    return torch.add(w, g, alpha=-a.lr), []


def sgd_delta(
    g: Tensor, states: list[Tensor], keep: Tensor, a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """SGD as an update: ``dw = -lr * g`` on kept slots (one ``addcmul`` into a cached 0-D
    zero)."""
    return torch.addcmul(constants(g)[0], g, keep[:, None], value=-float(a.lr)), []


def adagrad(g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs) -> tuple[Tensor, list[Tensor]]:
    """``m += g^2; w -= lr * g / (sqrt(m) + eps)`` elementwise."""
    m = torch.addcmul(states[0], g, g)
    denom = m.sqrt().add_(a.get("eps"))
    if isinstance(a.lr, Tensor):
        return w - a.lr * g / denom, [m]
    return torch.addcdiv(w, g, denom, value=-a.lr), [m]


def rowwise_adagrad(
    g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """Rowwise AdaGrad with weight decay modes 0 (none), 1 (L2), 2 / 5 (decoupled) and CUDA's
    ``max_norm`` row clipping:

    ``gg = g + wd * w`` (L2 only), ``m += mean(gg^2)``, ``mult = lr / (sqrt(m) + eps)``,
    ``w = corr * w - mult * g`` with ``corr = 1 - mult * wd`` (L2), ``1 - lr * wd``
    (decoupled) or 1; then rows with ``||w|| > max_norm > 0`` are scaled to norm ``max_norm``.
    The decay modes and ``max_norm`` add their terms' ops.
    """
    wd = a.get("weight_decay")
    mode = int(a.get("weight_decay_mode"))
    gg = torch.add(g, w, alpha=wd) if mode == 1 and wd != 0.0 else g
    m = states[0] + _sq_mean(gg, a)
    inv = m.sqrt().add_(a.get("eps")).reciprocal_()  # mult = lr * inv
    if mode == 1 and wd != 0.0:
        mult = inv * a.lr
        w_new = torch.addcmul(-(mult[:, None] * g), w, (1.0 - mult * wd)[:, None])
    elif mode in (2, 5) and wd != 0.0:
        w_new = _axpy(w * (1.0 - a.lr * wd), g, inv[:, None], a.lr)
    else:
        w_new = _axpy(w, g, inv[:, None], a.lr)
    max_norm = a.get("max_norm")
    if max_norm > 0.0:
        factor = (max_norm / _norm(w_new)).clamp_(max=1.0)
        w_new = w_new * factor[:, None]
    return w_new, [m]


def gwd_factor(prev_iter: Tensor, a: StepArgs, lower_bound: float) -> Tensor:
    """Global weight decay (``WeightDecayMode.DECOUPLE_GLOBAL``), upstream's
    ``compute_global_weight_decay``: the factor of a row last touched at iteration ``prev_iter``
    (fp32, 0 = never), now at iteration ``a.iter``: 1 where ``prev_iter == 0``, else
    ``max(lower_bound, (1 - lr * wd)^max(iter - prev_iter - 1, 0))`` in fp32.

    The exponent is clamped into ``[0, prev_iter * 2**30]``: 0 -- a factor of 1 -- for a row
    never touched (iterations are integers, so a touched row's bound passes any exponent), when
    ``lower_bound <= 1`` keeps that 1 (always, for upstream's bounds; else a mask).  The
    lower-bound clamp is skipped where the host knows it cannot bind (a host ``lr``, ``1 - lr
    * wd >= 0`` and ``lower_bound <= 0``).  Launches: rsub, mul, clamp, pow (a device lr adds
    the ops of ``1 - lr * wd``, and the clamp)."""
    base: Scalar = 1.0 - a.lr * a.get("weight_decay")
    e = torch.rsub(prev_iter, float(a.iter - 1))
    masked = lower_bound > 1.0
    if masked:
        e = e.clamp_(min=0.0)
    else:
        zero = torch.zeros((), dtype=e.dtype, device=e.device) if tracing(e) else _zero(e)
        e = torch.clamp(e, zero, prev_iter * float(2**30))
    if isinstance(base, Tensor):
        f = torch.pow(base.to(torch.float32), e)
    else:
        f = torch.pow(float(base), e)
    if isinstance(base, Tensor) or base < 0.0 or lower_bound > 0.0:
        f = f.clamp_(min=lower_bound)
    return f.masked_fill_(prev_iter == 0, 1.0) if masked else f


def _zero(like: Tensor) -> Tensor:
    """A cached 0-D zero of ``like``'s dtype and device (a view: no fill launch)."""
    return arange_cached(1, like.device, like.dtype).view(())


def rowwise_adagrad_delta(
    g: Tensor, states: list[Tensor], keep: Tensor, a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """Rowwise AdaGrad without weight decay or max_norm as an update: ``dm = ||g||^2 / D``,
    ``dw = -lr * g / (sqrt(m + dm) + eps)``, both 0 where ``keep`` is 0.  Reads no weights and
    passes over ``[L, D]`` only for the norm and ``dw``.  Launches: the norm, ``dm`` (a
    multiply and an ``addcmul`` into a cached 0-D zero), the denominator (add, sqrt, add),
    ``keep / denominator``, ``dw`` (one ``addcmul``): 8."""
    zero = constants(g)[0]
    s = torch.linalg.vector_norm(g, dim=1)
    if a.width is None:
        dm = torch.addcmul(zero, s, s * keep, value=1.0 / max(g.size(1), 1))
    else:  # rows padded to max_D (traced): each row's own D
        dm = (s * s).mul_(a.row_mean(keep, g))
    f = torch.div(keep, (states[0] + dm).sqrt_().add_(a.get("eps")))
    return torch.addcmul(zero, g, f[:, None], value=-float(a.lr)), [dm]


def _rowwise_adagrad_delta_ok(a: StepArgs) -> bool:
    wd = a.get("weight_decay")
    return (
        not isinstance(a.lr, Tensor)
        and a.get("eps") > 0.0  # 1 / (sqrt(m) + eps) stays finite on skipped slots
        and a.get("max_norm") <= 0.0
        and (wd == 0.0 or int(a.get("weight_decay_mode")) not in (1, 2, 5))
    )


def rowwise_rmsprop_ar(
    g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """Rowwise RMSprop with adaptive regularization (states ``momentum1``, ``prev_iter``):
    ``v = b v + (1 - b) mean(g^2)``, ``mult = lr / (sqrt(v) + eps)``, ``gap = iter - prev``
    (1 on first touch), ``lam = clamp(lr * ar_alpha * gap, 0, 1)``,
    ``w = max(min_shrinkage, 1 - lam) * w - mult * g``, ``prev = iter``.
    """
    m, prev = states
    it = float(a.iter)
    beta = a.get("ema_beta", 0.99)
    v = torch.add(m * beta, _sq_mean(g, a), alpha=1.0 - beta)
    mult = a.lr / v.sqrt().add_(a.get("eps"))
    gap = torch.where(prev == 0, constants(prev)[1], it - prev)
    lam = (a.lr * a.get("ar_alpha") * gap).clamp_(min=0.0, max=1.0)
    erc = (1.0 - lam).clamp_(min=a.get("min_shrinkage", 0.1))
    w_new = torch.addcmul(w * erc[:, None], mult[:, None], g, value=-1.0)
    return w_new, [v, it]  # prev_iter := iter: a constant (see backward.write_rows)


def _lerp(state: Tensor, x: Tensor, weight: float) -> Tensor:
    """``(1 - weight) * state + weight * x``: an exponential moving average, one ``lerp``."""
    return torch.lerp(state, x, weight)


def _bias_denom(v: Tensor, c2: float, eps: float) -> Tensor:
    """``sqrt(v) + eps * sqrt(c2)``: with ``k = sqrt(c2) / c1``, ``m / c1 / (sqrt(v / c2) +
    eps) = k * m / (sqrt(v) + eps * sqrt(c2))`` -- upstream's bias-corrected ratio (a ``sqrt``
    and an ``add_``)."""
    return v.sqrt().add_(eps * math.sqrt(c2))


def adam(g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs) -> tuple[Tensor, list[Tensor]]:
    """Adam (CUDA kernel): ``m1 = b1 m1 + (1 - b1) g``, ``m2 = b2 m2 + (1 - b2) g^2``,
    ``w -= lr * (m1 / (1 - b1^k) / (sqrt(m2 / (1 - b2^k)) + eps) + wd * w)`` with ``k = iter``,
    or, with ``use_rowwise_bias_correction``, ``k = ++row_counter`` per row (third state).
    The rowwise bias correction costs the per-row powers and divisions."""
    b1, b2, eps, wd = a.get("beta1"), a.get("beta2"), a.get("eps"), a.get("weight_decay")
    m1 = _lerp(states[0], g, 1.0 - b1)
    m2 = _lerp(states[1], g * g, 1.0 - b2)
    new_states = [m1, m2]
    if len(states) > 2:
        k = states[2] + 1.0
        c1 = 1.0 - torch.pow(b1, k)[:, None]
        c2 = 1.0 - torch.pow(b2, k)[:, None]
        new_states.append(k)
        upd = m1 / c1 / ((m2 / c2).sqrt() + eps)
        upd = torch.add(upd, w, alpha=wd) if wd != 0.0 else upd
        return w - a.lr * upd, new_states
    c1, c2 = 1.0 - b1**a.iter, 1.0 - b2**a.iter
    denom = _bias_denom(m2, c2, eps)
    if isinstance(a.lr, Tensor):
        upd = torch.add(m1 / denom * (math.sqrt(c2) / c1), w, alpha=wd)
        return w - a.lr * upd, new_states
    base = w * (1.0 - a.lr * wd) if wd != 0.0 else w
    return torch.addcdiv(base, m1, denom, value=-a.lr * math.sqrt(c2) / c1), new_states


def partial_rowwise_adam(
    g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """Adam with a rowwise second moment: ``v = b2 v + (1 - b2) mean(g^2)`` (state 2 rowwise),
    ``w -= lr * (m1 / (1 - b1^k) / (sqrt(v / (1 - b2^k)) + eps) + wd * w)``."""
    b1, b2, eps, wd = a.get("beta1"), a.get("beta2"), a.get("eps"), a.get("weight_decay")
    m1 = _lerp(states[0], g, 1.0 - b1)
    v = _lerp(states[1], _sq_mean(g, a), 1.0 - b2)
    c1, c2 = 1.0 - b1**a.iter, 1.0 - b2**a.iter
    denom = _bias_denom(v, c2, eps)[:, None]
    if isinstance(a.lr, Tensor):
        upd = torch.add(m1 / denom * (math.sqrt(c2) / c1), w, alpha=wd)
        return w - a.lr * upd, [m1, v]
    base = w * (1.0 - a.lr * wd) if wd != 0.0 else w
    return torch.addcdiv(base, m1, denom, value=-a.lr * math.sqrt(c2) / c1), [m1, v]


def _lamb_apply(w: Tensor, r: Tensor, lr: Scalar) -> Tensor:
    """``w - lr * (||w|| / ||r||) * r`` per row: two norms, a divide and :func:`_axpy`."""
    ratio = _norm(w) / _norm(r)
    return _axpy(w, r, ratio[:, None], lr)


def _lamb_r(m1: Tensor, denom: Tensor, w: Tensor, c1: float, c2: float, wd: float) -> Tensor:
    """``r = m1 / c1 / (sqrt(m2 / c2) + eps) + wd * w`` from ``denom = _bias_denom(m2)``."""
    k = math.sqrt(c2) / c1
    if wd == 0.0:
        return torch.div(m1, denom).mul_(k)
    return torch.addcdiv(w * wd, m1, denom, value=k)


def lamb(g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs) -> tuple[Tensor, list[Tensor]]:
    """LAMB (CUDA kernel): Adam moments, ``r = m1_hat / (sqrt(m2_hat) + eps) + wd * w``,
    ``w -= lr * (||w|| / ||r||) * r`` per row."""
    b1, b2, eps, wd = a.get("beta1"), a.get("beta2"), a.get("eps"), a.get("weight_decay")
    m1 = _lerp(states[0], g, 1.0 - b1)
    m2 = _lerp(states[1], g * g, 1.0 - b2)
    c1, c2 = 1.0 - b1**a.iter, 1.0 - b2**a.iter
    r = _lamb_r(m1, _bias_denom(m2, c2, eps), w, c1, c2, wd)
    return _lamb_apply(w, r, a.lr), [m1, m2]


def partial_rowwise_lamb(
    g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """LAMB with a rowwise second moment (state 2 rowwise): ``m2 = b2 m2 + (1 - b2) mean(g^2)``,
    ``r = m1 / (1 - b1^k) / (sqrt(m2 / (1 - b2^k)) + eps) + wd * w``, then LAMB's trust ratio."""
    b1, b2, eps, wd = a.get("beta1"), a.get("beta2"), a.get("eps"), a.get("weight_decay")
    m2 = _lerp(states[1], _sq_mean(g, a), 1.0 - b2)
    c1, c2 = 1.0 - b1**a.iter, 1.0 - b2**a.iter
    m1 = _lerp(states[0], g, 1.0 - b1)
    r = _lamb_r(m1, _bias_denom(m2, c2, eps)[:, None], w, c1, c2, wd)
    return _lamb_apply(w, r, a.lr), [m1, m2]


def lars_sgd(
    g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """LARS-SGD (CUDA kernel): ``lr' = lr * eta * ||w|| / (||g|| + wd * ||w||)`` per row,
    ``m = momentum * m + lr' * (g + wd * w)``, ``w -= m``."""
    eta, mom, wd = a.get("eta"), a.get("momentum"), a.get("weight_decay")
    wn = _norm(w)
    gn = _norm(g)
    adj_lr = a.lr * eta * wn / torch.add(gn, wn, alpha=wd)
    m = torch.addcmul(states[0] * mom, adj_lr[:, None], torch.add(g, w, alpha=wd))
    return w - m, [m]


OPTIMIZERS: dict[str, OptimizerSpec] = {
    "sgd": OptimizerSpec((), sgd, sgd_delta, lambda a: not isinstance(a.lr, Tensor)),
    "adagrad": OptimizerSpec((("momentum1", False),), adagrad),
    "rowwise_adagrad": OptimizerSpec(
        (("momentum1", True),), rowwise_adagrad, rowwise_adagrad_delta, _rowwise_adagrad_delta_ok
    ),
    "rowwise_adagrad_with_counter": OptimizerSpec(
        (("momentum1", True), ("prev_iter", True), ("row_counter", True)),
        rowwise_adagrad_with_counter,
    ),
    "rowwise_rmsprop_ar": OptimizerSpec(
        (("momentum1", True), ("prev_iter", True)), rowwise_rmsprop_ar
    ),
    "adam": OptimizerSpec((("momentum1", False), ("momentum2", False)), adam),
    "partial_rowwise_adam": OptimizerSpec(
        (("momentum1", False), ("momentum2", True)), partial_rowwise_adam
    ),
    "lamb": OptimizerSpec((("momentum1", False), ("momentum2", False)), lamb),
    "partial_rowwise_lamb": OptimizerSpec(
        (("momentum1", False), ("momentum2", True)), partial_rowwise_lamb
    ),
    "lars_sgd": OptimizerSpec((("momentum1", False),), lars_sgd),
}
