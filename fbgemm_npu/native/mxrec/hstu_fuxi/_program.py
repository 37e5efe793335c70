"""The FuXi tile program: three attention channels against one V, in query tiles of every batch and
head at once, on the padded layout ``[B, S, N, D]`` (rows past a length are zero).

For query rows ``r0:r1`` (a tile), ``V`` the visibility of the call's spans (causal, lengths),
``M = V * mask`` (``mask`` only for maskType 3) and ``s`` the silu scale::

    P_score = silu(q k^T) * mask * s                  (float32, then q's dtype: one rounding)
    P_ts    = timestampBias[b] * mask,   P_pos = positionBias[0] * mask     (q's dtype)
    P_c     = 0 where V is 0
    out[b, i, c, h] = sum_j P_c[b, h, i, j] v[b, j, h]             c = score | ts | pos

The channels of a tile are stacked row-interleaved, ``[B, N, t, C, S]``: one ``masked_fill_``
hides the invisible keys of all channels, one ``bmm`` against ``v`` gives all of them, and the
backward's output gradient ``[B, S, N, C * D]`` is, per head, a ``[t * C, D]`` operand of the
same ``bmm`` layout without a copy.  Backward per tile, with the score block of the gradient
pre-multiplied by ``s`` (one copy per call)::

    dP_c = (g_c v^T) * mask, 0 where V is 0,   dS = dP_score * silu'(q k^T)
    dv  += sum_c P_c^T g_c,   dk += dS^T q,   dq = dS k
    dts[b, i, j] = sum_h dP_ts,   dpos[0, i, j] = sum_{b, h} dP_pos

Invisible keys are zeroed *after* every product (``masked_fill_`` in place), so whatever lies
past a length in a bias or the mask (NaN from an ``empty`` buffer, say) or an infinite score there
never reaches a sum; in the backward the scores are set to ``-1e4`` before the silu as in
``hstu/_attention.py`` (``silu`` and ``silu'`` of it are 0 in float32).  A bias times a 0 / 1 mask
is exact in any dtype; a general mask's product is rounded once, as Rec SDK's golden rounds
``float(bias) * float(mask)``.  Nothing of size ``[B, N, S, S]`` exists: a tile holds ``C``
score blocks ``[B, N, t, S]``, ``t`` from ``tile_rows(B, C * N, S)``; the bias gradients
``[B, S, S]`` / ``[1, S, S]`` are the contract's (with a float32 ``[B, S, 2, S]`` accumulator).
dtypes float32 / float16 / bfloat16: matmuls in the input dtype, scores in float32, dk / dv /
the bias gradients accumulated in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native.mxrec.hstu import _attention
from fbgemm_npu.native.mxrec.hstu._attention import Problem, invisible

__all__ = ["Fuxi", "fuxi_backward", "fuxi_forward", "tiles"]

_HIDDEN = -1.0e4  # silu(-1e4) and silu'(-1e4) are exactly 0 in float32


@dataclass
class Fuxi:
    """A padded problem (q, k, v, spans, the custom mask, the scale) and the two biases."""

    p: Problem
    ts: torch.Tensor | None  # [B, S, S]
    pos: torch.Tensor | None  # [1, S, S]

    @property
    def channels(self) -> int:
        return 1 if self.ts is None else 3


def tiles(f: Fuxi) -> list[tuple[int, int]]:
    """Query tiles ``(r0, r1)``: ``t`` rows with ``B * C * N * t * S <= TILE_ELEMENTS`` (the
    ``C`` channels of a tile held at once).  Host arithmetic."""
    b, s, n = f.p.q.shape[:3]
    t = _attention.tile_rows(b, f.channels * n, s)
    return [(r0, min(s, r0 + t)) for r0 in range(0, s, t)]


def _heads_major(x: torch.Tensor, order: tuple[int, ...] = (0, 2, 1, 3)) -> torch.Tensor:
    """``[B, S, N, D]`` -> ``[B, N, S, D]`` (or ``order``) contiguous: 1 launch (an explicit
    copy: ``contiguous()`` would hide it from the counters as a view)."""
    return x.permute(order).clone(memory_format=torch.contiguous_format)


def _qk(qt: torch.Tensor, kt: torch.Tensor) -> torch.Tensor:
    """``q k^T`` of a tile ``[B, N, t, S]`` in float32: the matmul and, in half precision, the
    cast."""
    qk = torch.matmul(qt, kt)
    return qk if qk.dtype == torch.float32 else qk.float()


def _channels(
    f: Fuxi,
    score: torch.Tensor,
    m: torch.Tensor | None,
    hide: torch.Tensor | None,
    r0: int,
    r1: int,
    scale: float = 1.0,
) -> torch.Tensor:
    """``P [B, N, t, C, S]`` in q's dtype: the score (already times the custom mask) times
    ``scale``, the bias rows times the mask, every channel 0 where invisible.  Launches: the
    scale and cast (1), the stack with the biases (1), the mask on them (1), the fill (1)."""
    dtype = f.p.q.dtype
    if scale != 1.0:
        score = torch.mul(score, scale, out=torch.empty_like(score, dtype=dtype))
    else:
        score = score.to(dtype)
    if f.ts is None or f.pos is None:
        rows = score.unsqueeze(3)
    else:
        biases = (f.ts[:, r0:r1].unsqueeze(1), f.pos[:, r0:r1].unsqueeze(1))
        rows = torch.stack([score, *(x.expand(score.shape) for x in biases)], 3)
        if m is not None:
            rows[:, :, :, 1:].mul_(m.unsqueeze(3))
    if hide is not None:
        rows.masked_fill_(hide.unsqueeze(3), 0)
    return rows


def fuxi_forward(f: Fuxi) -> torch.Tensor:
    """Padded output ``[B, S, C, N, D]`` in q's dtype (rows past a length are 0).  Launches: 3
    (q, k^T, v heads-major) + 7 to 11 per tile (``tiles``), whatever ``B`` and ``N``."""
    p, c = f.p, f.channels
    b, s, n, d = p.q.shape
    qh, vh, kt = _heads_major(p.q), _heads_major(p.v), _heads_major(p.k, (0, 2, 3, 1))
    out = p.q.new_empty(b, s, c, n, d)
    for r0, r1 in tiles(f):
        t = r1 - r0
        hide = invisible(p, r0, r1)
        score = torch.nn.functional.silu(_qk(qh[:, :, r0:r1], kt), inplace=True)
        m = None if p.mask is None else p.mask[:, :, r0:r1]
        if m is not None:
            score.mul_(m)
        rows = _channels(f, score, m, hide, r0, r1, p.scale).view(b, n, t * c, s)
        o = torch.matmul(rows, vh).view(b, n, t, c, d)
        out[:, r0:r1].copy_(o.permute(0, 2, 3, 1, 4))
    return out


def _grad_heads(grad: torch.Tensor, c: int, scale: float) -> torch.Tensor:
    """The padded output gradient ``[B, S, N, C * D]`` as ``[B, N, S, C, D]``, the score block
    times ``s`` (it meets ``s`` in both of its products): 1 launch, 2 with the biases."""
    b, s, n, cd = grad.shape
    src = grad.view(b, s, n, c, cd // c).permute(0, 2, 1, 3, 4)
    out = grad.new_empty(src.shape)
    if c == 1:
        return torch.mul(src, scale, out=out)
    out.copy_(src)
    out[:, :, :, 0].mul_(scale)
    return out


def _rows_major(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[B, N, S, D]`` (any dtype) -> ``[B, S, N, D]`` contiguous in ``dtype``: 1 launch."""
    b, n, s, d = x.shape
    return torch.empty(b, s, n, d, dtype=dtype, device=x.device).copy_(x.permute(0, 2, 1, 3))


def fuxi_backward(
    f: Fuxi, grad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Padded ``(dq, dk, dv, dpos, dts)`` for the padded gradient ``grad [B, S, N, C * D]``
    (per head score | ts | pos): dq / dk / dv ``[B, S, N, D]`` contiguous in q's dtype, dpos
    ``[1, S, S]`` and dts ``[B, S, S]`` in the biases' dtype (None without biases).  Launches:
    8 (heads-major copies, the scaled gradient, dk / dv zeroed, the copies back; +3 for the
    bias gradients) + 10 to 23 per tile."""
    p, c = f.p, f.channels
    b, s, n, d = p.q.shape
    dt, f32 = p.q.dtype, p.q.dtype == torch.float32
    qh, kh = _heads_major(p.q), _heads_major(p.k)
    kt = kh.transpose(-1, -2)
    vt = _heads_major(p.v, (0, 2, 3, 1))
    gg = _grad_heads(grad, c, p.scale)
    dq = p.q.new_empty(p.q.shape)
    dk = torch.zeros(b * n, s, d, dtype=torch.float32, device=p.q.device)
    dv = torch.zeros(b * n, s, d, dtype=torch.float32, device=p.q.device)
    db = p.q.new_empty(b, s, 2, s, dtype=torch.float32) if c == 3 else None
    for r0, r1 in tiles(f):
        t = r1 - r0
        hide = invisible(p, r0, r1)
        gt = gg[:, :, r0:r1].view(b * n, t * c, d)  # a view: rows (i, channel)
        qt = qh[:, :, r0:r1]
        qk = _qk(qt, kt)
        if hide is not None:
            qk.masked_fill_(hide, _HIDDEN)
        dp = torch.bmm(gt, vt.view(b * n, d, s)).view(b, n, t, c, s)
        if not f32:
            dp = dp.float()
        m = None if p.mask is None else p.mask[:, :, r0:r1]
        if m is not None:
            dp.mul_(m.unsqueeze(3))
        if hide is not None and (m is not None or db is not None):
            dp.masked_fill_(hide.unsqueeze(3), 0)  # silu' is 0 there, the bias grads are not
        score = torch.nn.functional.silu(qk)
        if m is not None:
            score.mul_(m)
        ds = torch.ops.aten.silu_backward(dp[:, :, :, 0], qk)
        if db is not None:
            torch.sum(dp[:, :, :, 1:], 1, out=db[:, r0:r1])
        fill = hide if m is not None or db is not None else None  # else silu(-1e4) = 0 already
        rows = _channels(f, score, m, fill, r0, r1).view(b * n, t * c, s)
        ds = ds.view(b * n, t, s)
        qt = qt.view(b * n, t, d)
        if f32:
            dv.baddbmm_(rows.transpose(1, 2), gt)
            dk.baddbmm_(ds.transpose(1, 2), qt)
        else:
            ds = ds.to(dt)
            dv.add_(torch.bmm(rows.transpose(1, 2), gt))
            dk.add_(torch.bmm(ds.transpose(1, 2), qt))
        o = torch.bmm(ds, kh.view(b * n, s, d)).view(b, n, t, d)
        dq[:, r0:r1].copy_(o.permute(0, 2, 1, 3))
    dk, dv = (_rows_major(x.view(b, n, s, d), dt) for x in (dk, dv))
    if db is None:
        return dq, dk, dv, None, None
    assert f.ts is not None and f.pos is not None
    dts = db[:, :, 0].to(f.ts.dtype, memory_format=torch.contiguous_format, copy=True)
    dpos = db[:, :, 1].sum(0, keepdim=True).to(f.pos.dtype)
    return dq, dk, dv, dpos, dts
