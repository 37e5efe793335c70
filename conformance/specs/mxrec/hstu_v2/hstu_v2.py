"""Specs of ``mxrec::hstu_forward_v2`` (forward, and the gradients of q, k, v, rab through its
autograd) and ``mxrec::hstu_backward_v2`` (the backward op called directly).

Inputs: 1-3 batches of k lengths 0-6 and q lengths 0..L_k (q aligned to the end of k; empty and
full-length sequences), ``max_seqlen_q`` / ``_k`` the longest plus 0-1, GQA (``N_k`` 1-2, ratio
1-2), ``D_qk`` and ``D_v`` 1-8 drawn apart, int32 / int64 offsets, float32 / float16 / bfloat16;
one mask rule per example: a window (causal, none, sliding, symmetric, ahead), causal with
context and targets (group sizes 1-3, ``n_c + n_t < L_q``), arbitrary intervals (1-2 pairs a
row, values past the keys included), and in the forward ``mask_type`` 2 and 3 (a random 0/1
mask); rab, alpha and scale (0: ``1 / max_seqlen_q``) drawn.  One example in eight is invalid
(window size -2, an int64 arbitrary_func, a rab of the wrong shape, mask_type 1): ours must
raise, as the CPU call does.  Budgets: the op's entry per query tile (``units`` = the call's tile
count), path ``context_targets`` with counts, ``arbitrary`` with intervals.

Oracle: the float64 reference written from Rec SDK's v2 golden and mask utilities
(``reference.py``).  Tolerances ``|ours - ref| <= atol + rtol |ref|``: float32 ``1e-4, 1e-4``;
float16 ``1e-2, 1e-2``, bfloat16 ``6e-2, 6e-2`` (matmuls in the input dtype, scores rounded to
it before ``@ v`` as Rec SDK's golden does, over at most 6 terms), the HSTU family's.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.mxrec.hstu_v2.reference import (
    hstu_backward_v2_reference,
    hstu_forward_v2_reference,
)
from fbgemm_npu.native.mxrec.hstu._attention import tile_rows

FWD, BWD = "mxrec::hstu_forward_v2", "mxrec::hstu_backward_v2"
TOL = {
    torch.float32: Tol(rtol=1e-4, atol=1e-4),
    torch.float16: Tol(rtol=1e-2, atol=1e-2),
    torch.bfloat16: Tol(rtol=6e-2, atol=6e-2),
}
WINDOWS = ((-1, 0), (-1, 0), (-1, -1), (1, 0), (0, 1), (2, 2))


@st.composite
def _common(draw: st.DrawFn, rab: bool) -> dict[str, object]:
    """q / k / v, offsets, sizes, rab, alpha, scale and one mask rule (as window sizes, counts or
    an interval table; the forward adds its mask types)."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    lk = draw(st.lists(st.integers(0, 6), min_size=1, max_size=3))
    lq = [draw(st.integers(0, n)) for n in lk]
    b, sq = len(lk), max(max(lq), 1) + draw(st.integers(0, 1))
    sk = max(max(lk), 1) + draw(st.integers(0, 1))
    nk, ratio = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    nq, dqk, dv = nk * ratio, draw(st.integers(1, 8)), draw(st.integers(1, 8))
    dtype = draw(st.sampled_from(tuple(TOL)))
    odt = draw(st.sampled_from((torch.int32, torch.int64)))
    x: dict[str, object] = {
        "q": (0.5 * torch.randn(sum(lq), nq, dqk, generator=gen)).to(dtype),
        "k": (0.5 * torch.randn(sum(lk), nk, dqk, generator=gen)).to(dtype),
        "v": torch.randn(sum(lk), nk, dv, generator=gen).to(dtype),
        "sq": sq,
        "sk": sk,
        "off_q": torch.tensor([0, *torch.tensor(lq).cumsum(0).tolist()], dtype=odt),
        "off_k": torch.tensor([0, *torch.tensor(lk).cumsum(0).tolist()], dtype=odt),
        "alpha": draw(st.sampled_from((1.0, 0.5, 2.0))),
        "scale": draw(st.sampled_from((0.0, 0.25))),
        "window": draw(st.sampled_from(WINDOWS)),
        "grad": torch.randn(sum(lq), nq, dv, generator=gen).to(dtype),
    }
    if rab:
        x["rab"] = torch.randn(b, nq, sq, sk, generator=gen).to(dtype)
    rule = draw(st.sampled_from(("window", "window", "counts", "arbitrary")))
    if rule == "counts":
        nt = [draw(st.integers(0, max(n - 1, 0))) for n in lq]
        nc = [draw(st.integers(0, max(n - 1 - t, 0))) for n, t in zip(lq, nt, strict=True)]
        x["num_target"] = torch.tensor(nt, dtype=odt)
        x["num_context"] = torch.tensor(nc, dtype=odt)
        x["target_group_size"] = draw(st.integers(1, 3))
        x["window"] = (-1, 0)
    elif rule == "arbitrary":
        pairs = draw(st.integers(1, 2))
        af = torch.randint(0, sk + 2, (b, 1, sq, 2 * pairs), generator=gen, dtype=torch.int32)
        x["arbitrary_func"] = af.sort(-1).values if draw(st.booleans()) else af
        x["window"] = (-1, -1)
    bad = draw(st.integers(0, 7))
    if bad == 7:
        kind = draw(st.sampled_from(("window", "intervals", "rab")))
        if kind == "window":
            x["window"] = (-2, 0)
        elif kind == "intervals":
            x["arbitrary_func"] = torch.zeros(b, 1, sq, 2, dtype=torch.int64)
            x["window"] = (-1, -1)
            x.pop("num_context", None), x.pop("num_target", None)
        else:
            x["rab"] = torch.randn(b, nq, sq, sk + 1, generator=gen).to(dtype)
    return x


_PASS = ("rab", "num_context", "num_target", "target_group_size", "arbitrary_func", "alpha")


@st.composite
def _forward_inputs(draw: st.DrawFn, rab: bool) -> dict[str, object]:
    x = draw(_common(rab))
    kw: dict[str, object] = {n: x[n] for n in ("q", "k", "v") if n in x}
    kw.update(max_seq_len=x["sq"], max_seq_len_k=x["sk"], silu_scale=x["scale"])
    kw.update(seq_offset=x["off_q"], seq_offset_k=x["off_k"])
    kw.update({n: x[n] for n in _PASS if n in x})
    left, right = x["window"]  # type: ignore[misc]
    if "arbitrary_func" not in x and "num_target" not in x:
        kind = draw(st.sampled_from(("window", "window", "none", "custom")))
        if kind == "none":
            kw["mask_type"] = 2
        elif kind == "custom":
            q = kw["q"]
            b, nq = len(x["off_q"]) - 1, q.size(1)  # type: ignore[arg-type, attr-defined]
            mask = torch.rand(b, nq, x["sq"], x["sk"]) > 0.3  # type: ignore[arg-type]
            kw.update(mask_type=3, mask=mask.to(q.dtype))  # type: ignore[attr-defined]
    if (left, right) != (-1, -1) or draw(st.booleans()):
        if kw.get("mask_type", 0) == 0 and "arbitrary_func" not in kw:
            kw.update(window_size_left=left, window_size_right=right)
    if (left, right) == (-2, 0):
        kw.update(window_size_left=left, window_size_right=right)
    if draw(st.integers(0, 15)) == 15:
        kw["mask_type"] = 1
    return kw


@st.composite
def _backward_inputs(draw: st.DrawFn) -> dict[str, object]:
    x = draw(_common(draw(st.booleans())))
    kw: dict[str, object] = {n: x[n] for n in ("grad", "q", "k", "v")}
    kw.update(max_seqlen_q=x["sq"], max_seqlen_k=x["sk"], scale=x["scale"])
    kw.update(seq_offset_q=x["off_q"], seq_offset_k=x["off_k"])
    kw.update({n: x[n] for n in _PASS if n in x})
    kw["window_size_left"], kw["window_size_right"] = x["window"]  # type: ignore[misc]
    return kw


def _forward(**kw: object) -> torch.Tensor:
    return torch.ops.mxrec.hstu_forward_v2(**kw)


def _backward(**kw: object) -> tuple[torch.Tensor, ...]:
    return torch.ops.mxrec.hstu_backward_v2(**kw)


def _use(op: str, sq: object, sk: object, q: object, off: object, kw: dict) -> BudgetUse:
    rows = tile_rows(off.numel() - 1, q.size(1), int(sq), int(sk))  # type: ignore[attr-defined]
    path = "context_targets" if kw.get("num_target") is not None else None
    path = "arbitrary" if kw.get("arbitrary_func") is not None else path
    return BudgetUse(op=op, path=path, units=-(-int(sq) // rows))  # type: ignore[call-overload]


def _forward_budget(**kw: object) -> BudgetUse:
    return _use(FWD, kw["max_seq_len"], kw["max_seq_len_k"], kw["q"], kw["seq_offset"], kw)


def _backward_budget(**kw: object) -> BudgetUse:
    return _use(BWD, kw["max_seqlen_q"], kw["max_seqlen_k"], kw["q"], kw["seq_offset_q"], kw)


SPECS = [
    OpSpec(
        name="hstu_forward_v2",
        op=_forward,
        inputs=_forward_inputs(False),
        compare=Compare(TOL),
        budget=_forward_budget,
        reference=hstu_forward_v2_reference,
        backward=True,
        grad_inputs=("q", "k", "v"),
    ),
    OpSpec(
        name="hstu_forward_v2[rab]",
        op=_forward,
        inputs=_forward_inputs(True),
        compare=Compare(TOL),
        budget=_forward_budget,
        reference=hstu_forward_v2_reference,
        backward=True,
        grad_inputs=("q", "k", "v", "rab"),
    ),
    OpSpec(
        name="hstu_backward_v2",
        op=_backward,
        inputs=_backward_inputs(),
        compare=Compare(TOL),
        budget=_backward_budget,
        reference=hstu_backward_v2_reference,
    ),
]
