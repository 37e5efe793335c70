"""The float64 reference of FBGEMM's varlen HSTU (conformance/specs/fbgemm/hstu_varlen/reference.py)
against a transcription of upstream's own test math (pytorch/FBGEMM, hstu/test/hstu_test.py:
``construct_mask`` over the padded ``[S, S]`` grid with ``S = max_context + max_seq + max_target``,
``pad_input`` / ``pad_input_delta_q``, the einsum attention, ``_hstu_paged_kv_attention``'s page
walk), so that the oracle of every other test is checked against upstream's formulation: one
sequence layout per case (contexts, targets with group sizes, delta q, windows, func, paged KV).
"""

from __future__ import annotations

import math

import pytest
import torch

from conformance.specs.fbgemm.hstu_varlen.reference import hstu_varlen_reference

F64 = torch.float64


def _cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def _upstream_mask(s_c, s, s_t, group, window, cu_k_hist, n_c):  # type: ignore[no-untyped-def]
    """upstream's construct_mask (non-func branches), transcribed."""
    seqlen = s_c + s + s_t
    bs = cu_k_hist.numel() - 1
    mask = torch.zeros(seqlen, seqlen, dtype=torch.bool)
    if window[0] < 0 and window[1] == 0:
        for i in range(seqlen):
            mask[i, : i + 1] = True
        mask = mask.unsqueeze(0).unsqueeze(0).repeat(bs, 1, 1, 1)
        for i in range(bs):
            start = int(n_c[i] + cu_k_hist[i + 1] - cu_k_hist[i])
            mask[i, 0, : int(n_c[i]), :start] = True
            if s_t:
                if group > 1:
                    for j in range(math.ceil((seqlen - start) / group)):
                        for kk in range(min(group, seqlen - start - j * group)):
                            mask[i, 0, start + j * group + kk, start : start + j * group] = False
                else:
                    for j in range(start, seqlen):
                        mask[i, 0, j, start:j] = False
        return mask
    w0 = window[0] if window[0] >= 0 else seqlen
    w1 = window[1] if window[1] >= 0 else seqlen
    for i in range(seqlen):
        mask[i, max(0, i - w0) : min(seqlen, i + w1 + 1)] = True
    return mask.view(1, 1, seqlen, seqlen)


def _pad(x, cu, batch, s, cu_other=None):  # type: ignore[no-untyped-def]
    """pad_input (cu_other None) / pad_input_delta_q (q at the end of its keys)."""
    out = x.new_zeros(batch, s, *x.shape[1:])
    for i in range(batch):
        n = int(cu[i + 1] - cu[i])
        at = 0 if cu_other is None else int(cu_other[i + 1] - cu_other[i]) - n
        out[i, at : at + n] = x[int(cu[i]) : int(cu[i + 1])]
    return out


def _upstream_attention(q, k, v, cu_q, cu_k, s_q, s_k, rab, mask, alpha, delta):  # type: ignore[no-untyped-def]
    """_hstu_attention_maybe_from_cache (upcast), transcribed: padded einsum, silu, / seqlen_q."""
    b = cu_q.numel() - 1
    qp = _pad(q, cu_q, b, s_k, cu_k) if delta else _pad(q, cu_q, b, s_q)
    kp, vp = _pad(k, cu_k, b, s_k), _pad(v, cu_k, b, s_k)
    a = torch.einsum("bnhd,bmhd->bhnm", qp, kp)
    if rab is not None:
        a = a + torch.nn.functional.pad(
            rab, (0, a.size(-1) - rab.size(-1), 0, a.size(-2) - rab.size(-2))
        )
    a = torch.nn.functional.silu(a * alpha) / s_q
    if mask is not None:
        a = a * (mask.unsqueeze(1) if mask.dim() == 3 else mask).to(F64)
    o = torch.einsum("bhnm,bmhd->bnhd", a, vp)
    rows = []
    for i in range(b):
        n = int(cu_q[i + 1] - cu_q[i])
        at = int(cu_k[i + 1] - cu_k[i]) - n if delta else 0
        rows.append(o[i, at : at + n])
    return torch.cat(rows)


def _case(seed, hist, c_max, t_max, group, window, delta, rab_heads, heads=2, d=3):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    b = len(hist)
    n_c = [int(torch.randint(0, c_max + 1, (1,), generator=g)) for _ in hist] if c_max else [0] * b
    n_t = [int(torch.randint(0, t_max + 1, (1,), generator=g)) for _ in hist] if t_max else [0] * b
    lq_hist = [max(1, h - 2) for h in hist] if delta else hist
    lk = [c + h + t for c, h, t in zip(n_c, hist, n_t, strict=True)]
    lq = [c + h + t for c, h, t in zip(n_c, lq_hist, n_t, strict=True)]
    cu_q, cu_k = _cu(lq), _cu(lk)
    s_k = c_max + max(hist) + t_max
    s_q = c_max + max(lq_hist) + t_max
    q = torch.randn(sum(lq), heads, d, generator=g, dtype=F64)
    k = torch.randn(sum(lk), heads, d, generator=g, dtype=F64)
    v = torch.randn(sum(lk), heads, d, generator=g, dtype=F64)
    rab = torch.randn(b, rab_heads, s_k, s_k, generator=g, dtype=F64) if rab_heads else None
    mask = None
    if window != (-1, -1):
        mask = _upstream_mask(c_max, max(hist), t_max, group, window, _cu(hist), n_c)
    kw = {
        "num_contexts": torch.tensor(n_c) if c_max else None,
        "num_targets": torch.tensor(n_t) if t_max else None,
    }
    return (q, k, v, cu_q, cu_k, s_q, s_k, rab, mask), kw


CASES = [
    # hist lengths, max context, max target, group, window, delta q, rab heads
    ([3, 5, 1], 0, 0, 1, (-1, -1), False, 0),
    ([3, 5, 1], 0, 0, 1, (-1, 0), False, 2),
    ([4, 2, 6], 2, 0, 1, (-1, 0), False, 1),
    ([4, 2, 6], 0, 3, 1, (-1, 0), False, 0),
    ([4, 2, 6], 2, 4, 2, (-1, 0), False, 2),
    ([5, 6, 3], 0, 0, 1, (2, 1), False, 2),
    ([5, 6, 3], 0, 0, 1, (1, 3), True, 1),
    ([5, 6, 4], 0, 0, 1, (-1, 0), True, 2),
    ([5, 6, 4], 0, 0, 1, (-1, -1), True, 0),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_reference_matches_upstreams_test_math(case: int) -> None:
    hist, c_max, t_max, group, window, delta, rab_heads = CASES[case]
    (q, k, v, cu_q, cu_k, s_q, s_k, rab, mask), kw = _case(
        case, hist, c_max, t_max, group, window, delta, rab_heads
    )
    want = _upstream_attention(q, k, v, cu_q, cu_k, s_q, s_k, rab, mask, 0.7, delta)
    got = hstu_varlen_reference(
        q, k, v, cu_q, cu_k, None, None, s_q, s_k, -1, kw["num_contexts"], kw["num_targets"],
        group, window, 0.7, rab,
    )  # fmt: skip
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_reference_func_matches_upstreams_mask() -> None:
    """The func branch of construct_mask: per batch ``[0, f0) U [f1, f2)`` at the query's key
    position, func given to the op as upstream's var_fun ``[H_f, n_func, total_q + 256]``."""
    g = torch.Generator().manual_seed(5)
    lk, lq = [6, 4, 5], [6, 2, 5]
    cu_q, cu_k, b, s = _cu(lq), _cu(lk), 3, 6
    q, k, v = (torch.randn(sum(n), 2, 3, generator=g, dtype=F64) for n in (lq, lk, lk))
    func = torch.randint(0, 7, (b, 1, 3, s), generator=g, dtype=torch.int32)
    mask = torch.zeros(b, s, s, dtype=torch.bool)
    for i in range(b):
        off = lk[i] - lq[i]
        for r in range(lq[i]):
            mask[i, off + r, : func[i, 0, 0, r]] = True
            mask[i, off + r, func[i, 0, 1, r] : func[i, 0, 2, r]] = True
    var = torch.zeros(1, 3, sum(lq) + 256, dtype=torch.int32)
    for i in range(b):
        var[0, :, int(cu_q[i]) : int(cu_q[i + 1])] = func[i, 0, :, : lq[i]]
    want = _upstream_attention(q, k, v, cu_q, cu_k, s, s, None, mask, 1.0, True)
    got = hstu_varlen_reference(q, k, v, cu_q, cu_k, None, None, s, s, -1, None, None, func=var)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_reference_paged_matches_upstreams_page_walk() -> None:
    """generate_paged_kv_input / _hstu_paged_kv_attention: keys = the pages (last one
    ``last_page_lens`` long) then the targets' k rows; causal with targets at group size 1."""
    g = torch.Generator().manual_seed(7)
    page, heads, d = 4, 2, 3
    new_hist, targets, old = [3, 1], [2, 0], [5, 2]
    lq = [h + t for h, t in zip(new_hist, targets, strict=True)]
    cache_len = [o + h for o, h in zip(old, new_hist, strict=True)]
    lk = [c + t for c, t in zip(cache_len, targets, strict=True)]
    pages = [-(-c // page) for c in cache_len]
    page_offsets = _cu(pages)
    page_ids = torch.randperm(sum(pages), generator=g).to(torch.int32)
    last = torch.tensor([(c - 1) % page + 1 for c in cache_len], dtype=torch.int32)
    cache = torch.randn(sum(pages), 2, page, heads, d, generator=g, dtype=F64)
    cu_q = _cu(lq)
    q, k, v = (torch.randn(sum(lq), heads, d, generator=g, dtype=F64) for _ in range(3))
    s_k, s_q = max(lk), max(lq)
    mask = torch.zeros(2, 1, s_k, s_k)
    kc, vc = [], []
    for i in range(2):
        for j in range(cache_len[i]):
            mask[i, 0, j, : j + 1] = 1.0
        mask[i, 0, cache_len[i] : cache_len[i] + targets[i], : cache_len[i]] = 1.0
        for j in range(targets[i]):
            mask[i, 0, cache_len[i] + j, cache_len[i] + j] = 1.0
        ids = page_ids[int(page_offsets[i]) : int(page_offsets[i + 1])]
        kb = torch.cat([cache[p, 0] for p in ids[:-1]] + [cache[ids[-1], 0, : last[i]]])
        vb = torch.cat([cache[p, 1] for p in ids[:-1]] + [cache[ids[-1], 1, : last[i]]])
        tail = slice(int(cu_q[i]) + lq[i] - targets[i], int(cu_q[i + 1]))
        kc.append(torch.cat([kb, k[tail]]))
        vc.append(torch.cat([vb, v[tail]]))
    cu_k = _cu(lk)
    want = _upstream_attention(q, torch.cat(kc), torch.cat(vc), cu_q, cu_k, s_q, s_k, None,
                               mask.squeeze(1), 0.5, True)  # fmt: skip
    got = hstu_varlen_reference(
        q, k, v, cu_q, cu_k, None, None, s_q, s_k, -1, None, torch.tensor(targets), 1, (-1, 0),
        0.5, kv_cache=cache, page_offsets=page_offsets, page_ids=page_ids, last_page_lens=last,
    )  # fmt: skip
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
