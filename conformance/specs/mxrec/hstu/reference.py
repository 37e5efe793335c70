"""float64 reference of Rec SDK's HSTU attention, written from the math (the Rec SDK notes,
sections 2.3-2.5), never from our kernels: the oracle of the HSTU specs and tests.

Per sequence ``b`` of length ``L`` (rows ``seq_offset[b]:seq_offset[b+1]`` of the jagged q, k, v),
query head ``h`` and its kv head ``g = h // (N_q / N_k)`` (GQA), with ``s = silu_scale`` or
``1 / max_seq_len`` when it is 0::

    qkb_ij  = alpha * (q_i . k_j + rab[b, h, i, j])          (alpha scales the bias too)
    out_i   = sum_j silu(qkb_ij) * s * mask_ij * v_j          (j < L)

``mask_ij`` (``mask_type``): 0 = built-in causal with context and targets (:func:`causal_mask`),
2 = none (all ``L`` keys), 3 = the custom multiplicative tensor ``mask[b, h, i, j]``.  Padding
positions contribute nothing and jagged output rows exist only for real tokens.  Everything is
computed in float64 (per batch Python loops: an oracle, not a kernel).
"""

from __future__ import annotations

import torch

__all__ = ["causal_mask", "hstu_delta_reference", "hstu_dense_reference", "hstu_jagged_reference"]

F64 = torch.float64


def _connected(out: torch.Tensor, *inputs: torch.Tensor | None) -> torch.Tensor:
    """``out`` plus 0 times every input: an output with no rows still has a gradient path (a
    batch of empty sequences differentiates to zeros, as the ops' backwards give)."""
    zero = sum((t.to(F64).sum() * 0 for t in inputs if t is not None), torch.zeros((), dtype=F64))
    return out + zero


def causal_mask(length: int, n_context: int, n_target: int, group: int) -> torch.Tensor:
    """``[L, L]`` float64 0/1 visibility of the built-in mask (mask_type 0) of one sequence:

    * causal: key ``j`` visible to query ``i`` iff ``j <= i``;
    * context: rows ``i < n_context`` see every non-target key ``j < L - n_target``;
    * targets (``group > 0``): among the last ``n_target`` positions, target ``i`` sees target
      ``j`` only if ``j <= i`` and both are in the same group of ``group`` targets (counted from
      the first target); targets see all history.  ``group == 0``: no target rule (causal).
    """
    i = torch.arange(length).view(-1, 1)
    j = torch.arange(length).view(1, -1)
    visible = j <= i
    history = length - n_target
    visible |= (i < n_context) & (j < history)
    if group > 0 and n_target > 0:
        both = (i >= history) & (j >= history)
        same = torch.div(i - history, group, rounding_mode="floor") == torch.div(
            j - history, group, rounding_mode="floor"
        )
        visible &= ~both | same
    return visible.to(F64)


def hstu_jagged_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    seq_offset: torch.Tensor,
    mask: torch.Tensor | None = None,
    attn_bias: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    silu_scale: float = 0.0,
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    target_group_size: int = 0,
    alpha: float = 1.0,
) -> torch.Tensor:
    """``[T, N_q, D_v]`` float64 output of ``mxrec::hstu_jagged.equal`` for jagged
    ``q [T, N_q, D_qk]``, ``k [T, N_k, D_qk]``, ``v [T, N_k, D_v]``; ``mask`` / ``attn_bias``
    ``[B, N_q, S, S]`` with ``S = max_seq_len`` (0: the longest sequence)."""
    offsets = [int(x) for x in seq_offset.tolist()]
    batches = len(offsets) - 1
    lengths = [offsets[b + 1] - offsets[b] for b in range(batches)]
    s_max = max_seq_len or max(lengths, default=0)
    scale = silu_scale if silu_scale != 0.0 else 1.0 / max(s_max, 1)
    ratio = q.size(1) // k.size(1)
    out = torch.zeros(q.size(0), q.size(1), v.size(2), dtype=F64)
    for b in range(batches):
        lo, n = offsets[b], lengths[b]
        if n == 0:
            continue
        qb = q[lo : lo + n].to(F64).permute(1, 0, 2)  # [N_q, L, D]
        kb = k[lo : lo + n].to(F64).repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        vb = v[lo : lo + n].to(F64).repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        qk = qb @ kb.transpose(1, 2)
        if attn_bias is not None:
            qk = qk + attn_bias[b, :, :n, :n].to(F64)
        score = torch.nn.functional.silu(alpha * qk) * scale
        if mask_type == 0:
            nc = 0 if num_context is None else int(num_context[b])
            nt = 0 if num_target is None else int(num_target[b])
            score = score * causal_mask(n, nc, nt, target_group_size)
        elif mask_type == 3:
            assert mask is not None
            score = score * mask[b, :, :n, :n].to(F64)
        out[lo : lo + n] = (score @ vb).permute(1, 0, 2)
    return _connected(out, q, k, v, attn_bias)


def hstu_dense_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    attn_bias: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    silu_scale: float = 0.0,
) -> torch.Tensor:
    """``[B, S, N_q, D_v]`` float64 output of ``mxrec::hstu_dense`` (normal layout: every
    sequence ``S`` long, alpha 1): the jagged reference on the flattened rows."""
    b, s = q.shape[:2]
    offsets = torch.arange(b + 1) * s
    out = hstu_jagged_reference(
        q.flatten(0, 1),
        k.flatten(0, 1),
        v.flatten(0, 1),
        offsets,
        mask,
        attn_bias,
        mask_type,
        max_seq_len or s,
        silu_scale,
    )
    return out.view(b, s, q.size(2), v.size(3))


def hstu_delta_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    attn_bias: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    max_seq_len_k: int = 0,
    silu_scale: float = 0.0,
    seq_offset: torch.Tensor | None = None,
    seq_offset_k: torch.Tensor | None = None,
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    target_group_size: int = 0,
    alpha: float = 1.0,
) -> torch.Tensor:
    """``[T_q, N_q, D_v]`` float64 output of ``mxrec::hstu_jagged.delta``: batch ``b``'s ``L_q``
    queries are the last ``L_q`` positions of its ``L_k`` keys (q aligned to the end of k), so
    the built-in mask is rows ``L_k - L_q ..`` of the ``[L_k, L_k]`` mask of :func:`causal_mask`
    (causal bottom-right aligned: ``j <= i + L_k - L_q``; targets the last ``n_t`` keys; context
    the first ``n_c`` q rows, as Rec SDK's mask code reads it); mask / bias
    ``[B, N_q, S_q, S_k]`` indexed by (local q row, local k col); ``s = silu_scale`` or
    ``1 / max_seq_len``."""
    assert seq_offset is not None and seq_offset_k is not None
    oq, ok = [int(x) for x in seq_offset.tolist()], [int(x) for x in seq_offset_k.tolist()]
    lq = [oq[b + 1] - oq[b] for b in range(len(oq) - 1)]
    lk = [ok[b + 1] - ok[b] for b in range(len(ok) - 1)]
    s_q = max_seq_len or max(lq, default=1)
    scale = silu_scale if silu_scale != 0.0 else 1.0 / max(s_q, 1)
    ratio = q.size(1) // k.size(1)
    out = torch.zeros(q.size(0), q.size(1), v.size(2), dtype=F64)
    for b, (nq, nk) in enumerate(zip(lq, lk, strict=True)):
        if nq == 0:
            continue
        qb = q[oq[b] : oq[b] + nq].to(F64).permute(1, 0, 2)
        kb = k[ok[b] : ok[b] + nk].to(F64).repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        vb = v[ok[b] : ok[b] + nk].to(F64).repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        qk = qb @ kb.transpose(1, 2)
        if attn_bias is not None:
            qk = qk + attn_bias[b, :, :nq, :nk].to(F64)
        score = torch.nn.functional.silu(alpha * qk) * scale
        if mask_type == 0:
            nc = 0 if num_context is None else int(num_context[b])
            nt = 0 if num_target is None else int(num_target[b])
            # context: the first nc q rows (Rec SDK's create_causal_mask), key rows nk - nq ..
            score = score * causal_mask(nk, nc + nk - nq, nt, target_group_size)[nk - nq :]
        elif mask_type == 3:
            assert mask is not None
            score = score * mask[b, :, :nq, :nk].to(F64)
        out[oq[b] : oq[b] + nq] = (score @ vb).permute(1, 0, 2)
    return _connected(out, q, k, v, attn_bias)
