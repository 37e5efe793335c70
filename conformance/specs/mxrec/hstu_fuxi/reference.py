"""float64 reference of Rec SDK's FuXi-alpha attention (``mxrec::hstu_fuxi`` and
``mxrec::hstu_dense_backward_fuxi``), written from the math (recsdk-ops.md section 3 and Rec SDK's
test goldens ``test_hstu_forward_jagged_fuxi.py`` / ``test_hstu_dense_backward_fuxi.py``), never
from our kernels: the oracle of the FuXi spec and tests.

Per sequence ``b`` of length ``L`` (jagged rows ``seqOffset[b]:seqOffset[b+1]``; the normal layout
is ``B`` sequences of ``S`` rows), head ``h``, ``s = siluScale`` or ``1 / maxSeqLen`` when 0, and
the mask ``M[h, i, j]`` of ``maskType`` (0: causal ``j <= i``; 2: none; 3: ``mask[b, h, i, j]``),
keys and queries ``i, j < L``::

    out_score[i, h] = sum_j silu(q_ih . k_jh) * s * M[h, i, j] * v_jh
    out_ts[i, h]    = sum_j timestampBias[b, i, j] * M[h, i, j] * v_jh
    out_pos[i, h]   = sum_j positionBias[0, i, j] * M[h, i, j] * v_jh
    out[i]          = [out_score[i, :, :].flatten() | out_ts[i].flatten() | out_pos[i].flatten()]

(the bias channels only when both biases are given), i.e. ``[T, 3 * N * D]`` jagged /
``[B, S, 3 * N * D]`` normal in blocks score | ts | pos, each block head-major.

The backward (:func:`fuxi_backward_reference`) takes the gradient in the backward op's own layout
``[T, N, 3D]``: per head ``[g_score | g_ts | g_pos]``, and gives, with ``x = q_i . k_j``,
``sig = sigmoid(x)``::

    dS[h, i, j] = (g_score[i, h] . v_jh) * s * M * sig * (1 + x (1 - sig))
    dq_ih = sum_j dS k_jh,        dk_jh = sum_i dS q_ih
    dv_jh = sum_i silu(x) s M g_score[i, h] + ts M g_ts[i, h] + pos M g_pos[i, h]
    dts[b, i, j] = sum_h M (g_ts[i, h] . v_jh),   dpos[0, i, j] = sum_{b, h} M (g_pos[i, h] . v_jh)

Everything in float64, per batch Python loops (an oracle, not a kernel); the forward is
differentiable, so ``torch.autograd`` of it is a second, independent backward.
"""

from __future__ import annotations

import torch

__all__ = ["fuxi_backward_reference", "fuxi_mask", "fuxi_reference", "to_backward_layout"]

F64 = torch.float64
Tensor = torch.Tensor


def _offsets(q: Tensor, layout: str, seq_offset: list[int] | None) -> tuple[Tensor, list[int]]:
    """The jagged rows ``[T, N, D]`` of q and the offsets (the normal layout's ``B * S`` rows)."""
    if layout == "normal":
        b, s = q.shape[:2]
        return q.flatten(0, 1), [i * s for i in range(b + 1)]
    assert seq_offset is not None
    return q, [int(x) for x in seq_offset]


def fuxi_mask(mask: Tensor | None, mask_type: int, b: int, n: int, heads: int) -> Tensor:
    """``[N or 1, L, L]`` float64 multiplicative mask of batch ``b`` (length ``n``)."""
    if mask_type == 0:
        return torch.ones(n, n, dtype=F64).tril().unsqueeze(0)
    if mask_type == 3:
        assert mask is not None
        return mask[b, :, :n, :n].to(F64)
    return torch.ones(1, n, n, dtype=F64)


def fuxi_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    timestampBias: Tensor | None = None,  # noqa: N803 - Rec SDK's argument names
    positionBias: Tensor | None = None,  # noqa: N803
    mask: Tensor | None = None,
    maskType: int = 0,  # noqa: N803
    maxSeqLen: int = 0,  # noqa: N803
    siluScale: float = 0.0,  # noqa: N803
    layout: str = "normal",
    seqOffset: list[int] | None = None,  # noqa: N803
) -> Tensor:
    """float64 output of ``mxrec::hstu_fuxi`` (module docstring): ``[T, C * N * D]`` jagged or
    ``[B, S, C * N * D]`` normal, ``C = 3`` with both biases, else 1."""
    qj, off = _offsets(q, layout, seqOffset)
    kj, _ = _offsets(k, layout, seqOffset)
    vj, _ = _offsets(v, layout, seqOffset)
    heads, dim = qj.shape[1:]
    scale = siluScale if siluScale != 0.0 else 1.0 / maxSeqLen
    channels = 3 if timestampBias is not None and positionBias is not None else 1
    out = torch.zeros(qj.size(0), channels, heads, dim, dtype=F64)
    for b in range(len(off) - 1):
        lo, n = off[b], off[b + 1] - off[b]
        if n == 0:
            continue
        qb, kb, vb = (x[lo : lo + n].to(F64).permute(1, 0, 2) for x in (qj, kj, vj))
        m = fuxi_mask(mask, maskType, b, n, heads)
        score = torch.nn.functional.silu(qb @ kb.transpose(1, 2)) * scale * m
        parts = [score @ vb]
        if channels == 3:
            assert timestampBias is not None and positionBias is not None
            parts.append((timestampBias[b, :n, :n].to(F64) * m) @ vb)
            parts.append((positionBias[0, :n, :n].to(F64) * m) @ vb)
        out[lo : lo + n] = torch.stack(parts, 0).permute(2, 0, 1, 3)  # [L, C, N, D]
    flat = out.flatten(1)
    return flat if layout != "normal" else flat.view(*q.shape[:2], -1)


def to_backward_layout(grad: Tensor, heads: int, channels: int) -> Tensor:
    """The forward's output gradient ``[T, C * N * D]`` (blocks score | ts | pos, each head-major)
    in the backward op's layout ``[T, N, C * D]`` (per head score | ts | pos)."""
    t = grad.size(0)
    return grad.reshape(t, channels, heads, -1).permute(0, 2, 1, 3).reshape(t, heads, -1)


def _split_grad(grad: Tensor, bias: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
    if not bias:
        return grad.to(F64), None, None
    g_s, g_ts, g_pos = grad.to(F64).chunk(3, dim=2)
    return g_s, g_ts, g_pos


def fuxi_backward_reference(
    grad: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    biasPosition: Tensor | None = None,  # noqa: N803
    biasTimestamp: Tensor | None = None,  # noqa: N803
    layout: str = "jagged",
    maskType: int = 0,  # noqa: N803
    maxSeqLen: int = 0,  # noqa: N803
    siluScale: float = 0.0,  # noqa: N803
    seqOffset: list[int] | None = None,  # noqa: N803
) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
    """float64 ``(dq, dk, dv, dpos [1, S, S], dts [B, S, S])`` of
    ``mxrec::hstu_dense_backward_fuxi`` for jagged ``grad [T, N, D]`` (``[T, N, 3D]`` with the
    biases); the bias gradients are None without biases (module docstring)."""
    assert layout == "jagged" and seqOffset is not None
    off = [int(x) for x in seqOffset]
    bias = biasPosition is not None
    g_s, g_ts, g_pos = _split_grad(grad, bias)
    s_max = maxSeqLen
    scale = siluScale if siluScale != 0.0 else 1.0 / s_max
    dq, dk, dv = (torch.zeros(x.shape, dtype=F64) for x in (q, k, v))
    dts = torch.zeros(len(off) - 1, s_max, s_max, dtype=F64) if bias else None
    dpos = torch.zeros(1, s_max, s_max, dtype=F64) if bias else None
    for b in range(len(off) - 1):
        lo, n = off[b], off[b + 1] - off[b]
        if n == 0:
            continue
        rows = slice(lo, lo + n)
        qb, kb, vb, gb = (x[rows].to(F64).permute(1, 0, 2) for x in (q, k, v, g_s))
        m = fuxi_mask(mask, maskType, b, n, q.size(1))
        x = qb @ kb.transpose(1, 2)
        sig = torch.sigmoid(x)
        ds = (gb @ vb.transpose(1, 2)) * scale * m * sig * (1 + x * (1 - sig))
        dq[rows] = (ds @ kb).permute(1, 0, 2)
        dk[rows] = (ds.transpose(1, 2) @ qb).permute(1, 0, 2)
        dvb = (x * sig * scale * m).transpose(1, 2) @ gb
        if bias:
            assert biasTimestamp is not None and dts is not None and dpos is not None
            assert g_ts is not None and g_pos is not None
            gt, gp = (g[rows].permute(1, 0, 2) for g in (g_ts, g_pos))
            ts, pos = biasTimestamp[b, :n, :n].to(F64) * m, biasPosition[0, :n, :n].to(F64) * m
            dvb = dvb + ts.transpose(1, 2) @ gt + pos.transpose(1, 2) @ gp
            dts[b, :n, :n] = (m * (gt @ vb.transpose(1, 2))).sum(0)
            dpos[0, :n, :n] += (m * (gp @ vb.transpose(1, 2))).sum(0)
        dv[rows] = dvb.permute(1, 0, 2)
    return dq, dk, dv, dpos, dts
