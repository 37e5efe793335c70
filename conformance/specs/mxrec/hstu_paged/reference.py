"""float64 reference of Rec SDK's ``mxrec::hstu_paged`` (inference attention over a paged KV
cache), written from the math of Rec SDK's paged golden (the Rec SDK notes, sections 2.3-2.4),
never from our kernels: the oracle of the paged spec and tests.

Per batch ``b`` (``L_q = seq_offset[b+1] - seq_offset[b]`` new rows of q, k, v; ``n_t =
num_target[b]``, 0 without it):

* the cache: pages ``page_ids[page_offsets[b]] .. page_ids[page_offsets[b+1] - 1]`` of
  ``kv_cache [P, 2, page_size, N_k, D]`` (0 = K, 1 = V) concatenated, the last one cut to
  ``last_page_len[b]`` rows: ``C = (pages - 1) * page_size + last_page_len[b]`` rows;
* keys / values: the ``C`` cache rows, then the new k / v rows of the ``n_t`` targets (the last
  ``n_t`` rows of the batch's range): ``L_k = C + n_t``;
* queries: all ``L_q`` new q rows; query ``i`` sits at key position ``a = i + L_k - L_q``;
* ``out_i = sum_j silu(alpha * (q_i . k_j + rab[b, h, i, j])) * s * mask_ij * v_j`` with
  ``s = silu_scale`` or ``1 / max_seq_len`` (0: the longest q sequence), GQA by
  ``repeat_interleave`` of the kv heads;
* ``mask_ij`` (``mask_type``): 0 = the built-in mask (:func:`paged_mask`), 2 = none (all ``L_k``
  keys), 3 = the custom ``mask[b, h, i, j]`` on the ``[max_seq_len, max_seq_len_k]`` grid.

Everything in float64, per-batch Python loops (an oracle, not a kernel).
"""

from __future__ import annotations

import torch

__all__ = ["golden_tril_mask", "hstu_paged_reference", "paged_cache", "paged_mask"]

F64 = torch.float64


def golden_tril_mask(l_q: int, cache_len: int, n_t: int) -> torch.Tensor:
    """``[L_q, C + n_t]`` float64: the TRIL mask Rec SDK's paged test builds, verbatim
    (``[tril(ones(L_q, C), diagonal=C + n_t - L_q) | [zeros(L_q - n_t, n_t); eye(n_t)]]``)."""
    return torch.cat(
        [
            torch.tril(torch.ones(l_q, cache_len, dtype=F64), diagonal=cache_len + n_t - l_q),
            torch.cat([torch.zeros(l_q - n_t, n_t, dtype=F64), torch.eye(n_t, dtype=F64)]),
        ],
        dim=1,
    )


def paged_mask(l_q: int, l_k: int, n_t: int, group: int) -> torch.Tensor:
    """``[L_q, L_k]`` float64 0/1 built-in mask (mask_type 0) of one paged sequence: query ``i``
    at key position ``a = i + L_k - L_q`` sees key ``j <= a`` (causal, bottom-right aligned); with
    ``group > 0`` a target ``a >= h = L_k - n_t`` sees the history ``j < h`` and the targets of
    its own group, ``h + group * floor((a - h) / group) <= j <= a`` (Rec SDK's target rule,
    counted from the first target).  ``group == 1`` is the golden's TRIL mask
    (:func:`golden_tril_mask`): the history rows a causal prefix of the cache, each target the
    whole cache and itself."""
    a = torch.arange(l_q).view(-1, 1) + (l_k - l_q)
    j = torch.arange(l_k).view(1, -1)
    visible = j <= a
    h = l_k - n_t
    if group > 0 and n_t > 0:
        same = torch.div(a - h, group, rounding_mode="floor") == torch.div(
            j - h, group, rounding_mode="floor"
        )
        visible &= (a < h) | (j < h) | same
    return visible.to(F64)


def paged_cache(
    kv_cache: torch.Tensor,
    page_offsets: torch.Tensor,
    page_ids: torch.Tensor,
    last_page_len: torch.Tensor,
    b: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch ``b``'s cached ``(K, V)`` rows ``[C, N_k, D]`` float64: its pages concatenated, the
    last one cut to ``last_page_len[b]`` (no pages: none)."""
    lo, hi = int(page_offsets[b]), int(page_offsets[b + 1])
    pages = [kv_cache[int(page_ids[p])].to(F64) for p in range(lo, hi)]
    if not pages:
        empty = kv_cache.new_zeros(0, *kv_cache.shape[3:], dtype=F64)
        return empty, empty
    pages[-1] = pages[-1][:, : int(last_page_len[b])]
    return torch.cat([p[0] for p in pages]), torch.cat([p[1] for p in pages])


def hstu_paged_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    kv_cache: torch.Tensor,
    mask: torch.Tensor | None = None,
    attn_bias: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    max_seq_len_k: int = 0,
    silu_scale: float = 0.0,
    seq_offset: torch.Tensor | None = None,
    seq_offset_k: torch.Tensor | None = None,
    seq_offset_t: torch.Tensor | None = None,
    page_offsets: torch.Tensor | None = None,
    page_ids: torch.Tensor | None = None,
    last_page_len: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    target_group_size: int = 0,
    alpha: float | None = 1.0,
) -> torch.Tensor:
    """``[T, N_q, D]`` float64 output of ``mxrec::hstu_paged`` for jagged ``q [T, N_q, D]``,
    ``k, v [T, N_k, D]`` (the module docstring); ``mask`` / ``attn_bias`` ``[B, N_q, S_q, S_k]``
    indexed by (local q row, local key), keys counted cache first.  ``seq_offset_k`` /
    ``seq_offset_t`` / ``max_seq_len_k`` describe what the pages and ``num_target`` already say
    (the op checks that they agree); the reference reads the pages."""
    assert seq_offset is not None and page_offsets is not None
    assert page_ids is not None and last_page_len is not None
    off = [int(x) for x in seq_offset.tolist()]
    lengths = [off[b + 1] - off[b] for b in range(len(off) - 1)]
    s_q = max_seq_len or max(lengths, default=1)
    scale = silu_scale if silu_scale != 0.0 else 1.0 / max(s_q, 1)
    alpha = 1.0 if alpha is None else alpha
    ratio = q.size(1) // k.size(1)
    out = torch.zeros(q.size(0), q.size(1), v.size(2), dtype=F64)
    for b, l_q in enumerate(lengths):
        if l_q == 0:
            continue
        n_t = 0 if num_target is None else int(num_target[b])
        ck, cv = paged_cache(kv_cache, page_offsets, page_ids, last_page_len, b)
        lo, hi = off[b], off[b + 1]
        kb = torch.cat([ck, k[hi - n_t : hi].to(F64)]) if n_t else ck
        vb = torch.cat([cv, v[hi - n_t : hi].to(F64)]) if n_t else cv
        l_k = kb.size(0)
        qb = q[lo:hi].to(F64).permute(1, 0, 2)  # [N_q, L_q, D]
        kb = kb.repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        vb = vb.repeat_interleave(ratio, dim=1).permute(1, 0, 2)
        qk = qb @ kb.transpose(1, 2)
        if attn_bias is not None:
            qk = qk + attn_bias[b, :, :l_q, :l_k].to(F64)
        score = torch.nn.functional.silu(alpha * qk) * scale
        if mask_type == 0:
            score = score * paged_mask(l_q, l_k, n_t, target_group_size)
        elif mask_type == 3:
            assert mask is not None
            score = score * mask[b, :, :l_q, :l_k].to(F64)
        out[lo:hi] = (score @ vb).permute(1, 0, 2)
    return out
