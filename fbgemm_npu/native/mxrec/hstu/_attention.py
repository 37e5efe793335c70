"""The HSTU attention tile program on a padded layout, shared by every HSTU op.

Inputs are padded ``q [B, S, N_q, D_qk]``, ``k [B, S, N_k, D_qk]``, ``v [B, S, N_k, D_v]`` (rows at
or past a sequence's length are zero), the lengths ``[B]`` and the per-batch context / target
counts.  For query rows ``r0:r1`` of every batch and head at once (a *tile*), with ``g = h // R``
(``R = N_q / N_k``, GQA) and ``s`` the silu scale::

    qkb[b, h, i, j] = alpha * (q[b, i, h] . k[b, j, g] + rab[b, h, i, j])      (float32)
    P[b, h, i, j]   = silu(qkb) * s * M[b, h, i, j]                            (cast to q's dtype)
    out[b, i, h]    = sum_j P[b, h, i, j] v[b, j, g]

``M`` = valid (``i, j < L_b``) times the mask of ``mask_type`` (0: causal with context and
targets, 2: none, 3: the custom tensor).  Backward (recsdk-ops.md 2.5), per tile::

    dP = grad[b, i, h] . v[b, j, g],   dS = dP * s * M * sig * (1 + qkb (1 - sig)) * alpha
    dv[b, j, g] += sum_{h in g, i} P dO               dk[b, j, g] += sum_{h in g, i} dS q
    dq[b, i, h]  = sum_j dS k[b, j, g]                drab[b, h, i, j] = dS

``sig = sigmoid(qkb)``.  Nothing of size ``[B, N, S, S]`` is ever materialised (besides the bias
gradient the contract returns): a tile's scores are ``[B, N_q, t, S]`` with ``t`` chosen on the
host (:func:`tile_rows`) so that ``B * N_q * t * S <= TILE_ELEMENTS``; the launches of a call are a
fixed setup plus a fixed count per tile, for any ``B`` and ``N``.  dtypes float32, float16,
bfloat16: matmuls in the input dtype, scores in float32, dk / dv accumulated in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native._index import arange_cached

__all__ = ["TILE_ELEMENTS", "Problem", "attention_backward", "attention_forward", "tile_rows"]

# float32 elements of one tile's scores: 4 Mi (16 MiB); a module attribute, so tests force tiles
TILE_ELEMENTS = 1 << 22


def tile_rows(batch: int, heads: int, s_max: int, s_keys: int | None = None) -> int:
    """Query rows per tile: the most with ``batch * heads * rows * s_keys <= TILE_ELEMENTS``
    (``s_keys``: the key rows, ``s_max`` unless given), at least 1 and at most ``s_max``.  Host
    arithmetic on sizes only."""
    per_row = max(1, batch * heads * (s_max if s_keys is None else s_keys))
    return max(1, min(s_max, TILE_ELEMENTS // per_row))


@dataclass
class Problem:
    """One call's padded operands and mask parameters (see the module docstring)."""

    q: torch.Tensor  # [B, S, N_q, D_qk]
    k: torch.Tensor  # [B, S, N_k, D_qk]
    v: torch.Tensor  # [B, S, N_k, D_v]
    lengths: torch.Tensor | None  # [B] int32; None: every sequence S long
    num_context: torch.Tensor | None  # [B] int32
    num_target: torch.Tensor | None  # [B] int32
    group: int
    mask: torch.Tensor | None  # [B, N_q, >= S, >= S], mask_type 3
    bias: torch.Tensor | None  # [B, N_q, >= S, >= S]
    mask_type: int
    scale: float
    alpha: float
    k_lengths: torch.Tensor | None = None  # [B] int32 key lengths where they differ (delta)
    shift: torch.Tensor | None = None  # [B] int32 L_k - L_q: query i sits at key position i + shift

    @property
    def ratio(self) -> int:
        return self.q.size(2) // self.k.size(2)

    def tiles(self) -> list[tuple[int, int]]:
        b, s, n = self.q.size(0), self.q.size(1), self.q.size(2)
        t = tile_rows(b, n, s, self.k.size(1))
        return [(r0, min(s, r0 + t)) for r0 in range(0, s, t)]


def _visible(p: Problem, r0: int, r1: int) -> torch.Tensor:
    """``[B, 1, t, S]`` bool (``[1, 1, t, S]`` without lengths): key ``j`` visible to query ``i``
    (rows ``r0:r1``) in its sequence.  Launches: about 8 (causal with context and targets), 3
    (none / custom), 1 without lengths."""
    s = p.k.size(1)
    dev = p.q.device
    j = arange_cached(s, dev, torch.int32).view(1, 1, s)
    i = arange_cached(r1, dev, torch.int32)[r0:].view(1, -1, 1)
    if p.lengths is None:  # every sequence S long (the normal layout): all positions valid
        causal = j <= i
        return (causal if p.mask_type == 0 else torch.ones_like(causal)).unsqueeze(1)
    length = p.lengths.view(-1, 1, 1)
    klen = p.k_lengths.view(-1, 1, 1) if p.k_lengths is not None else length
    ok = (i < length) & (j < klen)
    if p.mask_type == 0:
        a = i + p.shift.view(-1, 1, 1) if p.shift is not None else i  # the query's key position
        ok = ok & (j <= a)
        target = p.num_target.view(-1, 1, 1) if p.num_target is not None else None
        history = klen - target if target is not None else klen
        if p.num_context is not None:
            ok = ok | ((a < p.num_context.view(-1, 1, 1)) & (j < history) & (i < length))
        if target is not None and p.group > 0:
            ga = torch.div(a - history, p.group, rounding_mode="floor")
            gj = torch.div(j - history, p.group, rounding_mode="floor")
            ok = ok & ((a < history) | (j < history) | (ga == gj))
    return ok.unsqueeze(1)


def _heads(x: torch.Tensor, p: Problem) -> torch.Tensor:
    """Rows ``[B, t, N_q, D]`` -> ``[B, N_k, R * t, D]`` (head ``h = g * R + r``): 1 copy."""
    b, t, n, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, p.k.size(2), p.ratio * t, d)


def _unheads(x: torch.Tensor, p: Problem, t: int) -> torch.Tensor:
    """``[B, N_k, R * t, D]`` -> rows ``[B, t, N_q, D]`` (a view)."""
    b, d = x.size(0), x.size(-1)
    return x.view(b, p.q.size(2), t, d).permute(0, 2, 1, 3)


def _scores(
    p: Problem, qh: torch.Tensor, kt: torch.Tensor, r0: int, r1: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(qkb, M)`` of a tile: ``[B, N_q, t, S]`` float32 and the float32 mask.
    Launches: matmul, the float32 cast (not for float32), bias add and alpha scale when they
    apply, the visibility program and its cast, the custom mask's product."""
    b, t, s = p.q.size(0), r1 - r0, p.k.size(1)
    qk = torch.matmul(qh, kt).view(b, p.q.size(2), t, s).float()
    if p.bias is not None:
        qk = qk + p.bias[:, :, r0:r1, :s]
    if p.alpha != 1.0:
        qk = qk * p.alpha
    m = _visible(p, r0, r1).float()
    if p.mask_type == 3 and p.mask is not None:
        m = m * p.mask[:, :, r0:r1, :s]
    return qk, m


def _kv(p: Problem) -> tuple[torch.Tensor, torch.Tensor]:
    """``k^T [B, N_k, D_qk, S]`` and ``v [B, N_k, S, D_v]``, contiguous: 2 copies per call."""
    return p.k.permute(0, 2, 3, 1).contiguous(), p.v.permute(0, 2, 1, 3).contiguous()


def attention_forward(p: Problem) -> torch.Tensor:
    """Padded output ``[B, S, N_q, D_v]`` in q's dtype (rows past a length are 0).
    Launches: 3 + about 16 per tile (:meth:`Problem.tiles`), whatever ``B`` and ``N``."""
    b, s, n = p.q.shape[:3]
    kt, vh = _kv(p)
    out = p.q.new_empty(b, s, n, p.v.size(3))
    for r0, r1 in p.tiles():
        qh = _heads(p.q[:, r0:r1], p)
        qkb, m = _scores(p, qh, kt, r0, r1)
        score = (torch.nn.functional.silu(qkb) * (m * p.scale)).to(p.q.dtype)
        o = torch.matmul(score.view(b, p.k.size(2), -1, p.k.size(1)), vh)
        out[:, r0:r1].copy_(_unheads(o, p, r1 - r0))
    return out


def attention_backward(
    p: Problem, grad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Padded ``(dq, dk, dv, dbias)`` for the padded output gradient ``grad [B, S, N_q, D_v]``:
    dq / dk / dv in q's dtype and padded shapes, dbias ``[B, N_q, S, S]`` in the bias's dtype
    (None without a bias; 0 outside the visible entries).  Launches: 6 + about 26 per tile."""
    b, n, s = p.q.size(0), p.q.size(2), p.k.size(1)  # s: key rows
    nk, dt = p.k.size(2), p.q.dtype
    kt, vh = _kv(p)
    kh = p.k.permute(0, 2, 1, 3)  # [B, N_k, S, D_qk] (matmul's operand, a view)
    vt = vh.transpose(-1, -2)
    dq = torch.empty_like(p.q)
    dk = torch.zeros(b, nk, s, p.k.size(3), dtype=torch.float32, device=p.q.device)
    dv = torch.zeros(b, nk, s, p.v.size(3), dtype=torch.float32, device=p.q.device)
    db = None
    if p.bias is not None:
        db = torch.zeros(b, n, p.bias.size(2), p.bias.size(3), dtype=p.bias.dtype, device=dk.device)
    for r0, r1 in p.tiles():
        t = r1 - r0
        qh = _heads(p.q[:, r0:r1], p)
        gh = _heads(grad[:, r0:r1], p)
        qkb, m = _scores(p, qh, kt, r0, r1)
        sig = torch.sigmoid(qkb)
        m = m * p.scale
        score = (qkb * sig * m).to(dt).view(b, nk, -1, s)
        dp = torch.matmul(gh, vt).view(b, n, t, s).float()
        ds = dp * m * sig * (1 + qkb * (1 - sig))
        if p.alpha != 1.0:
            ds = ds * p.alpha
        if db is not None:
            db[:, :, r0:r1, :s].copy_(ds)
        dsh = ds.to(dt).view(b, nk, -1, s)
        dv.add_(torch.matmul(score.transpose(-1, -2), gh))
        dk.add_(torch.matmul(dsh.transpose(-1, -2), qh))
        dq[:, r0:r1].copy_(_unheads(torch.matmul(dsh, kh), p, t))
    return dq, dk.to(dt).permute(0, 2, 1, 3), dv.to(dt).permute(0, 2, 1, 3), db
