"""Specs of ``mxrec::disentangle_attention`` (forward and autograd) and
``mxrec::disentangle_attention_backward``.

No upstream CPU kernel exists (the CPU kernel is ours), so every value is checked against the
float64 reference of ``reference.py`` (Rec SDK's golden written out; the backward by float64
autograd of it); the CPU side gives the error behaviour, shapes and dtypes.  Inputs as Rec SDK's
test draws them (``fbgemm_npu/testing/disentangle_inputs.py``: uniform [-1, 1], DeBERTa's
relative positions, optionally log-bucketed, a 0 / -65504 mask with every row keeping a key,
Rec SDK's score scale), any ``b, n <= 3``, ``s <= 9``, ``d <= 8``, the three pos_attr_types,
both mask ranks, every relative_pos rank, int32 / int64 positions; positions far out of range
(clamped by contract) one time in four; one invalid example in ten (a pos_attr_type, a dtype, a
shape).  Spec names ``<op>[dtype]`` (the harness keys tolerances by output dtype).

Tolerances (measured at s in {1, 7, 256}, d = 32 against float64, then doubled or more):
forward float32 2e-5; float16 Rec SDK's own 1e-3 / 1e-3 (measured worst 0.53 of it: the
masked weights -65504 + x round to a 32-wide float16 grid, 2.4e-4 relative); bfloat16 1e-2.
Gradients sum up to ``s`` rounded products of unit-sized gradients: float32 2e-5, float16
5e-3, bfloat16 5e-2 (measured worst 2.4e-3 and 2.0e-2).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.mxrec.disentangle.reference import backward_reference, forward_reference
from fbgemm_npu.testing.disentangle_inputs import disentangle_inputs, score_scale

M = torch.ops.mxrec
TYPES = ("c2p", "p2c", "c2p|p2c")
NAMES = ("query_layer", "key_layer", "value_layer", "pos_key_layer", "pos_query_layer",
         "relative_pos", "attn_mask")  # fmt: skip
FWD_TOL = {torch.float32: 2e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}
BWD_TOL = {torch.float32: 2e-5, torch.float16: 5e-3, torch.bfloat16: 5e-2}


def _tol(table: dict, dtype: torch.dtype) -> dict:
    return {dtype: Tol(rtol=table[dtype], atol=table[dtype])}


@st.composite
def forward_inputs(draw: st.DrawFn, dtype: torch.dtype, valid: bool = False) -> dict:
    b, n, s, d = (draw(st.integers(lo, hi)) for lo, hi in ((0, 3), (1, 3), (1, 9), (1, 8)))
    kind = draw(st.sampled_from(TYPES))
    buckets = draw(st.sampled_from((None, (4, 16))))
    a = disentangle_inputs(
        b, n, s, d, dtype, seed=draw(st.integers(0, 2**16)),
        mask_dims=draw(st.sampled_from((3, 4))), rel_dims=draw(st.sampled_from((2, 3, 4))),
        rel_dtype=draw(st.sampled_from((torch.int64, torch.int32))), buckets=buckets,
    )  # fmt: skip
    if draw(st.integers(0, 3)) == 3:  # far out of range: clamped into the 2s columns
        a[5] = a[5] * 1000
    kw: dict = dict(zip(NAMES, a, strict=True))
    kw.update(pos_attr_type=kind, score_scale=score_scale(kind, d))
    bad = -1 if valid else draw(st.integers(0, 9))
    if bad == 9:
        kw["pos_attr_type"] = draw(st.sampled_from(("c2p|", "P2C", "p2c|c2p", "")))
    elif bad == 8:
        kw["attn_mask"] = kw["attn_mask"].double()
    elif bad == 7:
        kw["pos_key_layer"] = kw["pos_key_layer"][1:]
    return kw


@st.composite
def backward_inputs(draw: st.DrawFn, dtype: torch.dtype) -> dict:
    kw = draw(forward_inputs(dtype, valid=True))
    b, n, s, d = kw["query_layer"].shape
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    shapes = ((b, n, s, d), (b, n, s, s), (b, n, s, s))
    grads = [torch.randn(sh, generator=gen).to(dtype) for sh in shapes]
    given = draw(st.sampled_from(((1, 0, 0), (1, 1, 1), (0, 1, 0), (0, 0, 1), (1, 0, 1))))
    names = ("grad_attn_output", "grad_attn_probs", "grad_attn_weights")
    out = {k: g if keep else None for k, g, keep in zip(names, grads, given, strict=True)}
    keep_mask = draw(st.booleans())
    if not keep_mask:  # the backward's mask is read for its shape: without one, a 0 mask
        kw["attn_mask"] = torch.zeros_like(kw["attn_mask"])
    probs = forward_reference(*(kw[k] for k in NAMES), kw["pos_attr_type"], kw["score_scale"])[1]
    out.update({k: kw[k] for k in NAMES[:6]})
    out["attn_mask"] = kw["attn_mask"] if keep_mask else None
    out.update(attn_probs=probs.to(dtype), pos_attr_type=kw["pos_attr_type"],
               score_scale=kw["score_scale"])  # fmt: skip
    return out


def _fwd_path(relative_pos, pos_attr_type, **_: object) -> str | None:
    int32 = "int32" if relative_pos.dtype == torch.int32 else ""
    if pos_attr_type != "c2p|p2c":
        return "one_term" + ("_" + int32 if int32 else "")
    return int32 or None


def _bwd_path(relative_pos, pos_attr_type, attn_mask, **kw: object) -> str | None:
    extra = [kw["grad_attn_probs"] is not None and kw["grad_attn_output"] is not None,
             kw["grad_attn_weights"] is not None, attn_mask is not None,
             relative_pos.dtype == torch.int32]  # fmt: skip
    if pos_attr_type != "c2p|p2c" or any(extra):
        return "all_grads"  # each path held exactly by the budget tests; here the largest
    return None


def _bwd_budget(**kw: object) -> BudgetUse:
    return BudgetUse(op="mxrec::disentangle_attention_backward", path=_bwd_path(**kw))


def _specs(dtype: torch.dtype) -> list[OpSpec]:
    suffix = "" if dtype == torch.float32 else f"[{str(dtype)[6:]}]"
    fwd = lambda **kw: BudgetUse(op="mxrec::disentangle_attention", path=_fwd_path(**kw))  # noqa: E731
    return [
        OpSpec(
            name="disentangle_attention" + suffix,
            op=lambda **kw: M.disentangle_attention(**kw),
            inputs=forward_inputs(dtype),
            compare=Compare(_tol(FWD_TOL, dtype)),
            budget=fwd,
            reference=forward_reference,
        ),
        OpSpec(
            name="disentangle_attention[autograd]" + suffix,
            op=lambda **kw: M.disentangle_attention(**kw),
            inputs=forward_inputs(dtype, valid=True),
            compare=Compare(_tol(BWD_TOL, dtype)),
            budget=fwd,
            reference=forward_reference,
            backward=True,
            grad_inputs=NAMES[:5] + ("attn_mask",),
        ),
        OpSpec(
            name="disentangle_attention_backward" + suffix,
            op=lambda **kw: M.disentangle_attention_backward(**kw),
            inputs=backward_inputs(dtype),
            compare=Compare(_tol(BWD_TOL, dtype)),
            budget=_bwd_budget,
            reference=backward_reference,
        ),
    ]


SPECS = [*_specs(torch.float32), *_specs(torch.float16), *_specs(torch.bfloat16)]
