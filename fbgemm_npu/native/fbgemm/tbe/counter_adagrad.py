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

from fbgemm_npu.native._index import arange_cached

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

    _, one = constants(m)
    gap = torch.where(prev == 0, one, it - prev)
    if halflife > 0:
        rc_new = torch.addcmul(one, torch.exp(gap * (-math.log(2.0) / halflife)), rc)
    elif halflife == 0:
        rc_new = one.expand(rc.shape)
    else:
        rc_new = rc + 1.0
    gg = torch.add(g, w, alpha=wd) if wd_mode == 1 else g
    if a.width is None:
        # ||gg|| per row: CowClip takes it as it is, momentum1 adds its square / D (one addcmul)
        g_norm = torch.linalg.vector_norm(gg, dim=1)
        m_new = torch.addcmul(m, g_norm, g_norm, value=1.0 / max(g.size(1), 1))
    else:  # padded rows (traced): each row's own D
        g_sum_sq = (gg * gg).sum(1)
        g_norm = g_sum_sq.sqrt() if reg == 4 else g_sum_sq
        m_new = m + a.row_mean(g_sum_sq, g)
    denom = m_new.sqrt().add_(eps)
    mult = lr / denom
    enabled = adj_iter <= 0 or it > adj_iter
    if reg == 3:
        adj = mult
        if lr_mode >= 0 and enabled:
            if lr_mode == 0:
                f = torch.pow(max_counter / (rc_new + 1.0), ub).clamp_(min=1.0, max=10.0)
                cand = mult * f
            elif lr_mode == 1:
                f = torch.pow((rc_new + 1.0) / max_counter, ub).clamp_(min=0.1, max=1.0)
                cand = mult * f
            else:
                cand = lr / (torch.sqrt(ub * rc_new) + eps)
            adj = torch.where(rc_new > thr, cand, mult)
    elif reg == 4:
        norm = torch.linalg.vector_norm(w, dim=1).mul_(a.get("weight_norm_coefficient"))
        clip = rc_new * torch.clamp(norm, min=a.get("lower_bound"))
        adj = torch.clamp(clip / g_norm, max=1.0) * mult
    else:
        adj = torch.zeros_like(mult)
    erc = _decay(a, gap, rc_new, mult, adj, denom, reg, enabled)
    if isinstance(erc, tuple):
        adj, erc = erc
    w_erc = w if isinstance(erc, float) and erc == 1.0 else w * _rows(erc)
    w_new = torch.addcmul(w_erc, adj[:, None], g, value=-1.0)
    # prev_iter := iter at every slot: a constant (write_rows takes its difference in one op)
    return w_new, [m_new, it, rc_new]


def _rows(x: Scalar) -> Scalar:
    """A per-row factor as a column (``[L, 1]``), a scalar as it is."""
    return x[:, None] if isinstance(x, Tensor) and x.dim() == 1 else x


def _decay(
    a: StepArgs,
    gap: Tensor,
    rc_new: Tensor,
    mult: Tensor,
    adj: Tensor,
    denom: Tensor,
    reg: int,
    enabled: bool,
) -> Scalar | tuple[Tensor, Scalar]:
    """The weight-decay correction ``erc`` of upstream's kernel (``w = erc * w - adj * g``), or
    ``(adj, erc)`` where AdagradW (weight_decay_mode 3) rescales ``adj`` too.  ``freq =
    halflife / counter`` is folded into one divide by the counter where it is used."""
    it = float(a.iter)
    halflife = a.get("counter_halflife", -1)
    wd_mode = int(a.get("weight_decay_mode", 1))
    wd, lr = a.get("weight_decay"), a.lr
    if reg == 3 and enabled:
        if wd_mode == 3:
            if halflife == -1:
                adj = mult * rc_new.sqrt()
            elif halflife == -2:
                adj = torch.clamp(lr * rc_new, max=a.get("adjustment_ub", 1.0)) / denom
            base = 1.0 - wd * lr
            lazy = torch.clamp(gap, max=it - a.get("adjustment_iter", -1)) - 1.0
            lazy_mult = torch.pow(base, lazy) if not isinstance(base, Tensor) else base**lazy
            return adj * lazy_mult, base * lazy_mult
        if wd_mode == 2:
            c = halflife * wd * lr  # erc = 1 - c / counter
            if isinstance(c, Tensor):
                return 1.0 - (halflife / rc_new) * (wd * lr)
            return torch.sub(rc_new, c).div_(rc_new)
        if wd_mode == 1:  # erc = 1 - halflife * wd * mult / counter
            return torch.rsub(mult / rc_new, 1.0, alpha=halflife * wd)
    elif reg == 4:
        if wd_mode == 2:
            return 1.0 - wd * lr
        if wd_mode == 1:
            return torch.rsub(adj, 1.0, alpha=wd)
    return 1.0


def constants(like: Tensor) -> tuple[Tensor, Tensor]:
    """0-D zero and one of ``like``'s dtype and device: views of a cached ``arange`` (no fill
    launch; fresh ones when traced)."""
    ar = arange_cached(2, like.device, like.dtype)
    return ar[0], ar[1]
