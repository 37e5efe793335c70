"""Specs of ``mxrec::hstu_jagged.equal``, ``mxrec::hstu_dense`` and ``mxrec::hstu_jagged.delta``
(forward, and the backward through autograd; the dense spec: B 1-3, S 1-6, a bias always; the
delta spec: q lengths 0..L_k of k lengths 0-6, a bias always; mask_type 1 one in 8 times).

Inputs: 1-4 sequences of lengths 0..6 (empty ones included), ``max_seq_len`` the longest plus
0-2, GQA (``N_k`` 1-2, ratio 1-2), ``D_qk`` and ``D_v`` 1-8 drawn apart, int32 / int64 offsets,
float32 / float16 / bfloat16; mask_type 0 (with or without num_context / num_target, group size
0-2), 2, 3 (a random 0/1 mask); a bias spec with attn_bias, alpha and silu_scale drawn, whose
gradient is checked too.  One example in eight is invalid (mask_type 1, a head count that does
not divide, a bias of the wrong shape): ours must raise, as the CPU call does.
Budgets: the op's entry per query tile (``units`` = the tile count of the call), path
``context_targets`` when num_context / num_target are given.

Oracle: the float64 reference written from the math (``reference.py``), for the output and the
gradients of q, k, v (and attn_bias).  Tolerances ``|ours - ref| <= atol + rtol |ref|``: float32
``1e-4, 1e-4`` (float32 scores, float32 matmuls); float16 ``1e-2, 1e-2`` and bfloat16 ``6e-2,
6e-2`` (the matmuls run in the input dtype and the scores are rounded to it before ``@ v``, as
Rec SDK's golden does: one rounding of 2**-11 / 2**-8 per term, over at most 8 terms).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.mxrec.hstu.reference import (
    hstu_delta_reference,
    hstu_dense_reference,
    hstu_jagged_reference,
)
from fbgemm_npu.native.mxrec.hstu._attention import tile_rows

FWD = "mxrec::hstu_jagged.equal"
TOL = {
    torch.float32: Tol(rtol=1e-4, atol=1e-4),
    torch.float16: Tol(rtol=1e-2, atol=1e-2),
    torch.bfloat16: Tol(rtol=6e-2, atol=6e-2),
}


@st.composite
def _inputs(draw: st.DrawFn, bias: bool) -> dict[str, object]:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    lengths = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
    b, s = len(lengths), max(lengths) + draw(st.integers(0, 2))
    s = max(s, 1)
    nk, ratio = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    nq, dqk, dv = nk * ratio, draw(st.integers(1, 8)), draw(st.integers(1, 8))
    dtype = draw(st.sampled_from(tuple(TOL)))
    odt = draw(st.sampled_from((torch.int32, torch.int64)))
    t = sum(lengths)
    off = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=odt)
    kw: dict[str, object] = {
        "q": (0.5 * torch.randn(t, nq, dqk, generator=gen)).to(dtype),
        "k": (0.5 * torch.randn(t, nk, dqk, generator=gen)).to(dtype),
        "v": torch.randn(t, nk, dv, generator=gen).to(dtype),
        "max_seq_len": s,
        "seq_offset": off,
        "mask_type": draw(st.sampled_from((0, 0, 2, 3))),
    }
    if kw["mask_type"] == 3:
        kw["mask"] = (torch.rand(b, nq, s, s, generator=gen) > 0.3).to(dtype)
    if kw["mask_type"] == 0 and draw(st.booleans()):
        nt = [draw(st.integers(0, n)) for n in lengths]
        nc = [draw(st.integers(0, n - c)) for n, c in zip(lengths, nt, strict=True)]
        kw["num_target"] = torch.tensor(nt, dtype=odt)
        kw["num_context"] = torch.tensor(nc, dtype=odt)
        kw["target_group_size"] = draw(st.integers(0, 2))
    if bias:
        kw["attn_bias"] = torch.randn(b, nq, s, s, generator=gen).to(dtype)
        kw["alpha"] = draw(st.sampled_from((1.0, 0.5, 2.0)))
        kw["silu_scale"] = draw(st.sampled_from((0.0, 0.25)))
    bad = draw(st.integers(0, 7))
    if bad == 7:
        kind = draw(st.sampled_from(("triu", "heads", "bias")))
        if kind == "triu":
            kw["mask_type"] = 1
        elif kind == "heads":
            kw["k"] = torch.randn(t, nq + 1, dqk, generator=gen).to(dtype)
        else:
            kw["attn_bias"] = torch.randn(b, nq, s, s + 1, generator=gen).to(dtype)
    return kw


def _op(**kw: object) -> torch.Tensor:
    return torch.ops.mxrec.hstu_jagged(**kw)


def _budget(**kw: object) -> BudgetUse:
    q, off, s = kw["q"], kw["seq_offset"], int(kw["max_seq_len"])  # type: ignore[index]
    rows = tile_rows(off.numel() - 1, q.size(1), s)  # type: ignore[union-attr]
    path = "context_targets" if kw.get("num_target") is not None else None
    return BudgetUse(op=FWD, path=path, units=-(-s // rows))


@st.composite
def _dense_inputs(draw: st.DrawFn) -> tuple[object, ...]:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    b, s = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    nk, ratio = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    nq, dqk, dv = nk * ratio, draw(st.integers(1, 8)), draw(st.integers(1, 8))
    dtype = draw(st.sampled_from(tuple(TOL)))
    q = (0.5 * torch.randn(b, s, nq, dqk, generator=gen)).to(dtype)
    k = (0.5 * torch.randn(b, s, nk, dqk, generator=gen)).to(dtype)
    v = torch.randn(b, s, nk, dv, generator=gen).to(dtype)
    mask_type = draw(st.sampled_from((0, 2, 3, 1) if draw(st.integers(0, 7)) == 7 else (0, 2, 3)))
    mask = (torch.rand(b, nq, s, s, generator=gen) > 0.3).to(dtype) if mask_type == 3 else None
    bias = torch.randn(b, nq, s, s, generator=gen).to(dtype)
    scale = draw(st.sampled_from((0.0, 0.25)))
    return (q, k, v, mask, bias, mask_type, draw(st.sampled_from((0, s))), scale)


def _dense_op(*args: object) -> torch.Tensor:
    return torch.ops.mxrec.hstu_dense(*args)


def _dense_budget(*args: object) -> BudgetUse:
    q = args[0]
    b, s, n = q.shape[:3]  # type: ignore[attr-defined]
    return BudgetUse(op="mxrec::hstu_dense", units=-(-s // tile_rows(b, n, s)))


@st.composite
def _delta_inputs(draw: st.DrawFn) -> dict[str, object]:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    lk = draw(st.lists(st.integers(0, 6), min_size=1, max_size=3))
    lq = [draw(st.integers(0, n)) for n in lk]
    b, sq, sk = len(lk), max(max(lq), 1), max(max(lk), 1) + draw(st.integers(0, 1))
    nk, ratio = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    nq, dqk, dv = nk * ratio, draw(st.integers(1, 8)), draw(st.integers(1, 8))
    dtype = draw(st.sampled_from(tuple(TOL)))
    odt = draw(st.sampled_from((torch.int32, torch.int64)))
    kw: dict[str, object] = {
        "q": (0.5 * torch.randn(sum(lq), nq, dqk, generator=gen)).to(dtype),
        "k": (0.5 * torch.randn(sum(lk), nk, dqk, generator=gen)).to(dtype),
        "v": torch.randn(sum(lk), nk, dv, generator=gen).to(dtype),
        "attn_bias": torch.randn(b, nq, sq, sk, generator=gen).to(dtype),
        "mask_type": draw(st.sampled_from((0, 0, 2, 3))),
        "max_seq_len": sq,
        "max_seq_len_k": sk,
        "seq_offset": torch.tensor([0, *torch.tensor(lq).cumsum(0).tolist()], dtype=odt),
        "seq_offset_k": torch.tensor([0, *torch.tensor(lk).cumsum(0).tolist()], dtype=odt),
        "alpha": draw(st.sampled_from((1.0, 0.5))),
    }
    if kw["mask_type"] == 3:
        kw["mask"] = (torch.rand(b, nq, sq, sk, generator=gen) > 0.3).to(dtype)
    if kw["mask_type"] == 0 and draw(st.booleans()):
        nt = [draw(st.integers(0, n)) for n in lk]
        kw["num_target"] = torch.tensor(nt, dtype=odt)
        kw["num_context"] = torch.tensor([draw(st.integers(0, n)) for n in lk], dtype=odt)
        kw["target_group_size"] = draw(st.integers(0, 2))
    if draw(st.integers(0, 7)) == 7:
        kw["mask_type"] = 1
    return kw


def _delta_op(**kw: object) -> torch.Tensor:
    return torch.ops.mxrec.hstu_jagged.delta(**kw)


def _delta_budget(**kw: object) -> BudgetUse:
    q, off = kw["q"], kw["seq_offset"]
    sq, sk = int(kw["max_seq_len"]), int(kw["max_seq_len_k"])  # type: ignore[arg-type]
    rows = tile_rows(off.numel() - 1, q.size(1), sq, sk)  # type: ignore[union-attr]
    path = "context_targets" if kw.get("num_target") is not None else None
    return BudgetUse(op="mxrec::hstu_jagged.delta", path=path, units=-(-sq // rows))


SPECS = [
    OpSpec(
        name="hstu_jagged.equal",
        op=_op,
        inputs=_inputs(False),
        compare=Compare(TOL),
        budget=_budget,
        reference=hstu_jagged_reference,
        backward=True,
        grad_inputs=("q", "k", "v"),
    ),
    OpSpec(
        name="hstu_jagged.equal[bias]",
        op=_op,
        inputs=_inputs(True),
        compare=Compare(TOL),
        budget=_budget,
        reference=hstu_jagged_reference,
        backward=True,
        grad_inputs=("q", "k", "v", "attn_bias"),
    ),
    OpSpec(
        name="hstu_dense",
        op=_dense_op,
        inputs=_dense_inputs(),
        compare=Compare(TOL),
        budget=_dense_budget,
        reference=hstu_dense_reference,
        backward=True,
        grad_inputs=(0, 1, 2, 4),
    ),
    OpSpec(
        name="hstu_jagged.delta",
        op=_delta_op,
        inputs=_delta_inputs(),
        compare=Compare(TOL),
        budget=_delta_budget,
        reference=hstu_delta_reference,
        backward=True,
        grad_inputs=("q", "k", "v", "attn_bias"),
    ),
]
