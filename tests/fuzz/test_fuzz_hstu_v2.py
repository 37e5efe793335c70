"""Hostile-input fuzz of the HSTU v2 family (fbgemm_npu/native/mxrec/hstu_v2/):
``mxrec::hstu_forward_v2`` and ``mxrec::hstu_backward_v2``.

Valid calls (1-4 batches of k lengths 0-6 and q lengths 0..L_k, empty and full ones, max lengths
the longest plus 0-2; GQA ratios 1-2, ``D_qk != D_v``; one mask rule: a window, causal with
context and targets ``n_c + n_t < L_q`` and group sizes 1-3, arbitrary intervals (1-2 pairs,
any order, past the keys), and in the forward mask_type 2 / 3; rab, alpha, scale (0 / None:
1 / max_seqlen_q); float32 / float16 / bfloat16, int32 / int64 offsets; q, k, v and rab strided,
transposed, expanded or offset; on npu:0, npu:1 or the CPU kernel) equal the float64 reference
(``conformance/specs/mxrec/hstu_v2/fuzz_oracles.py``), the forward through autograd with the
gradients of q, k, v and rab, or the backward op called directly.  Tolerances as the conformance
spec states them.  Everything else is a clear error naming the op and the argument:
non-tensors, dtypes (float8 in tests/mxrec/hstu_v2: the worker cannot unpickle it), head
counts, window sizes, rules that do not combine, arbitrary_func's shape / dtype, rab's shape,
sizes, offsets broken every way (queued checks), counts past the sequence, a tensor on another
device, a gradient of the wrong shape.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    bad_offsets,
    in_layout,
    lengths_to_offsets,
    not_a_tensor,
    seeded,
)

FAMILY = "hstu_v2"
REF = "conformance.specs.mxrec.hstu_v2.fuzz_oracles:"
FWD, BWD = "mxrec::hstu_forward_v2", "mxrec::hstu_backward_v2"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
WINDOWS = ((-1, 0), (-1, -1), (2, 0), (1, 1), (0, 3))


def _draw(data: Any, backward: bool) -> tuple[dict, dict]:
    """Valid keyword arguments of one op and what they were drawn from."""
    gen = seeded(data)
    lk = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=4), label="k lengths")
    lq = [data.draw(st.integers(0, n)) for n in lk]
    extra = data.draw(st.integers(0, 2))
    b, sq, sk = len(lk), max(max(lq), 1) + extra, max(max(lk), 1) + extra
    nk, ratio = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    nq, dqk, dv = nk * ratio, data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))
    dtype = data.draw(st.sampled_from(FLOATS))
    odt = data.draw(st.sampled_from((torch.int32, torch.int64)), label="offsets dtype")
    kw: dict = {
        "q": in_layout(data, (0.5 * torch.randn(sum(lq), nq, dqk, generator=gen)).to(dtype)),
        "k": in_layout(data, (0.5 * torch.randn(sum(lk), nk, dqk, generator=gen)).to(dtype)),
        "v": in_layout(data, torch.randn(sum(lk), nk, dv, generator=gen).to(dtype)),
    }
    names = ("max_seqlen_q", "max_seqlen_k", "seq_offset_q", "seq_offset_k", "scale")
    if not backward:
        names = ("max_seq_len", "max_seq_len_k", "seq_offset", "seq_offset_k", "silu_scale")
    kw.update(dict(zip(names[:2], (sq, sk), strict=True)))
    kw[names[2]] = lengths_to_offsets(torch.tensor(lq), odt)
    kw[names[3]] = lengths_to_offsets(torch.tensor(lk), odt)
    kw[names[4]] = data.draw(st.sampled_from((0.0, None, 0.25)), label="scale")
    kw["alpha"] = data.draw(st.sampled_from((1.0, 0.5, None)), label="alpha")
    if data.draw(st.booleans(), label="rab"):
        kw["rab"] = in_layout(data, (0.5 * torch.randn(b, nq, sq, sk, generator=gen)).to(dtype))
    rule = data.draw(st.sampled_from(("window", "counts", "arbitrary", "mask_type")))
    left, right = data.draw(st.sampled_from(WINDOWS), label="window")
    if rule == "counts":
        nt = [data.draw(st.integers(0, max(n - 1, 0))) for n in lq]
        nc = [data.draw(st.integers(0, max(n - 1 - t, 0))) for n, t in zip(lq, nt, strict=True)]
        kw.update(num_context=torch.tensor(nc, dtype=odt), num_target=torch.tensor(nt, dtype=odt))
        kw["target_group_size"] = data.draw(st.integers(1, 3), label="group")
        left, right = -1, 0
    elif rule == "arbitrary":
        pairs = data.draw(st.integers(1, 2), label="pairs")
        heads = data.draw(st.sampled_from((1, nq)), label="interval heads")
        af = torch.randint(0, sk + 2, (b, heads, sq, 2 * pairs), generator=gen, dtype=torch.int32)
        kw["arbitrary_func"] = af
        left, right = -1, -1
    elif rule == "mask_type" and not backward:
        kw["mask_type"] = data.draw(st.sampled_from((2, 3)), label="mask_type")
        if kw["mask_type"] == 3:
            kw["mask"] = (torch.rand(b, nq, sq, sk, generator=gen) > 0.3).to(dtype)
        left = right = None
    if backward:
        kw["window_size_left"], kw["window_size_right"] = (
            (-1, -1) if left is None else (left, right)
        )
    elif left is not None and (rule != "arbitrary" or data.draw(st.booleans())):
        kw["window_size_left"], kw["window_size_right"] = left, right
    if backward:
        g = torch.randn(sum(lq), nq, dv, generator=gen).to(dtype)
        kw = {"grad": in_layout(data, g), **kw}
    return kw, {"dtype": dtype, "names": names, "b": b, "sq": sq, "sk": sk, "nq": nq}


def _placed(data: Any, kw: dict) -> tuple[dict, str]:
    """Every tensor on npu:0 (the default), npu:1 or the CPU (our CPU kernel)."""
    where = data.draw(st.sampled_from(("npu:0", "npu:0", "npu:1", "cpu")), label="device")
    if where == "npu:0":
        return kw, ""
    return {n: On(t, where) if isinstance(t, torch.Tensor) else t for n, t in kw.items()}, where


@fuzz_test(FAMILY)
def test_fuzz_hstu_v2_valid(data: Any) -> Case:
    """Both ops on valid input, every rule, dtype, layout and device; the forward's gradients."""
    backward = data.draw(st.integers(0, 2), label="backward op") == 0
    kw, meta = _draw(data, backward)
    tol = {"rtol": TOL[meta["dtype"]], "atol": TOL[meta["dtype"]]}
    grad: tuple = ()
    if not backward and data.draw(st.booleans(), label="autograd"):
        grad = ("q", "k", "v", "rab") if "rab" in kw else ("q", "k", "v")
    kw, where = _placed(data, kw)
    op, oracle = (BWD, REF + "backward") if backward else (FWD, REF + "forward")
    label = f"valid {'backward' if backward else 'autograd' if grad else 'forward'} {where}"
    return Case(op, (), kw, oracle=oracle, grad=grad, label=label.strip(), **tol)


SPOILS = (
    "object", "dtype", "heads", "window", "rules", "intervals", "rab", "sizes",
    "offsets", "counts", "device", "grad",
)  # fmt: skip


def _spoil(data: Any, kw: dict, meta: dict, how: str, op: str) -> tuple[str, ...]:
    """Break ``kw`` as ``how`` says; the argument names an error may give."""
    names, b, sq, sk, nq = meta["names"], meta["b"], meta["sq"], meta["sk"], meta["nq"]
    if how == "object":
        # the forward's seq_offset_k may be None (it defaults to seq_offset): not drawn there
        choices = ("q", "k", "v", names[2], *((names[3],) if op == BWD else ()))
        name = data.draw(st.sampled_from(choices), label="argument")
        kw[name] = not_a_tensor(data)
        return (name,)
    if how == "dtype":  # float8 is refused too (tests/mxrec/hstu_v2): the worker cannot unpickle it
        name = data.draw(st.sampled_from(("q", "k", "v")), label="argument")
        to = data.draw(st.sampled_from((torch.int32, torch.float64, torch.bool, torch.uint8)))
        kw[name] = kw[name].to(to)
        return ("q", "k", "v", "grad")
    if how == "heads":
        kw["k"] = torch.randn(kw["k"].size(0), nq + 1, kw["q"].size(2)).to(kw["q"].dtype)
        return ("k",)
    if how == "window":
        side = data.draw(st.sampled_from(("window_size_left", "window_size_right")))
        kw.pop("mask_type", None), kw.pop("arbitrary_func", None)
        kw.pop("num_context", None), kw.pop("num_target", None)
        kw[side] = data.draw(st.integers(-50, -2), label="window size")
        return (side,)
    if how == "rules":  # counts with a window that is not causal, or intervals with counts
        kw.pop("mask_type", None)
        kw["num_context"] = torch.zeros(b, dtype=torch.int32)
        kw["target_group_size"] = 1
        if data.draw(st.booleans(), label="with intervals"):
            kw["arbitrary_func"] = torch.zeros(b, 1, sq, 2, dtype=torch.int32)
            return ("arbitrary_func", "num_context", "window_size")
        kw.pop("arbitrary_func", None)
        kw["window_size_left"], kw["window_size_right"] = 1, 1
        return ("num_context",)
    if how == "intervals":
        kw.pop("num_context", None), kw.pop("num_target", None), kw.pop("mask_type", None)
        kw["window_size_left"] = kw["window_size_right"] = -1
        shape = data.draw(st.sampled_from(((b, 1, sq, 3), (b, 1, sq + 1, 2), (b + 1, 1, sq, 2))))
        dt = data.draw(st.sampled_from((torch.int32, torch.int64, torch.float32)))
        if dt == torch.int32 and shape == (b, 1, sq, 2):
            dt = torch.int64
        kw["arbitrary_func"] = torch.zeros(shape, dtype=dt)
        return ("arbitrary_func",)
    if how == "rab":
        kw["rab"] = torch.randn(b, nq, sq, sk + 1).to(kw["q"].dtype)
        return ("rab",)
    if how == "sizes":
        name = data.draw(st.sampled_from(names[:2]), label="size")
        kw[name] = data.draw(st.sampled_from((0, -3, 20481, 10**9)), label="bad size")
        return (name,)
    if how == "offsets":
        name = data.draw(st.sampled_from(names[2:4]), label="offsets")
        total = kw["q" if name == names[2] else "k"].size(0)
        _, kw[name] = bad_offsets(data, kw[name], total)
        return (name, "max_seq_len", "max_seqlen", "k length", "seq_offset")
    if how == "counts":
        kw.pop("mask_type", None), kw.pop("arbitrary_func", None)
        kw["window_size_left"], kw["window_size_right"] = -1, 0
        lq = torch.diff(kw[names[2]].to(torch.int64))
        kw["num_context"] = lq.clamp_min(1).to(torch.int32)  # n_c = L_q: no room left
        kw["num_target"] = torch.zeros(b, dtype=torch.int32)
        kw["target_group_size"] = 1
        return ("num_context",)
    if how == "device":
        name = data.draw(st.sampled_from((names[2], "k", "v", "rab")), label="argument")
        if name == "rab" and "rab" not in kw:
            kw["rab"] = torch.randn(b, nq, sq, sk).to(kw["q"].dtype)
        kw[name] = On(kw[name], "cpu")
        return (name, "q")
    assert how == "grad" and op == BWD
    kw["grad"] = torch.randn(kw["q"].size(0) + 1, nq, kw["v"].size(2)).to(kw["q"].dtype)
    return ("grad",)


@fuzz_test(FAMILY)
def test_fuzz_hstu_v2_invalid(data: Any) -> Case:
    """One argument broken; a clear error naming the op and the argument."""
    backward = data.draw(st.booleans(), label="backward op")
    kw, meta = _draw(data, backward)
    how = data.draw(st.sampled_from(SPOILS if backward else SPOILS[:-1]), label="how")
    op = BWD if backward else FWD
    names = _spoil(data, kw, meta, how, op)
    return Case(op, (), kw, expect="error", names=names, label=f"invalid {how}")
