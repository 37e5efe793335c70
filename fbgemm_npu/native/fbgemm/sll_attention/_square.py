"""The padded self-attention program that ``sll_jagged_flash_attention_basic`` (one head) and
``sll_multi_head_jagged_flash_attention`` (``H`` heads) share.

Shapes: ``q, k [H, N, D]``, ``v [H, N, Dv]``, rows of batch row ``b`` from ``offsets[b]``,
``n_b = min(len_b, M)``.  Math, per head and batch row, on its first ``n_b`` rows::

    P = softmax_j(q_i . k_j) / max_seq_len        (i, j < n_b)
    A = P * [j >= i]  (use_mask)  or  P
    out_i = sum_j A_ij v_j                      (0 on every other row)

Backward (``g = grad_out``): ``dv = A^T g``, ``dA = g v^T`` (0 where the mask is),
``dS = P * (dA - max_seq_len * sum_j P * dA)``, ``dq = dS k``, ``dk = dS^T q``.

How: one gather per input to ``[H * B, M, C]`` (clamped rows, padding zeroed), ``bmm``, ``-inf``
at padding, ``softmax``, ``div_``, the padding (an empty row's NaN) zeroed by ``masked_fill_``
(the causal mask: a ``mul``), ``bmm``, and a scatter into one spare row per head
(``index_copy_`` at dim 0 of ``[H * (N + 1), Dv]``; with ``H > 1`` the per-head rows then
copied out contiguous).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._index import arange_cached

__all__ = ["Padded", "attend", "attend_backward", "gather_heads", "scatter_heads"]

Padded = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # read [B, M], pad [B, M], write [B, M]


def gather_heads(x: torch.Tensor, read: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    """``x [H, N, C]`` -> ``[H * B, M, C]`` at the clamped rows, 0 at padding: index_select,
    masked_fill_."""
    h, c = x.size(0), x.size(2)
    b, m = read.shape
    g = x.index_select(1, read.view(-1)).view(h, b, m, c)
    return g.masked_fill_(pad.unsqueeze(-1), 0).view(h * b, m, c)


def scatter_heads(xp: torch.Tensor, write: torch.Tensor, h: int, n: int) -> torch.Tensor:
    """``xp [H * B, M, C]`` -> ``[H, N, C]`` (rows no position writes are 0): zeros,
    index_copy_ (one head); more heads: a mul and add for the per-head targets, and the copy
    out of the per-head spare rows."""
    c = xp.size(-1)
    flat = write.view(-1)
    if h > 1:
        base = arange_cached(h, write.device) * (n + 1)
        flat = (base.unsqueeze(-1) + flat).view(-1)
    out = xp.new_zeros((h * (n + 1), c)).index_copy_(0, flat, xp.reshape(-1, c))
    out = out.view(h, n + 1, c)[:, :n]
    return out if h == 1 else out.contiguous()


def _upper(m: int, like: torch.Tensor) -> torch.Tensor:
    """``[j >= i]`` ``[M, M]`` in ``like``'s dtype (upstream's ``triu`` mask): ones, triu_."""
    return torch.ones(m, m, dtype=like.dtype, device=like.device).triu_()


def _probs(
    qp: torch.Tensor,
    kp: torch.Tensor,
    pad: torch.Tensor,
    h: int,
    max_seq_len: int,
    use_mask: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P, A)`` ``[H * B, M, M]`` (module docstring), 0 at padding: bmm, masked_fill_,
    softmax, div_, masked_fill_ (+ the mask and a mul with ``use_mask``)."""
    b, m = pad.shape
    both = pad.unsqueeze(-1) | pad.unsqueeze(1)  # [B, M, M]
    s = torch.bmm(qp, kp.transpose(1, 2))
    s.view(h, b, m, m).masked_fill_(both, float("-inf"))
    p = torch.softmax(s, -1).div_(max_seq_len)
    p.view(h, b, m, m).masked_fill_(both, 0)  # rows past n_b: softmax of -inf only, NaN
    if not use_mask:
        return p, p
    return p, p * _upper(m, p)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    index: Padded,
    max_seq_len: int,
    use_mask: bool,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """``out [H, N, Dv]`` and what the backward needs: see the module docstring."""
    read, pad, write = index
    h, n = q.size(0), q.size(1)
    qp, kp, vp = (gather_heads(t, read, pad) for t in (q, k, v))
    p, a = _probs(qp, kp, pad, h, max_seq_len, use_mask)
    out = scatter_heads(torch.bmm(a, vp), write, h, n)
    return out, (qp, kp, vp, p, a)


def attend_backward(
    grad: torch.Tensor,
    index: Padded,
    saved: tuple[torch.Tensor, ...],
    max_seq_len: int,
    use_mask: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv)`` ``[H, N, C]``: see the module docstring."""
    read, pad, write = index
    qp, kp, vp, p, a = saved
    h, n = grad.size(0), grad.size(1)
    gp = gather_heads(grad, read, pad)
    dv = torch.bmm(a.transpose(1, 2), gp)
    da = torch.bmm(gp, vp.transpose(1, 2))
    if use_mask:
        da.mul_(_upper(pad.size(1), da))
    ds = p * (da - (p * da).sum(-1, keepdim=True).mul_(max_seq_len))
    dq = torch.bmm(ds, kp)
    dk = torch.bmm(ds.transpose(1, 2), qp)
    return tuple(scatter_heads(t, write, h, n) for t in (dq, dk, dv))  # type: ignore[return-value]
