"""float64 references of ``mxrec::disentangle_attention`` and its backward, written from Rec
SDK's golden (``cust_op/test/disetangle_attention/torch/gloden.py``), not from our kernel:
the positional scores by explicit index arithmetic (``take_along_dim`` of a ``(b, n, s, 2s)``
score table at ``clamp(relative_pos + s - 1, 0, 2s - 1)``), the rest as the golden writes it.
The backward is torch's float64 autograd of the forward reference; an output gradient ``None``
counts as zero.  ``hf_deberta_v2_bias`` is HuggingFace DeBERTa-v2's bias convention, for the test
that documents the difference."""

from __future__ import annotations

import torch

__all__ = ["backward_reference", "forward_reference", "hf_deberta_v2_bias"]


def _index(relative_pos: torch.Tensor, s: int) -> torch.Tensor:
    # on the real line (float64: exact for |rel| < 2**53, and no int64 wrap beyond)
    return torch.clamp(relative_pos.reshape(s, s).double() + s - 1, 0, 2 * s - 1).long()


def _scores(x: torch.Tensor, pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``out[b, h, i, j] = sum_e x[b, h, i, e] pos[idx[i, j], h, e]``."""
    table = torch.einsum("bhie,phe->bhip", x, pos)  # (b, n, s, 2s)
    b, n, s, _ = x.shape
    return torch.take_along_dim(table, idx.expand(b, n, s, s), dim=-1)


def forward_reference(
    query_layer, key_layer, value_layer, pos_key_layer, pos_query_layer, relative_pos,
    attn_mask, pos_attr_type, score_scale,
):  # fmt: skip
    """float64 ``(attn_output, attn_probs, attn_weights)``; inputs of any float dtype are
    promoted (tensors that require grad stay leaves of the graph)."""
    q, k, v = (t.double() for t in (query_layer, key_layer, value_layer))
    pk, pq = pos_key_layer.double(), pos_query_layer.double()
    s = q.size(-2)
    idx = _index(relative_pos, s)
    score = torch.zeros(q.shape[:2] + (s, s), dtype=torch.float64)
    if "c2p" in pos_attr_type.split("|"):
        score = score + _scores(q, pk, idx)
    if "p2c" in pos_attr_type.split("|"):
        score = score + _scores(k, pq, idx).transpose(-1, -2)
    mask = attn_mask.double()
    mask = mask.unsqueeze(1) if mask.dim() == 3 else mask
    weights = torch.matmul(q * score_scale, k.transpose(-1, -2)) + score * score_scale + mask
    probs = torch.softmax(weights, -1)
    return torch.matmul(probs, v), probs, weights


def backward_reference(
    grad_attn_output, grad_attn_probs, grad_attn_weights, query_layer, key_layer, value_layer,
    pos_key_layer, pos_query_layer, relative_pos, attn_mask, attn_probs, pos_attr_type,
    score_scale,
):  # fmt: skip
    """float64 ``[dQ, dK, dV, dP_k | None, dP_q | None, d_mask | None]`` by autograd of
    :func:`forward_reference` (``attn_probs`` is not read: the reference recomputes it)."""
    leaves = [t.detach().double().requires_grad_() for t in
              (query_layer, key_layer, value_layer, pos_key_layer, pos_query_layer)]  # fmt: skip
    mask = attn_mask if attn_mask is not None else torch.zeros(())
    mask_leaf = mask.detach().double().requires_grad_()
    b, n, s, _ = leaves[0].shape
    full_mask = mask_leaf if attn_mask is not None else mask_leaf.expand(b, s, s)
    outs = forward_reference(*leaves, relative_pos, full_mask, pos_attr_type, score_scale)
    given = (grad_attn_output, grad_attn_probs, grad_attn_weights)
    pairs = [(o, g.double()) for o, g in zip(outs, given, strict=True) if g is not None]
    wrt = [*leaves, mask_leaf]
    grads = (
        torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
        if pairs
        else [None] * 6
    )
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, wrt, strict=True)]
    types = pos_attr_type.split("|")
    return [
        *grads[:3],
        grads[3] if "c2p" in types else None,
        grads[4] if "p2c" in types else None,
        grads[5] if attn_mask is not None else None,
    ]


def hf_deberta_v2_bias(query_layer, key_layer, pos_key_layer, pos_query_layer, relative_pos,
                       pos_att_type, att_span):  # fmt: skip
    """HuggingFace DeBERTa-v2's unscaled bias (``disentangled_attention_bias``): c2p at
    ``clamp(rel + att_span, 0, 2 att_span - 1)``, p2c at ``clamp(-rel + att_span, ...)`` taken at
    ``(j, i)`` and transposed; ``(b, n, s, s)`` float64."""
    q, k = query_layer.double(), key_layer.double()
    pk, pq = pos_key_layer.double(), pos_query_layer.double()
    b, n, s, _ = q.shape
    rel = relative_pos.reshape(s, s).long()
    score = torch.zeros(b, n, s, s, dtype=torch.float64)
    if "c2p" in pos_att_type:
        c2p = torch.einsum("bhie,phe->bhip", q, pk)
        pos = torch.clamp(rel + att_span, 0, 2 * att_span - 1).expand(b, n, s, s)
        score = score + torch.gather(c2p, -1, pos)
    if "p2c" in pos_att_type:
        p2c = torch.einsum("bhie,phe->bhip", k, pq)
        pos = torch.clamp(-rel + att_span, 0, 2 * att_span - 1).expand(b, n, s, s)
        score = score + torch.gather(p2c, -1, pos).transpose(-1, -2)
    return score
