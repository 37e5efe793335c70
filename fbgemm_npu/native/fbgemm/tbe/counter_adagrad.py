"""Rowwise AdaGrad with counter-based regularization: the step of upstream's
``rowwise_adagrad_with_counter`` optimizer, one of :data:`.optimizers.OPTIMIZERS`.

The math follows upstream's CPU kernel line by line; its launches depend on the modes (counter /
CowClip math on row scalars, one ATen op per term: with the rest of the backward, over the
catalogue's target for a training step; a fused kernel is the remedy).  Launches and syncs:
``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from fbgemm_npu.native.fbgemm.tbe.optimizers import StepArgs

__all__ = ["rowwise_adagrad_with_counter"]

Tensor = torch.Tensor
Scalar = float | Tensor


def rowwise_adagrad_with_counter(
    g: Tensor, w: Tensor, states: list[Tensor], a: StepArgs
) -> tuple[Tensor, list[Tensor]]:
    """Rowwise AdaGrad with counter-based regularization (mode 3) or CowClip (mode 4).

    States: ``momentum1``, ``prev_iter``, ``row_counter`` (all rowwise).  Follows upstream's CPU
    kernel line by line: counter decay by ``counter_halflife``, learning-rate adjustment by
    ``learning_rate_mode`` for rows above the tail-id threshold, the weight-decay correction of
    ``weight_decay_mode`` (1 L2, 2 decoupled, 3 AdagradW with lazy decay), CowClip's
    per-row gradient clipping.  Its launches depend on the modes (see the module docstring).
    """
    m, prev, rc = states
    it = float(a.iter)
    halflife = a.get("counter_halflife", -1)
    adj_iter = a.get("adjustment_iter", -1)
    ub = a.get("adjustment_ub", 1.0)
    lr_mode = int(a.get("learning_rate_mode", -1))
    wd_mode = int(a.get("weight_decay_mode", 1))
    max_counter = a.get("max_counter")
    thr = a.get("tail_id_threshold")
    if int(a.get("is_tail_id_thresh_ratio")) == 1:
        thr = math.floor(thr * max_counter)
    reg = int(a.get("regularization_mode"))
    wd = a.get("weight_decay")
    eps = a.get("eps")
    lr = a.lr

    gap = torch.where(prev == 0, 1.0, it - prev)
    if halflife > 0:
        rc_new = 1.0 + torch.exp(gap * (-math.log(2.0) / halflife)) * rc
    elif halflife == 0:
        rc_new = torch.ones_like(rc)
    else:
        rc_new = rc + 1.0
    freq = halflife / rc_new
    gg = torch.add(g, w, alpha=wd) if wd_mode == 1 else g
    g_sum_sq = (gg * gg).sum(1)
    m_new = m + a.row_mean(g_sum_sq, g)
    denom = m_new.sqrt().add_(eps)
    mult = lr / denom
    enabled = adj_iter <= 0 or it > adj_iter
    adj = torch.zeros_like(mult)
    if reg == 3:
        adj = mult
        if lr_mode >= 0 and enabled:
            if lr_mode == 0:
                f = torch.pow(max_counter / (rc_new + 1.0), ub).clamp_(max=10.0).clamp_(min=1.0)
                cand = mult * f
            elif lr_mode == 1:
                f = torch.pow((rc_new + 1.0) / max_counter, ub).clamp_(min=0.1).clamp_(max=1.0)
                cand = mult * f
            else:
                cand = lr / (torch.sqrt(ub * rc_new) + eps)
            adj = torch.where(rc_new > thr, cand, mult)
    elif reg == 4:
        w_sum_sq = (w * w).sum(1)
        norm = a.get("weight_norm_coefficient") * w_sum_sq.sqrt()
        clip = rc_new * torch.clamp(norm, min=a.get("lower_bound"))
        adj = torch.clamp(clip / g_sum_sq.sqrt(), max=1.0) * mult
    erc: Scalar = 1.0
    if reg == 3 and enabled:
        if wd_mode == 3:
            if halflife == -1:
                adj = mult * rc_new.sqrt()
            elif halflife == -2:
                adj = torch.clamp(lr * rc_new, max=ub) / denom
            base = 1.0 - wd * lr
            lazy = torch.clamp(gap, max=it - adj_iter) - 1.0
            lazy_mult = torch.pow(base, lazy) if not isinstance(base, Tensor) else base**lazy
            adj = adj * lazy_mult
            erc = base * lazy_mult
        elif wd_mode == 2:
            erc = 1.0 - freq * (wd * lr)
        elif wd_mode == 1:
            erc = 1.0 - freq * wd * mult
    elif reg == 4:
        if wd_mode == 2:
            erc = 1.0 - wd * lr
        elif wd_mode == 1:
            erc = 1.0 - wd * adj
    w_erc = w * (erc[:, None] if isinstance(erc, Tensor) and erc.dim() == 1 else erc)
    w_new = w_erc - adj[:, None] * g
    prev_new = torch.full_like(prev, it)
    return w_new, [m_new, prev_new, rc_new]
