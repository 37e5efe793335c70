"""float64 reference of FBGEMM's varlen HSTU attention (``fbgemm_npu.experimental.hstu``), written
from upstream's test math (pytorch/FBGEMM, fbgemm_gpu/experimental/hstu/test/hstu_test.py:
``construct_mask``, ``_hstu_attention_maybe_from_cache``, ``_hstu_paged_kv_attention``) and the
kernel's element mask, never from our kernels: the oracle of the hstu_varlen specs and tests.

Batch ``b``: ``L_q`` queries at rows ``cu_seqlens_q[b]:`` of ``q`` (``seqused_q[b]`` of them, or
the whole segment), ``L_k`` keys at rows ``cu_seqlens_k[b]:`` of ``k`` / ``v``.  Query ``i``
sits at key position ``a = i + L_k - L_q`` (delta q: the queries are the last keys).  With ``g``
the kv head of ``h`` and ``r`` its rab head (``h // (H / H_rab)``), ``n = scaling_seqlen`` (``-1``:
``max_seqlen_q``)::

    out[i, h] = sum_j silu(alpha * (q_i . k_j + rab[b, r, a, j])) / n * M[a, j] * v_j

``M`` (1 visible, 0 not), keys ``j < L_k``:

* ``func`` ``[H_f, n_func, >= total_q]`` given: ``j < f0`` or ``f_{2m-1} <= j < f_{2m}`` with
  ``f_* = func[h // (H / H_f), *, cu_seqlens_q[b] + i]`` (replaces every rule below);
* window ``(left, right)`` (a negative side or one past ``max_seqlen_k``: unbounded):
  ``(-1, 0)`` causal ``j <= a``, with context rows ``a < n_c`` seeing every history key
  ``j < h = L_k - n_t`` and target rows ``a >= h`` not seeing targets of earlier groups,
  ``h <= j < h + g * floor((a - h) / g)`` (``g = target_group_size``);
  other windows ``a - left <= j <= a + right``; ``(-1, -1)`` everything.

Paged KV (``kv_cache [P, 2, page, H_k, D]``): the keys are the pages of ``page_ids[page_offsets[b]
:page_offsets[b + 1]]`` (the last one ``last_page_lens[b]`` rows long), then the ``n_t`` target
keys, the last ``n_t`` rows of the batch's q segment in ``k`` / ``v``.  Per-batch Python loops:
an oracle, not a kernel.  Rows of ``q`` outside every used segment are 0.
"""

from __future__ import annotations

import torch

__all__ = ["func_visible", "hstu_varlen_reference", "visible"]

F64 = torch.float64


def _int(t: torch.Tensor | None, b: int, default: int = 0) -> int:
    return default if t is None else int(t[b])


def visible(
    a: torch.Tensor,
    n_keys: int,
    max_seqlen_k: int,
    window: tuple[int, int],
    n_context: int,
    n_target: int,
    group: int,
) -> torch.Tensor:
    """``[len(a), n_keys]`` bool: key ``j`` visible to the query at key position ``a`` (the
    module docstring's window, context and target rules)."""
    left, right = (-1 if w < 0 or w >= max_seqlen_k else w for w in window)
    a = a.view(-1, 1)
    j = torch.arange(n_keys).view(1, -1)
    if (left, right) == (-1, 0):
        ok = j <= a
        history = n_keys - n_target
        ok |= (a < n_context) & (j < history)
        if n_target > 0:
            first = history + torch.div(a - history, group, rounding_mode="floor") * group
            ok &= ~((a >= history) & (j >= history) & (j < first))
        return ok
    ok = torch.ones(a.numel(), n_keys, dtype=torch.bool)
    if left >= 0:
        ok &= j >= a - left
    if right >= 0:
        ok &= j <= a + right
    return ok


def func_visible(f: torch.Tensor, n_keys: int) -> torch.Tensor:
    """``[L_q, n_keys]`` bool from one head's ``f [n_func, L_q]``: ``[0, f0) U [f1, f2) U ...``."""
    j = torch.arange(n_keys).view(1, -1)
    ok = j < f[0].view(-1, 1)
    for m in range(1, (f.size(0) - 1) // 2 + 1):
        ok |= (j >= f[2 * m - 1].view(-1, 1)) & (j < f[2 * m].view(-1, 1))
    return ok


def _keys(
    x: torch.Tensor, b: int, lq: int, lk: int, nt: int, q0: int, k0: int, side: int,
    kv_cache: torch.Tensor | None, page_offsets: torch.Tensor | None,
    page_ids: torch.Tensor | None, last_page_lens: torch.Tensor | None,
) -> torch.Tensor:  # fmt: skip
    """Batch ``b``'s ``[L_k, H_k, D]`` keys (``side`` 0) or values (1), paged or not."""
    if kv_cache is None:
        return x[k0 : k0 + lk]
    assert page_offsets is not None and page_ids is not None and last_page_lens is not None
    p0, p1 = int(page_offsets[b]), int(page_offsets[b + 1])
    pages = [kv_cache[int(page_ids[p]), side] for p in range(p0, p1)]
    if pages:
        pages[-1] = pages[-1][: int(last_page_lens[b])]
    cache = torch.cat(pages, 0) if pages else x[:0]
    rows = torch.cat([cache, x[q0 + lq - nt : q0 + lq]], 0)
    assert rows.size(0) == lk, f"batch {b}: {rows.size(0)} paged keys, cu_seqlens_k says {lk}"
    return rows


def hstu_varlen_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    seqused_q: torch.Tensor | None = None,
    seqused_k: torch.Tensor | None = None,
    max_seqlen_q: int = 0,
    max_seqlen_k: int = 0,
    scaling_seqlen: int = -1,
    num_contexts: torch.Tensor | None = None,
    num_targets: torch.Tensor | None = None,
    target_group_size: int = 1,
    window_size: tuple[int, int] = (-1, -1),
    alpha: float = 1.0,
    rab: torch.Tensor | None = None,
    has_drab: bool = False,
    kv_cache: torch.Tensor | None = None,
    page_offsets: torch.Tensor | None = None,
    page_ids: torch.Tensor | None = None,
    last_page_lens: torch.Tensor | None = None,
    func: torch.Tensor | None = None,
    quant_mode: int = -1,
) -> torch.Tensor:
    """``[q.size(0), H, D_v]`` float64 (module docstring); the arguments of
    ``hstu_attn_varlen_func``.  Differentiable in q, k, v and rab (float64 leaves)."""
    qd, kd, vd = q.to(F64), k.to(F64), v.to(F64)
    cache = kv_cache.to(F64) if kv_cache is not None else None
    rabd = rab.to(F64) if rab is not None else None
    heads, dv = q.size(1), v.size(2)
    ratio = heads // k.size(1)
    scale = 1.0 / (max_seqlen_q if scaling_seqlen == -1 else scaling_seqlen)
    rows = []
    for b in range(cu_seqlens_q.numel() - 1):
        q0, k0 = int(cu_seqlens_q[b]), int(cu_seqlens_k[b])
        lq = _int(seqused_q, b, int(cu_seqlens_q[b + 1]) - q0)
        lk = _int(seqused_k, b, int(cu_seqlens_k[b + 1]) - k0)
        nt = _int(num_targets, b)
        paged = (cache, page_offsets, page_ids, last_page_lens)
        kb = _keys(kd, b, lq, lk, nt, q0, k0, 0, *paged)
        vb = _keys(vd, b, lq, lk, nt, q0, k0, 1, *paged) if cache is not None else vd[k0 : k0 + lk]
        a = torch.arange(lq) + (lk - lq)
        if func is None:
            win = tuple(int(w) for w in window_size)
            m = visible(a, lk, max_seqlen_k, win, _int(num_contexts, b), nt, target_group_size)
        heads_out = []
        for h in range(heads):
            g = h // ratio
            s = qd[q0 : q0 + lq, h] @ kb[:, g].T
            if rabd is not None:
                s = s + rabd[b, h // (heads // rabd.size(1)), lk - lq : lk, :lk]
            if func is not None:
                f = func[h // (heads // func.size(0)), :, q0 : q0 + lq].long()
                m = func_visible(f, lk)
            p = torch.nn.functional.silu(alpha * s) * scale * m.to(F64)
            heads_out.append(p @ vb[:, g])
        out = torch.stack(heads_out, 1) if heads_out else qd.new_zeros(lq, 0, dv)
        rows.append((q0, out))
    # 0 * every input: the output stays differentiable (zero gradients) when no row is a query
    full = qd.new_zeros(q.size(0), heads, dv) + 0 * sum(
        x.sum() for x in (qd, kd, vd, rabd) if x is not None
    )
    for q0, out in rows:  # index_put keeps the graph to every batch's rows
        if out.size(0):
            full = full.index_put((torch.arange(q0, q0 + out.size(0)),), out)
    return full
