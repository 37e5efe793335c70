"""Hostile-input fuzz of the HSTU family (fbgemm_npu/native/mxrec/hstu/): ``mxrec::hstu_jagged``
``.equal`` / ``.delta``, ``mxrec::hstu_dense`` and their backwards.

Valid calls (1-4 sequences of lengths 0-6, empty and full ones, ``max_seq_len`` the longest plus
0-2 or 0 = read back; delta q lengths 0..L_k; GQA ratios 1-3, ``D_qk != D_v``, mask types 0 / 2 / 3,
context and targets with ``num_context + num_target < L``, group sizes 0-3, alpha, silu_scale,
a bias; float32 / float16 / bfloat16, int32 / int64 offsets; q, k, v and the bias strided,
transposed, expanded or offset; on npu:0, npu:1 or the CPU kernel) equal the float64 references
(``conformance/specs/mxrec/hstu/fuzz_oracles.py``: no upstream CPU kernel exists), the forward
through autograd with the gradients of q, k, v and the bias, or the backward op called directly.
Tolerances as the conformance specs state them (float32 1e-4, float16 1e-2, bfloat16 6e-2).
Everything else is a clear error naming the op and the argument: non-tensors, ranks, head counts
and dims that do not fit, dtypes, offsets broken every way (queued checks), lengths past
``max_seq_len``, huge ``max_seq_len``, mask / bias shapes and dtypes, mask types, counts negative,
past int32 or beyond the sequence, a tensor on another device, a gradient of the wrong shape.
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

FAMILY = "hstu"
REF = "conformance.specs.mxrec.hstu.fuzz_oracles:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
OPS = {
    "jagged": ("mxrec::hstu_jagged.equal", "mxrec::hstu_jagged_backward.equal"),
    "delta": ("mxrec::hstu_jagged.delta", "mxrec::hstu_jagged_backward.delta"),
    "dense": ("mxrec::hstu_dense", "mxrec::hstu_dense_backward"),
}
QKV = ("q", "k", "v")
OPTIONAL = ("mask", "attn_bias", "num_context", "num_target")


def _heads(data: Any) -> tuple[int, int, int, int]:
    nk, ratio = data.draw(st.integers(1, 2)), data.draw(st.sampled_from((1, 2, 3)))
    return nk * ratio, nk, data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))


def _qkv(data: Any, gen: torch.Generator, lead_q: tuple, lead_k: tuple, meta: dict) -> dict:
    nq, nk, dqk, dv = meta["heads"]
    dtype = meta["dtype"]
    q = (0.5 * torch.randn(*lead_q, nq, dqk, generator=gen)).to(dtype)
    k = (0.5 * torch.randn(*lead_k, nk, dqk, generator=gen)).to(dtype)
    v = torch.randn(*lead_k, nk, dv, generator=gen).to(dtype)
    return {n: in_layout(data, t) for n, t in zip(QKV, (q, k, v), strict=True)}


def _masks(data: Any, gen: torch.Generator, kw: dict, meta: dict) -> None:
    """mask_type, the custom mask and the bias ``[B, N_q, S_q, S_k]``, silu_scale."""
    b, s, sk, dtype = meta["B"], meta["S"], meta["S_k"], meta["dtype"]
    kw["mask_type"] = data.draw(st.sampled_from((0, 0, 2, 3)), label="mask_type")
    if kw["mask_type"] == 3:
        kw["mask"] = in_layout(
            data, (torch.rand(b, meta["heads"][0], s, sk, generator=gen) > 0.3).to(dtype)
        )
    if data.draw(st.booleans(), label="bias"):
        bias = 0.5 * torch.randn(b, meta["heads"][0], s, sk, generator=gen)
        kw["attn_bias"] = in_layout(data, bias.to(dtype))
    kw["silu_scale"] = data.draw(st.sampled_from((0.0, 0.0, 0.25)), label="silu_scale")


def _counts(data: Any, kw: dict, lengths: list[int]) -> None:
    """num_context / num_target per sequence with ``n_c + n_t < L``, a group size, alpha."""
    which = data.draw(st.sampled_from(("none", "both", "context", "target")), label="counts")
    odt = data.draw(st.sampled_from((torch.int32, torch.int64)))
    # n_c + n_t < L where a count is given (the rule), 0 + 0 on empty sequences
    nc = [
        data.draw(st.integers(0, max(n - 1, 0))) if which in ("both", "context") else 0
        for n in lengths
    ]
    nt = [
        data.draw(st.integers(0, max(n - c - 1, 0))) if which in ("both", "target") else 0
        for n, c in zip(lengths, nc, strict=True)
    ]
    if which in ("both", "context"):
        kw["num_context"] = torch.tensor(nc, dtype=odt)
    if which in ("both", "target"):
        kw["num_target"] = torch.tensor(nt, dtype=odt)
    kw["target_group_size"] = data.draw(st.sampled_from((0, 1, 2, 3, None)), label="group")
    kw["alpha"] = data.draw(st.sampled_from((1.0, 0.5, 2.0, None)), label="alpha")


def _jagged(data: Any, form: str) -> tuple[dict, dict]:
    """Valid keyword arguments of ``form`` ("jagged" / "delta") and what they were drawn from."""
    gen = seeded(data)
    lk = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=4), label="lengths")
    lq = [data.draw(st.integers(0, n)) for n in lk] if form == "delta" else lk
    extra, read_back = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 3)) == 0
    s_q, s_k = (0, 0) if read_back else (max(max(lq), 1) + extra, max(max(lk), 1) + extra)
    meta = {
        "B": len(lk),
        "lq": lq,
        "lk": lk,
        "dtype": data.draw(st.sampled_from(FLOATS)),
        "form": form,
    }
    meta.update(heads=_heads(data), S=s_q or max(max(lq), 1), S_k=s_k or max(max(lk), 1))
    if form == "jagged":
        meta["S_k"] = meta["S"]
    odt = data.draw(st.sampled_from((torch.int32, torch.int64)), label="offsets dtype")
    kw = _qkv(data, gen, (sum(lq),), (sum(lk),), meta)
    kw.update(max_seq_len=s_q, seq_offset=lengths_to_offsets(torch.tensor(lq), odt))
    if form == "delta":
        kw.update(max_seq_len_k=s_k, seq_offset_k=lengths_to_offsets(torch.tensor(lk), odt))
    _masks(data, gen, kw, meta)
    _counts(data, kw, lq)
    return kw, meta


def _dense(data: Any) -> tuple[dict, dict]:
    gen = seeded(data)
    b, s = data.draw(st.integers(0, 3), label="B"), data.draw(st.integers(0, 6), label="S")
    meta = {"B": b, "S": s, "S_k": s, "dtype": data.draw(st.sampled_from(FLOATS)), "form": "dense"}
    meta["heads"] = _heads(data)
    kw = _qkv(data, gen, (b, s), (b, s), meta)
    kw["max_seq_len"] = data.draw(st.sampled_from((0, s)), label="max_seq_len")
    _masks(data, gen, kw, meta)
    kw.setdefault("mask", None)  # the backward's schema has no default for them
    kw.setdefault("attn_bias", None)
    return kw, meta


def _placed(data: Any, kw: dict) -> tuple[dict, str]:
    """Every tensor on npu:0 (the default), npu:1 or the CPU (our CPU kernel)."""
    where = data.draw(st.sampled_from(("npu:0", "npu:0", "npu:1", "cpu")), label="device")
    if where == "npu:0":
        return kw, ""
    return {
        n: On(t, where) if isinstance(t, torch.Tensor) else t for n, t in kw.items()
    }, f" on {where}"


def _valid(data: Any, kw: dict, meta: dict) -> Case:
    form, dtype = meta["form"], meta["dtype"]
    fwd, bwd = OPS[form]
    tol = {"rtol": TOL[dtype], "atol": TOL[dtype]}
    if data.draw(st.integers(0, 2), label="backward op") == 0:
        nq, dv = meta["heads"][0], meta["heads"][3]
        rows = (meta["B"], meta["S"]) if form == "dense" else (sum(meta["lq"]),)
        g = torch.randn(*rows, nq, dv, generator=seeded(data)).to(dtype)
        kw = {"grad": in_layout(data, g), **kw}
        kw, where = _placed(data, kw)
        return Case(
            bwd, (), kw, oracle=f"{REF}{form}_backward", label=f"valid backward{where}", **tol
        )
    grad: tuple = ()
    if data.draw(st.booleans(), label="autograd"):
        grad = (*QKV, "attn_bias") if kw.get("attn_bias") is not None else QKV
    kw, where = _placed(data, kw)
    label = f"valid {'autograd' if grad else 'forward'}{where}"
    return Case(fwd, (), kw, oracle=REF + form, grad=grad, label=label, **tol)


@fuzz_test(FAMILY)
def test_fuzz_hstu_jagged_valid(data: Any) -> Case:
    """hstu_jagged.equal and its backward on valid input, every option and layout."""
    return _valid(data, *_jagged(data, "jagged"))


@fuzz_test(FAMILY)
def test_fuzz_hstu_delta_valid(data: Any) -> Case:
    """hstu_jagged.delta (q lengths 0..L_k, aligned to the end of k) and its backward."""
    return _valid(data, *_jagged(data, "delta"))


@fuzz_test(FAMILY)
def test_fuzz_hstu_dense_valid(data: Any) -> Case:
    """hstu_dense and its backward (B and S from 0)."""
    return _valid(data, *_dense(data))


SPOILS = (
    "object", "rank", "heads", "v_heads", "no_heads", "head_dim", "rows", "dtype", "mixed_dtype",
    "offsets_dtype", "offsets_shape", "offsets_data", "too_long", "negative_len", "huge",
    "mask_type", "no_mask", "mask_shape", "mask_dtype", "bias_shape", "bias_dtype",
    "counts_data", "counts_meta", "group", "device", "grad", "k_offsets",
)  # fmt: skip


def _spoil(data: Any, kw: dict, meta: dict, how: str) -> tuple[str, ...] | None:
    """Break ``kw`` in place as ``how`` says; the argument names an error may give (None: ``how``
    does not apply to this op)."""
    form, b, nq = meta["form"], meta["B"], meta["heads"][0]
    arg = data.draw(st.sampled_from(QKV), label="which of q, k, v")
    offsets = "seq_offset" if form != "delta" or data.draw(st.booleans()) else "seq_offset_k"
    if how == "object":
        extra = OPTIONAL[:2] if form == "dense" else (offsets, *OPTIONAL)
        name = data.draw(st.sampled_from((*QKV, *extra)), label="argument")
        value = not_a_tensor(data)
        if value is None and name in OPTIONAL:
            return None  # None is an optional argument's default
        kw[name] = value
        return (name,)
    if how == "rank":
        kw[arg] = kw[arg][..., 0] if data.draw(st.booleans()) else kw[arg].unsqueeze(-1)
        return QKV
    if how in ("heads", "v_heads"):
        n = nq + 1 if how == "heads" else meta["heads"][1] + 1
        for name in ("k", "v") if how == "heads" else ("v",):
            kw[name] = torch.zeros(*kw[name].shape[:-2], n, kw[name].size(-1), dtype=meta["dtype"])
        return ("k", "v")
    if how == "no_heads":
        kw["q"] = kw["q"][..., :0, :]
        return ("q",)
    if how == "head_dim":
        kw["k"] = torch.cat([kw["k"], kw["k"][..., :1]], -1)
        return ("k",)
    if how == "rows":  # k of another leading size than q's and v's
        k = kw["k"]
        kw["k"] = torch.cat([k, torch.zeros(1, *k.shape[1:], dtype=k.dtype)])
        return ("k", "v")
    if how in ("dtype", "mixed_dtype"):
        bad = (torch.float64, torch.int32, torch.bool, torch.int64, torch.uint8)
        to = data.draw(st.sampled_from(bad if how == "dtype" else FLOATS))
        if to == meta["dtype"]:
            return None
        kw[arg] = kw[arg].to(to)
        return (arg, "dtype")
    if form == "dense" and how.startswith(("offsets", "counts", "k_off", "too_long", "group")):
        return None
    if how == "offsets_dtype":
        kw[offsets] = kw[offsets].to(
            data.draw(st.sampled_from((torch.float32, torch.bool, torch.int16)))
        )
        return (offsets,)
    if how == "offsets_shape":
        o = kw[offsets]
        kw[offsets] = data.draw(st.sampled_from((o.view(1, -1), o[:1], o[0], o[:0])))
        return (offsets,)
    if how == "offsets_data":
        rows = "q" if offsets == "seq_offset" else "k"
        kw[offsets] = bad_offsets(data, kw[offsets], kw[rows].size(0))[1]
        return (offsets,)
    if how in ("too_long", "negative_len", "huge"):
        name = "max_seq_len" if offsets == "seq_offset" else "max_seq_len_k"
        longest = 0 if form == "dense" else max(meta["lq" if name == "max_seq_len" else "lk"])
        if how == "too_long" and longest < 2:
            return None  # longest - 1 = 0 reads the longest back: valid
        value = {"too_long": longest - 1, "negative_len": -1}.get(how)
        kw[name] = value if value is not None else data.draw(st.sampled_from((2**20, 2**31, 2**40)))
        return (name, "max_seq_len", "mask", "attn_bias")  # their shapes follow it
    if how == "mask_type":
        kw["mask_type"] = data.draw(st.sampled_from((1, 4, -1)))
        return ("mask_type",)
    if how == "no_mask":
        kw.update(mask_type=3, mask=None)
        return ("mask",)
    name = "mask" if how.startswith("mask") else "attn_bias"
    if how in ("mask_shape", "mask_dtype", "bias_shape", "bias_dtype"):
        if kw.get(name) is None or (name == "mask" and kw["mask_type"] != 3):
            return None
        if how.endswith("dtype"):
            kw[name] = kw[name].to(
                data.draw(st.sampled_from((torch.bool, torch.float64, torch.int32)))
            )
        else:
            dim = data.draw(st.integers(0, 3))
            kw[name] = (
                torch.cat([kw[name], kw[name].narrow(dim, 0, 1)], dim)
                if kw[name].size(dim)
                else kw[name].unsqueeze(0)
            )
        return (name,)
    if how == "counts_data":
        counts = [c for c in ("num_context", "num_target") if kw.get(c) is not None]
        if not counts:
            return None
        c = data.draw(st.sampled_from(counts))
        t = kw[c].clone().to(torch.int64)
        i = data.draw(st.integers(0, b - 1))
        beyond = meta["lk"][i] + 1  # past L (delta: past L_k, which is >= L_q)
        t[i] = data.draw(st.sampled_from((-1, beyond, 2**31, 2**32 + int(t[i]), -(2**40))))
        kw[c] = t  # int64: values past int32 must not wrap into range on their way in
        return ("num_context", "num_target")
    if how == "counts_meta":
        c = data.draw(st.sampled_from(("num_context", "num_target")))
        base = torch.zeros(b, dtype=torch.int32)
        kw[c] = data.draw(
            st.sampled_from(
                (base.float(), base.bool(), base.view(1, -1), torch.zeros(b + 1, dtype=torch.int32))
            )
        )
        return (c,)
    if how == "group":
        kw["target_group_size"] = -data.draw(st.integers(1, 3))
        return ("target_group_size",)
    if how == "device":
        used = [
            n
            for n, t in kw.items()
            if isinstance(t, torch.Tensor)
            and (n != "mask" or kw["mask_type"] == 3)
            # the jagged backwards' grad on another device: an unclear error from a cat (the
            # kernels' file; test_hstu_errors.py holds it, xfail) -- dense's is checked
            and (n != "grad" or form == "dense")
        ]
        name = data.draw(st.sampled_from(used))
        kw[name] = On(kw[name], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return (name,)
    if how == "grad" or how == "k_offsets":
        return None  # handled by the caller (the backward op) / delta only
    raise AssertionError(how)


def _invalid(data: Any, kw: dict, meta: dict) -> Case:
    form = meta["form"]
    fwd, bwd = OPS[form]
    how = data.draw(st.sampled_from(SPOILS), label="spoil")
    backward = how == "grad" or data.draw(st.integers(0, 3), label="backward op") == 0
    if backward:
        nq, dv = meta["heads"][0], meta["heads"][3]
        rows = (meta["B"], meta["S"]) if form == "dense" else (sum(meta["lq"]),)
        kw = {"grad": torch.randn(*rows, nq, dv).to(meta["dtype"]), **kw}
        kw.pop("deterministic", None)
    op = bwd if backward else fwd
    if how == "grad":
        kw["grad"] = data.draw(
            st.sampled_from((kw["grad"][..., :0], kw["grad"].double(), kw["grad"].unsqueeze(0)))
        )
        return Case(op, (), kw, expect="error", names=("grad",), label="grad")
    if how == "k_offsets" and form == "delta":
        o = kw["seq_offset_k"]
        kw["seq_offset_k"] = torch.cat([o, o[-1:]]) if data.draw(st.booleans()) else o[:-1]
        return Case(op, (), kw, expect="error", names=("seq_offset_k",), label=how)
    names = _spoil(data, kw, meta, how)
    if names is None:  # nothing to break: the call stays valid
        return Case(
            op,
            (),
            kw,
            oracle=REF + form + ("_backward" if backward else ""),
            label="valid (unspoiled)",
            rtol=TOL[meta["dtype"]],
            atol=TOL[meta["dtype"]],
        )
    return Case(op, (), kw, expect="error", names=names, label=how)


@fuzz_test(FAMILY)
def test_fuzz_hstu_jagged_invalid(data: Any) -> Case:
    """hstu_jagged.equal / .delta (and backwards) with one argument broken."""
    return _invalid(data, *_jagged(data, data.draw(st.sampled_from(("jagged", "delta")))))


@fuzz_test(FAMILY)
def test_fuzz_hstu_dense_invalid(data: Any) -> Case:
    """hstu_dense (and its backward) with one argument broken."""
    return _invalid(data, *_dense(data))
