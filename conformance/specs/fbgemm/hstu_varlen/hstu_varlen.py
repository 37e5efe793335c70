"""Specs of FBGEMM's varlen HSTU attention through ``fbgemm_npu.experimental.hstu``
(``hstu_attn_varlen_func`` over ``fbgemm::hstu_varlen_fwd_80`` / ``_bwd_80``): forward, and the
backward through autograd (q, k, v, and rab with ``has_drab``); a paged-KV spec, forward only.

Inputs, drawn as upstream's test builds them (context | history | target per sequence, delta q
as the last keys): 1-3 sequences of 0-6 history keys, 0-2 contexts and 0-2 targets (causal
only), query lengths ``L_q <= L_k``, ``max_seqlen_*`` the longest plus 0-1, GQA (``H_k`` 1-2,
ratio 1-2), ``D_qk`` and ``D_v`` 1-6, float32 / float16 / bfloat16, int32 / int64 offsets; the
window ``(-1, 0)``, ``(-1, -1)`` or a local one, or ``func`` (``n_func`` 1 or 3, values -1..S+1);
rab with ``H_rab`` dividing H half the time; seqused and scaling_seqlen a quarter of the time.
One example in eight is invalid (heads not dividing rab's, a func of even n_func, a target with
a local window): ours raises, as the CPU call does.
Budgets: the op's entry per query tile (``units`` = the call's tile count over ``max_seqlen_k``
query rows with rab, ``max_seqlen_q`` without), path ``paged`` with the cache.

Oracle: the float64 reference written from upstream's test math (``reference.py``, itself
checked against a transcription of upstream's test in tests/experimental).  Tolerances ``|ours -
ref| <= atol + rtol |ref|``: float32 ``1e-4, 1e-4`` (float32 scores and matmuls); float16
``1e-2, 1e-2``, bfloat16 ``6e-2, 6e-2`` (matmuls in the input dtype, the scores rounded to it
before ``@ v``: one rounding of 2**-11 / 2**-8 per term over at most 9 terms).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.hstu_varlen.reference import hstu_varlen_reference
from fbgemm_npu.experimental.hstu import hstu_attn_varlen_func
from fbgemm_npu.native.mxrec.hstu._attention import tile_rows

FWD = "fbgemm::hstu_varlen_fwd_80"
TOL = {
    torch.float32: Tol(rtol=1e-4, atol=1e-4),
    torch.float16: Tol(rtol=1e-2, atol=1e-2),
    torch.bfloat16: Tol(rtol=6e-2, atol=6e-2),
}


def _cu(lengths: list[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(
        [0, *torch.tensor(lengths, dtype=torch.int64).cumsum(0).tolist()], dtype=dtype
    )


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, object]:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    b = draw(st.integers(1, 3))
    mode = draw(st.sampled_from(("causal", "causal", "none", "local", "func")))
    ctx = [draw(st.integers(0, 2)) if mode == "causal" else 0 for _ in range(b)]
    tgt = [draw(st.integers(0, 2)) if mode == "causal" else 0 for _ in range(b)]
    hist = [draw(st.integers(0, 6)) for _ in range(b)]
    lk = [c + h + t for c, h, t in zip(ctx, hist, tgt, strict=True)]
    delta = mode != "causal" or not any(ctx + tgt)
    lq = [draw(st.integers(0, n)) if delta and draw(st.booleans()) else n for n in lk]
    sk = max(max(lk), 1) + draw(st.integers(0, 1))
    sq = min(max(max(lq), 1) + draw(st.integers(0, 1)), sk)
    hk, ratio = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h, dqk, dv = hk * ratio, draw(st.integers(1, 6)), draw(st.integers(1, 6))
    dtype = draw(st.sampled_from(tuple(TOL)))
    odt = draw(st.sampled_from((torch.int32, torch.int64)))
    kw: dict[str, object] = {
        "q": (0.5 * torch.randn(sum(lq), h, dqk, generator=gen)).to(dtype),
        "k": (0.5 * torch.randn(sum(lk), hk, dqk, generator=gen)).to(dtype),
        "v": torch.randn(sum(lk), hk, dv, generator=gen).to(dtype),
        "cu_seqlens_q": _cu(lq, odt), "cu_seqlens_k": _cu(lk, odt),
        "seqused_q": None, "seqused_k": None, "max_seqlen_q": sq, "max_seqlen_k": sk,
        "scaling_seqlen": -1, "num_contexts": None, "num_targets": None,
        "alpha": draw(st.sampled_from((1.0, 0.5, 2.0))),
    }  # fmt: skip
    if mode == "causal":
        kw["window_size"] = (-1, 0)
        if any(ctx + tgt):
            kw["num_contexts"] = torch.tensor(ctx, dtype=odt)
            kw["num_targets"] = torch.tensor(tgt, dtype=odt)
            kw["target_group_size"] = draw(st.integers(1, 3))
    elif mode == "local":
        kw["window_size"] = (draw(st.integers(0, 3)), draw(st.integers(-1, 3)))
    elif mode == "func":
        nf = draw(st.sampled_from((1, 3)))
        hf = draw(st.sampled_from((1, h)))
        kw["func"] = torch.randint(
            -1, sk + 2, (hf, nf, sum(lq) + 2), generator=gen, dtype=torch.int32
        )
    if draw(st.booleans()):
        hr = draw(st.sampled_from(sorted({1, hk, h})))
        kw["rab"] = torch.randn(b, hr, sk, sk, generator=gen).to(dtype)
        kw["has_drab"] = True
    if not any(ctx + tgt) and draw(st.integers(0, 3)) == 0:  # seqused: a prefix of each segment
        uk = [draw(st.integers(0, n)) for n in lk]
        kw["seqused_k"] = torch.tensor(uk, dtype=odt)
        kw["seqused_q"] = torch.tensor(
            [min(draw(st.integers(0, n)), u) for n, u in zip(lq, uk, strict=True)], dtype=odt
        )
    if draw(st.integers(0, 3)) == 0:
        kw["scaling_seqlen"] = draw(st.integers(1, 8))
    if draw(st.integers(0, 7)) == 7:
        bad = draw(st.sampled_from(("rab_heads", "func_even", "targets_local")))
        if bad == "rab_heads":
            kw["rab"] = torch.randn(b, h + 1, sk, sk, generator=gen).to(dtype)
        elif bad == "func_even":
            kw["func"] = torch.zeros(1, 2, sum(lq) + 1, dtype=torch.int32)
            kw.update(num_contexts=None, num_targets=None, window_size=(-1, -1))
        else:
            kw.update(num_targets=torch.zeros(b, dtype=odt), window_size=(1, 1), func=None)
    return kw


def _op(**kw: object) -> torch.Tensor:
    return hstu_attn_varlen_func(**kw)


def _budget(**kw: object) -> BudgetUse:
    """The call's tiles: over ``max_seqlen_k`` query rows with rab (queries at their key
    positions), ``max_seqlen_q`` without."""
    q, cu, s = kw["q"], kw["cu_seqlens_q"], int(kw["max_seqlen_k"])  # type: ignore[call-overload]
    s_q = s if kw.get("rab") is not None else int(kw["max_seqlen_q"])  # type: ignore[call-overload]
    rows = tile_rows(cu.numel() - 1, q.size(1), max(s_q, 1), s)  # type: ignore[union-attr]
    path = "paged" if kw.get("kv_cache") is not None else None
    return BudgetUse(op=FWD, path=path, units=max(1, -(-s_q // rows)))


@st.composite
def _paged_inputs(draw: st.DrawFn) -> dict[str, object]:
    """upstream's generate_paged_kv_input: new history + targets as q (and the targets' k / v);
    the cache holds old + new history in shuffled pages of 1-4."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    b, page = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    new = [draw(st.integers(0, 3)) for _ in range(b)]
    tgt = [draw(st.integers(0, 2)) for _ in range(b)]
    old = [draw(st.integers(0, 5)) for _ in range(b)]
    lq = [n + t for n, t in zip(new, tgt, strict=True)]
    cached = [o + n for o, n in zip(old, new, strict=True)]
    lk = [c + t for c, t in zip(cached, tgt, strict=True)]
    pages = [-(-c // page) for c in cached]
    h, d = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(tuple(TOL)))
    spare = draw(st.integers(0, 2))
    return {
        "q": torch.randn(sum(lq), h, d, generator=gen).to(dtype),
        "k": torch.randn(sum(lq), h, d, generator=gen).to(dtype),
        "v": torch.randn(sum(lq), h, d, generator=gen).to(dtype),
        "cu_seqlens_q": _cu(lq, torch.int32), "cu_seqlens_k": _cu(lk, torch.int32),
        "seqused_q": None, "seqused_k": None, "max_seqlen_q": max(max(lq), 1),
        "max_seqlen_k": max(max(lk), 1), "scaling_seqlen": -1, "num_contexts": None,
        "num_targets": torch.tensor(tgt, dtype=torch.int32), "window_size": (-1, 0),
        "kv_cache": torch.randn(sum(pages) + spare, 2, page, h, d, generator=gen).to(dtype),
        "page_offsets": _cu(pages, torch.int64),
        "page_ids": torch.randperm(sum(pages) + spare, generator=gen)[: sum(pages)],
        "last_page_lens": torch.tensor([(c - 1) % page + 1 if c else 0 for c in cached]),
    }  # fmt: skip


def _paged_op(**kw: object) -> torch.Tensor:
    with torch.no_grad():
        return hstu_attn_varlen_func(**kw)


SPECS = [
    OpSpec(
        name="hstu_varlen_fwd_80",
        op=_op,
        inputs=_inputs(),
        compare=Compare(TOL),
        budget=_budget,
        reference=hstu_varlen_reference,
        backward=True,
        grad_inputs=("q", "k", "v"),
    ),
    OpSpec(
        name="hstu_varlen_fwd_80[rab]",
        op=_op,
        inputs=_inputs().filter(lambda kw: kw.get("rab") is not None),
        compare=Compare(TOL),
        budget=_budget,
        reference=hstu_varlen_reference,
        backward=True,
        grad_inputs=("q", "k", "v", "rab"),
    ),
    OpSpec(
        name="hstu_varlen_fwd_80[paged]",
        op=_paged_op,
        inputs=_paged_inputs(),
        compare=Compare(TOL),
        budget=_budget,
        reference=hstu_varlen_reference,
    ),
]
