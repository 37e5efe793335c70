"""``mxrec::hstu_paged``: HSTU attention of new jagged rows against a paged KV cache (Rec SDK's
inference op, forward only), the tile program of ``mxrec/hstu/_attention.py`` on npu and CPU.

Batch ``b`` has ``L_q = seq_offset[b+1] - seq_offset[b]`` new rows of ``q [T, N_q, D]``,
``k, v [T, N_k, D]``; its last ``n_t = num_target[b]`` rows are targets (0 without
``num_target``).  Its keys / values are the cache -- the pages
``page_ids[page_offsets[b] : page_offsets[b+1]]`` of ``kv_cache [P, 2, page_size, N_k, D]``
(0 = K, 1 = V) concatenated, the last cut to ``last_page_len[b]`` rows: ``C_b`` rows
(``mxrec/hstu/_paged.py``) -- followed by the new k / v rows of the targets: ``L_k = C_b + n_t``.
Query ``i`` sits at key position ``a = i + L_k - L_q``; output ``[T, N_q, D]``::

    out_i = sum_j silu(alpha * (q_i . k_j + rab_ij)) * s * mask_ij * v_j,   s = silu_scale or 1/S_q

``mask_type`` 0: the built-in mask as key intervals (``_spans.build_spans``): ``j <= a``
(causal, bottom-right aligned), and with ``target_group_size`` g a target sees the cache and its
group's targets ``C_b + g * floor((a - C_b) / g) <= j <= a`` (g = 1: the cache and itself, the
TRIL mask of Rec SDK's golden: two intervals per row); 2: none; 3: the custom
``mask [B, N_q, S_q, S_k]``; 1 is refused.  ``attn_bias [B, N_q, S_q, S_k]``.  ``S_q =
max_seq_len``, ``S_k = max_seq_len_k`` (either 0: read back with the checks, 1 sync).

Rec SDK declares ``Tensor x=None`` for tensors it requires; we declare them ``Tensor? x=None``
(what the dispatcher can pass) and raise naming the argument when ``kv_cache``, ``seq_offset``,
``page_offsets``, ``page_ids`` or ``last_page_len`` is None.  ``seq_offset_k`` and
``seq_offset_t`` repeat what the pages and ``num_target`` say (the key and target offsets): when
given they are checked against them (from 0, step by step).  As Rec SDK: ``num_target`` needs
``target_group_size > 0``; one head dim ``D`` for q, k, v and the cache.  Data checks (queued,
no sync): offsets, pages, ``last_page_len`` in ``[1, page_size]``, ``0 <= n_t <= L_q`` (all
new rows may be targets: the history is the cache), ``L_q <= S_q``, ``L_k <= S_k``; every
index is clamped, so bad data stays memory-safe.
Launches: the budget per query tile (``budgets.py``); 0 syncs sized, 0 AI-CPU.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.mxrec.hstu import _layout as L
from fbgemm_npu.native.mxrec.hstu._attention import Problem, attention_forward
from fbgemm_npu.native.mxrec.hstu._paged import cache_lengths, check_page_args, page_rows
from fbgemm_npu.native.mxrec.hstu._rows import jagged_rows, padded_rows
from fbgemm_npu.native.mxrec.hstu._spans import mask_type_spans

__all__ = ["KERNELS", "SCHEMAS", "hstu_paged"]

OP = "mxrec::hstu_paged"
SCHEMAS = {
    OP: "hstu_paged(Tensor q, Tensor k, Tensor v, Tensor? kv_cache=None, Tensor? mask=None, "
    "Tensor? attn_bias=None, int mask_type=0, int max_seq_len=0, int max_seq_len_k=0, "
    "float silu_scale=0.0, Tensor? seq_offset=None, Tensor? seq_offset_k=None, "
    "Tensor? seq_offset_t=None, Tensor? page_offsets=None, Tensor? page_ids=None, "
    "Tensor? last_page_len=None, Tensor? num_target=None, int target_group_size=0, "
    "float? alpha=1.0) -> Tensor"
}
I32 = torch.int32


def _required(**tensors: object) -> None:
    for name, t in tensors.items():
        if t is None:
            raise ValueError(f"{OP}: argument '{name}' is required (got None)")


def _restated(name: str, off: object, batch: int, q: torch.Tensor) -> torch.Tensor | None:
    """An optional ``[B + 1]`` offsets argument that restates the pages or counts
    (``seq_offset_k`` / ``seq_offset_t``): checked like ``seq_offset`` (no launch), None when
    not given."""
    if off is None:
        return None
    t = check_tensor(OP, name, off)
    check_ndim(OP, name, t, (1,))
    check_dtype(OP, name, t, INDEX_DTYPES)
    check_same_device(OP, q=q, **{name: t})
    if t.numel() != batch + 1:
        raise ValueError(f"{OP}: argument '{name}' must have {batch + 1} elements; got {t.numel()}")
    return t


def _agrees(checks: DataChecks, name: str, off: torch.Tensor | None, want: torch.Tensor) -> None:
    """Queue ``off[0] == 0`` and ``off``'s steps == ``want`` (int32 ``[B]``): the steps in
    ``off``'s own dtype, so that an int64 step cannot wrap into agreement (``sub``, ``eq``,
    ``all``).  The start too: steps alone pass a shifted (or int32-wrapped) copy; from 0, int32
    steps that agree are the true offsets (their sums stay below ``B * S_k < 2**31``)."""
    if off is not None:
        expect = "cache length + num_target" if name == "seq_offset_k" else "num_target"
        ok = torch.eq(off[1:] - off[:-1], want).all()
        checks.add(off[0], 0, 0, f"argument '{name}' must start at 0")
        checks.require(ok, f"argument '{name}' must step by each sequence's {expect}")


def _targets(
    k: torch.Tensor,
    v: torch.Tensor,
    kc: torch.Tensor,
    vc: torch.Tensor,
    o: torch.Tensor,
    clen: torch.Tensor,
    nt: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys ``C_b <= j < C_b + n_t`` from the batch's last ``n_t`` new rows: row
    ``seq_offset[b+1] - n_t + j - C_b`` of k / v (clamped into k), elsewhere the cache part.
    Launches: the row index (sub, sub, add, clamp), the target mask (sub, ge, lt, and), a
    gather and a ``where`` for k and for v."""
    b, s_k = kc.shape[:2]
    j = arange_cached(s_k, k.device, I32).view(1, -1)
    rel = j - clen.view(-1, 1)  # key position past the cache
    tgt = ((rel >= 0) & (rel < nt.view(-1, 1))).view(b, s_k, 1, 1)
    src = (rel + (o[1:] - nt).view(-1, 1)).clamp_(0, max(k.size(0) - 1, 0)).view(-1)
    kk = torch.where(tgt, k.index_select(0, src).view(kc.shape), kc)
    vv = torch.where(tgt, v.index_select(0, src).view(vc.shape), vc)
    return kk, vv


def hstu_paged(  # type: ignore[no-untyped-def]
    q, k, v, kv_cache=None, mask=None, attn_bias=None, mask_type=0, max_seq_len=0,
    max_seq_len_k=0, silu_scale=0.0, seq_offset=None, seq_offset_k=None, seq_offset_t=None,
    page_offsets=None, page_ids=None, last_page_len=None, num_target=None, target_group_size=0,
    alpha=1.0,
) -> torch.Tensor:  # fmt: skip
    """Output ``[T, N_q, D]`` in q's dtype (module docstring)."""
    q, k, v = L.check_qkv(OP, q, k, v, 3)
    _required(
        kv_cache=kv_cache, seq_offset=seq_offset, page_offsets=page_offsets, page_ids=page_ids,
        last_page_len=last_page_len,
    )  # fmt: skip
    cache, po, ids, last = check_page_args(OP, kv_cache, page_offsets, page_ids, last_page_len)
    off = L.check_offsets(OP, seq_offset, q)
    batch, tokens, ps = off.numel() - 1, q.size(0), cache.size(2)
    if last.numel() != batch:
        raise ValueError(
            f"{OP}: argument 'last_page_len' must have {batch} elements (one per sequence); "
            f"got {last.numel()}"
        )
    if cache.dtype != q.dtype or cache.device != q.device:
        raise ValueError(f"{OP}: argument 'kv_cache' must have q's dtype and device")
    if cache.size(3) != k.size(1) or cache.size(4) != q.size(2) or v.size(2) != q.size(2):
        raise ValueError(
            f"{OP}: arguments 'kv_cache' and 'v' must have k's {k.size(1)} heads and q's head "
            f"dim {q.size(2)}: kv_cache [P, 2, page_size, {k.size(1)}, {q.size(2)}]; got "
            f"{list(cache.shape)} and v {list(v.shape)}"
        )
    s_q, s_k, group = int(max_seq_len), int(max_seq_len_k), int(target_group_size)
    if s_q < 0 or s_k < 0:
        raise ValueError(f"{OP}: arguments 'max_seq_len' and 'max_seq_len_k' must be >= 0")
    # the bound before the cache lengths' int32 arithmetic: an S_k past int32 reached their
    # int32 clamp (a RuntimeError naming nothing); check_mask_args repeats it later
    for name, s in (("max_seq_len", s_q), ("max_seq_len_k", s_k)):
        if s > L.MAX_SEQ_LEN:
            raise ValueError(
                f"{OP}: argument '{name}' must be <= {L.MAX_SEQ_LEN} (Rec SDK's longest "
                f"sequence); got {s}"
            )
    if group < 0 or (num_target is not None and group == 0):
        raise ValueError(
            f"{OP}: argument 'target_group_size' must be > 0 when num_target is given "
            f"(>= 0 without); got {group}"
        )
    nt = L.check_counts(OP, batch, q, num_target=num_target)["num_target"]
    off_k = _restated("seq_offset_k", seq_offset_k, batch, q)
    off_t = _restated("seq_offset_t", seq_offset_t, batch, q)
    o = off.to(I32)
    lq = o[1:] - o[:-1]
    checks = None
    if validation_enabled():
        # num_target in [0, L_q] per sequence (the targets are the last rows of its q range)
        # (all q rows may be targets: the history is the cache)
        checks = L.queue_data_checks(OP, o, lq, tokens, s_q or None, strict=False, num_target=nt)
    clen, first = cache_lengths(po, ids, last, cache.size(0), ps, s_k or None, checks)
    lk = clen if nt is None else clen + nt
    if s_q == 0 or s_k == 0:  # the contract's read-back (1 sync), the queued checks with it
        got = (checks or DataChecks(OP)).read_with([lq.max(), lk.max()])
        s_q, s_k = s_q or max(got[0], 1), s_k or max(got[1], 1)
    elif checks is not None and nt is not None:  # (the cache alone: checked by cache_lengths)
        checks.add(lk.max(), None, s_k, f"cache + target lengths must be <= max_seq_len_k {s_k}")
    if batch * max(s_q, s_k) >= 2**31:  # the int32 index arithmetic of the padded layouts
        raise ValueError(
            f"{OP}: batch size x max_seq_len / max_seq_len_k must be below 2**31; got "
            f"{batch} x {max(s_q, s_k)}"
        )
    L.check_mask_args(OP, q, batch, s_q, mask, attn_bias, mask_type, s_k)
    if checks is not None:
        _agrees(checks, "seq_offset_k", off_k, lk)
        _agrees(checks, "seq_offset_t", off_t, nt if nt is not None else torch.zeros_like(lq))
        checks.assert_on_device()
    if tokens == 0:
        return q.new_empty(0, q.size(1), v.size(2))
    kc, vc = page_rows(cache, ids, first, clen, s_k)  # clen in [0, s_k] (clamped or read)
    if nt is not None:
        kc, vc = _targets(k, v, kc, vc, o, clen, nt)
    (qp,), rows = padded_rows([q], off, s_q)
    spans = mask_type_spans(mask_type, s_q, s_k, q.device, lq, lk, lk - lq, None, nt, group)
    scale = silu_scale if silu_scale != 0.0 else 1.0 / s_q
    p = Problem(
        qp, kc, vc, spans, mask if mask_type == 3 else None, attn_bias, scale,
        1.0 if alpha is None else float(alpha),
    )  # fmt: skip
    return jagged_rows(attention_forward(p), rows)


def _meta(q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    return q.new_empty(q.size(0), q.size(1), v.size(-1))


KERNELS = {OP: {"PrivateUse1": hstu_paged, "CPU": hstu_paged, "Meta": _meta}}
