"""Hostile-input fuzz of the hstu_varlen family (fbgemm_npu/native/fbgemm/hstu_varlen/):
FBGEMM's varlen HSTU attention, ``fbgemm::hstu_varlen_fwd_80`` / ``_bwd_80`` through
``fbgemm_npu.experimental.hstu.hstu_attn_varlen_func`` (programs: ``fbgemm_npu/testing/
hstu_varlen_fuzz.py``).

Valid input is drawn as the conformance specs draw it (``conformance/specs/fbgemm/
hstu_varlen/hstu_varlen.py``: causal with contexts / targets / groups, no mask, local windows,
``func`` masks, rab, seqused, scaling, GQA, float32 / float16 / bfloat16, int32 / int64 offsets,
the paged KV cache) and placed in drawn memory layouts; outputs, and for the non-paged forward
the gradients of q, k, v (and rab), equal the float64 reference at the specs' tolerances.  The
specs' invalid draws (rab heads that do not divide, a func of even n_func, targets with a local
window) and hostile metadata and data -- cu_seqlens broken every way, seqused past its segment
or negative, a max_seqlen below a sequence, wrong dtypes and ranks, non-tensors, tensors on
another device -- get an error naming the function or op and the argument (the data checks
are queued and read by the harness).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.specs.fbgemm.hstu_varlen.hstu_varlen import TOL, _inputs, _paged_inputs
from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import bad_offsets, in_layout, not_a_tensor

PROGRAM = "fbgemm_npu.testing.hstu_varlen_fuzz:"
OPS = ("hstu_attn_varlen_func", "hstu_varlen_fwd_80")
LAYOUTS = ("contiguous", "strided", "transposed", "offset")


def _invalid(kw: dict[str, Any]) -> tuple[str, ...]:
    """The argument the specs' invalid draws break (none: a valid call)."""
    h = kw["q"].size(1)
    if kw.get("rab") is not None and h % kw["rab"].size(1):
        return ("rab",)
    if kw.get("func") is not None and kw["func"].size(1) % 2 == 0:
        return ("func",)
    if kw.get("num_targets") is not None and kw.get("window_size", (-1, -1)) != (-1, 0):
        return ("num_targets", "window_size")
    return ()


def _case(kw: dict[str, Any], paged: bool, grad: bool, dtype: Any = None, **extra: Any) -> Case:
    tol = TOL[dtype or kw["q"].dtype]
    names = ("q", "k", "v", "rab") if kw.get("rab") is not None else ("q", "k", "v")
    return Case(
        PROGRAM + ("paged_forward" if paged else "forward"),
        (),
        kw,
        oracle=PROGRAM + ("paged_reference" if paged else "reference"),
        rtol=tol.rtol,
        atol=tol.atol,
        grad=names if grad and not paged else (),
        op_name=OPS,
        **extra,
    )


def _laid(data: Any, kw: dict[str, Any]) -> dict[str, Any]:
    for name in ("q", "k", "v"):
        kw[name] = in_layout(data, kw[name], LAYOUTS)
    return kw


@fuzz_test("hstu_varlen")
def test_fuzz_hstu_varlen_valid(data: Any) -> Case:
    """The specs' draws (forward and gradients; the paged cache forward only), any layout."""
    paged = data.draw(st.integers(0, 3), label="paged") == 0
    kw = data.draw(_paged_inputs() if paged else _inputs(), label="inputs")
    bad = _invalid(kw)
    if bad:
        return _case(kw, paged, False, expect="error", names=bad, label="invalid (spec)")
    kw = _laid(data, kw)
    grad = kw["q"].dtype == torch.float32 and data.draw(st.booleans(), label="grad")
    return _case(kw, paged, grad, label=f"valid {'paged' if paged else 'varlen'}")


def _break(data: Any, kw: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """One argument broken in a drawn way: (label, the names an error may give)."""
    how = data.draw(st.sampled_from(("cu_seqlens", "seqused", "max_seqlen", "dtype", "rank",
                                     "object", "device")), label="how")  # fmt: skip
    if how == "cu_seqlens":
        name = data.draw(st.sampled_from(("cu_seqlens_q", "cu_seqlens_k")), label="argument")
        total = kw["q" if name == "cu_seqlens_q" else "k"].size(0)
        kind, kw[name] = bad_offsets(data, kw[name], total)
        return f"{name} {kind}", (name, "query length", "max_seqlen_q", "max_seqlen_k")
    if how == "seqused":
        name = data.draw(st.sampled_from(("seqused_q", "seqused_k")), label="argument")
        cu = kw["cu_seqlens_q" if name == "seqused_q" else "cu_seqlens_k"]
        lengths = (cu[1:] - cu[:-1]).to(torch.int64)
        if data.draw(st.booleans(), label="negative"):
            lengths[0] = -1
        else:
            lengths[-1] += data.draw(st.integers(1, 3))
        kw[name] = lengths.to(cu.dtype)
        return f"{name} out of range", (name, "seqused_q", "seqused_k")
    if how == "max_seqlen":  # of the segments (seqused would shorten them)
        kw["seqused_q"] = kw["seqused_k"] = None
        cu = kw["cu_seqlens_k"]
        longest = int((cu[1:] - cu[:-1]).max()) if cu.numel() > 1 else 0
        if longest < 2:
            kw["max_seqlen_k"] = -1
        else:
            kw["max_seqlen_k"] = longest - 1
            kw["max_seqlen_q"] = min(kw["max_seqlen_q"], longest - 1)
        return "max_seqlen below a sequence", ("max_seqlen_q", "max_seqlen_k", "rab")
    name = data.draw(st.sampled_from(("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")))
    if how == "dtype":
        floats = name in ("q", "k", "v")
        bad = (torch.float64, torch.int32) if floats else (torch.float32, torch.int16)
        kw[name] = kw[name].to(data.draw(st.sampled_from(bad), label="dtype"))
    elif how == "rank":
        t = kw[name]
        kw[name] = t.flatten(1) if t.dim() == 3 else t.reshape(1, -1)
    elif how == "object":
        kw[name] = not_a_tensor(data)
    else:
        kw[name] = On(kw[name], data.draw(st.sampled_from(("cpu", "npu:1")), label="device"))
    return f"{how} {name}", (name,)


@fuzz_test("hstu_varlen")
def test_fuzz_hstu_varlen_invalid(data: Any) -> Case:
    """Broken metadata and data on a valid forward call: an error naming the argument."""
    kw = data.draw(_inputs(), label="inputs")
    if _invalid(kw):
        return _case(kw, False, False, expect="error", names=_invalid(kw), label="invalid (spec)")
    kw.pop("has_drab", None)
    dtype = kw["q"].dtype
    label, names = _break(data, kw)
    return _case(kw, False, False, dtype, expect="error", names=names, label=label)
