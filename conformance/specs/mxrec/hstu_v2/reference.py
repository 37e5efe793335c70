"""float64 reference of Rec SDK's v2 HSTU interface (``mxrec::hstu_forward_v2`` /
``mxrec::hstu_backward_v2``), written from the math of the Rec SDK notes (sections 2.4 and 4:
the v2 test backend's PyTorch golden and its mask utilities), never from our kernels.

Per batch ``b`` with ``L_q`` queries (``seq_offset_q``) and ``L_k`` keys (``seq_offset_k``), the
queries are the last ``L_q`` positions of the keys: query row ``i`` sits at key position
``a = i + L_k - L_q``.  Query head ``h`` uses kv head ``h // (N_q / N_k)`` (GQA)::

    qkb_ij = alpha * (q_i . k_j + rab[b, h, i, j])         (alpha scales rab too)
    out_i  = sum_j silu(qkb_ij) * s * V_ij * mask_ij * v_j  (j < L_k)

``s = scale`` (``silu_scale``), or ``1 / max_seqlen_q`` when it is 0 or None.  ``V`` (0/1):

* ``arbitrary_func [B, H_f, S_q, 2G]`` given: the union over ``g`` of ``[lo_g, hi_g)`` of row
  ``i`` (an empty or reversed pair adds nothing; head ``h`` reads ``h`` if ``H_f == N_q``, else 0);
* else the window ``(left, right)``: ``a - left <= j <= a + right`` (``-1``: unbounded);
  ``(-1, 0)`` causal, ``(-1, -1)`` none.  With causal, the test utilities' context and target
  rules: rows ``i < n_c`` (query rows) see every key ``j < L_k - n_t``; the last ``n_t`` query
  rows against the last ``n_t`` keys see ``tj <= ti`` within one group of ``target_group_size``
  (``ti``, ``tj`` counted from the first target).

``mask_ij`` is the forward's custom tensor (``mask_type`` 3) or 1; ``mask_type`` 2 is ``V = 1``.
Gradients: ``torch.autograd`` of this forward (as the v2 test backend does), in float64.
"""

from __future__ import annotations

import torch

__all__ = ["hstu_backward_v2_reference", "hstu_forward_v2_reference", "v2_visibility"]

F64 = torch.float64


def v2_visibility(
    lq: int,
    lk: int,
    window: tuple[int, int] | None,
    n_context: int = 0,
    n_target: int = 0,
    group: int = 1,
    intervals: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[H_f or 1, L_q, L_k]`` float64 0/1 visibility of one batch.  ``window`` None: no mask;
    ``intervals [H_f, >= L_q, 2G]`` replace the window and the context / target rules."""
    i = torch.arange(lq).view(-1, 1)
    j = torch.arange(lk).view(1, -1)
    if intervals is not None:
        rows = intervals[:, :lq].to(torch.int64)
        vis = torch.zeros(rows.size(0), lq, lk, dtype=torch.bool)
        for g in range(rows.size(-1) // 2):
            lo, hi = rows[..., 2 * g : 2 * g + 1], rows[..., 2 * g + 1 : 2 * g + 2]
            vis |= (j >= lo) & (j < hi)
        return vis.to(F64)
    vis = torch.ones(lq, lk, dtype=torch.bool)
    if window is not None:
        left, right = window
        a = i + (lk - lq)
        if left >= 0:
            vis &= j >= a - left
        if right >= 0:
            vis &= j <= a + right
    if n_context > 0:
        vis[:n_context, : lk - n_target] = True
    if n_target > 0 and group > 0:
        ti = torch.arange(n_target).view(-1, 1)
        tj = torch.arange(n_target).view(1, -1)
        same = (torch.div(ti, group, rounding_mode="floor")) == torch.div(
            tj, group, rounding_mode="floor"
        )
        vis[lq - n_target :, lk - n_target :] = same & (tj <= ti)
    return vis.to(F64).unsqueeze(0)


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    oq: list[int],
    ok: list[int],
    scale: float,
    alpha: float,
    rab: torch.Tensor | None,
    visibility: list[torch.Tensor],
) -> torch.Tensor:
    """Jagged float64 output ``[T_q, N_q, D_v]`` from per-batch ``[H, L_q, L_k]`` masks."""
    ratio = q.size(1) // k.size(1)
    rows = []
    for b, vis in enumerate(visibility):
        nq, nk = oq[b + 1] - oq[b], ok[b + 1] - ok[b]
        qb = q[oq[b] : oq[b] + nq].to(F64).permute(1, 0, 2)
        kb = k[ok[b] : ok[b] + nk].to(F64).repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        vb = v[ok[b] : ok[b] + nk].to(F64).repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        qk = qb @ kb.transpose(1, 2)
        if rab is not None:
            qk = qk + rab[b, :, :nq, :nk].to(F64)
        score = torch.nn.functional.silu(alpha * qk) * scale * vis
        rows.append((score @ vb).permute(1, 0, 2))
    if not rows:
        return torch.zeros(q.size(0), q.size(1), v.size(2), dtype=F64)
    return torch.cat(rows, 0)


def _masks(
    oq: list[int],
    ok: list[int],
    window: tuple[int, int] | None,
    num_context: torch.Tensor | None,
    num_target: torch.Tensor | None,
    group: int,
    arbitrary_func: torch.Tensor | None,
) -> list[torch.Tensor]:
    out = []
    for b in range(len(oq) - 1):
        nq, nk = oq[b + 1] - oq[b], ok[b + 1] - ok[b]
        nc = 0 if num_context is None else int(num_context[b])
        nt = 0 if num_target is None else int(num_target[b])
        af = None if arbitrary_func is None else arbitrary_func[b]
        out.append(v2_visibility(nq, nk, window, nc, nt, group, af))
    return out


def _offsets(t: torch.Tensor) -> list[int]:
    return [int(x) for x in t.tolist()]


def hstu_forward_v2_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    rab: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    max_seq_len_k: int | None = None,
    silu_scale: float | None = 0.0,
    seq_offset: torch.Tensor | None = None,
    seq_offset_k: torch.Tensor | None = None,
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    target_group_size: int | None = 0,
    alpha: float | None = 1.0,
    metadata: torch.Tensor | None = None,
    window_size_left: int | None = None,
    window_size_right: int | None = None,
    arbitrary_func: torch.Tensor | None = None,
    sparse_info: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """``[T_q, N_q, D_v]`` float64 output of ``mxrec::hstu_forward_v2``: ``mask_type`` 0 is the
    window (default causal ``(-1, 0)``) with context / targets, or ``arbitrary_func``; 2 none;
    3 the custom ``mask [B, N_q, S_q, S_k]``.  ``metadata`` / ``sparse_info`` change nothing."""
    assert seq_offset is not None
    oq = _offsets(seq_offset)
    ok = _offsets(seq_offset_k) if seq_offset_k is not None else oq
    if mask_type == 0 and arbitrary_func is None:
        left = -1 if window_size_left is None else window_size_left
        right = 0 if window_size_right is None else window_size_right
        masks = _masks(oq, ok, (left, right), num_context, num_target, target_group_size or 0, None)
    elif mask_type == 0:
        masks = _masks(oq, ok, None, None, None, 0, arbitrary_func)
    else:
        masks = _masks(oq, ok, None, None, None, 0, None)
        if mask_type == 3:
            assert mask is not None
            masks = [
                m * mask[b, :, : oq[b + 1] - oq[b], : ok[b + 1] - ok[b]].to(F64)
                for b, m in enumerate(masks)
            ]
    scale = silu_scale if silu_scale else 1.0 / max_seq_len
    return _attend(q, k, v, oq, ok, scale, 1.0 if alpha is None else alpha, rab, masks)


def hstu_backward_v2_reference(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    seq_offset_q: torch.Tensor,
    seq_offset_k: torch.Tensor,
    rab: torch.Tensor | None = None,
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    scale: float | None = 0.0,
    target_group_size: int | None = 1,
    alpha: float | None = 1.0,
    window_size_left: int = -1,
    window_size_right: int = -1,
    metadata: torch.Tensor | None = None,
    arbitrary_func: torch.Tensor | None = None,
    sparse_info: list[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv, drab)`` float64 of ``mxrec::hstu_backward_v2``: autograd of the forward
    above for the output gradient ``grad [T_q, N_q, D_v]``; ``drab`` ``(0,)`` without a rab."""
    oq, ok = _offsets(seq_offset_q), _offsets(seq_offset_k)
    window = (window_size_left, window_size_right) if arbitrary_func is None else None
    if window == (-1, -1):
        window = None
    masks = _masks(oq, ok, window, num_context, num_target, target_group_size or 0, arbitrary_func)
    leaves = [t.detach().to(F64).requires_grad_() for t in (q, k, v)]
    r = rab.detach().to(F64).requires_grad_() if rab is not None else None
    s = scale if scale else 1.0 / max_seqlen_q
    out = _attend(*leaves, oq, ok, s, 1.0 if alpha is None else alpha, r, masks)
    inputs = [*leaves, *([r] if r is not None else [])]
    grads = torch.autograd.grad(out, inputs, grad.to(F64), allow_unused=True)
    grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs, strict=True)]
    drab = grads[3] if r is not None else torch.zeros(0, dtype=F64)
    return grads[0], grads[1], grads[2], drab
