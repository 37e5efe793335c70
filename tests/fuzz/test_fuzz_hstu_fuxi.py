"""Hostile-input fuzz of the FuXi HSTU family (fbgemm_npu/native/mxrec/hstu_fuxi/):
``mxrec::hstu_fuxi`` (with its autograd) and ``mxrec::hstu_dense_backward_fuxi``.

Valid calls (jagged: 1-4 sequences of lengths 0-6, at least one row, ``seqOffset`` a host list
or tuple, ``maxSeqLen`` the longest plus 0-2; normal ``[B, S, N, D]``: B 1-3, S 1-6; N 1-3, D
1-8; maskType 0, 2 or 3 (a 0 / 1 mask; with 0 / 2 an unused NaN one); both biases
``timestampBias [B, S, S]``, ``positionBias [1, S, S]`` or none; siluScale 0 (= 1 / maxSeqLen)
or drawn; float32 / float16 / bfloat16; q, k, v, the biases, the mask and the gradient strided,
transposed, expanded or offset; NaN in the biases and the mask past the lengths; on npu:0, npu:1
or the CPU kernel; one call in three in query tiles of 1-3 rows) equal the float64 reference
(``conformance/specs/mxrec/hstu_fuxi/fuzz_oracles.py``: no upstream CPU kernel exists): the
forward, through autograd with the gradients of any of q, k, v and the biases, or the backward
op called directly with its own ``[T, N, C * D]`` gradient layout.  Tolerances as the
conformance spec states them per element (float32 1e-4, float16 1e-2, bfloat16 6e-2; the parity
tests' 1e-5 / 3e-3 / 2e-2 are relative to ``max |ref|``).  Everything else is a clear error
naming the op and the argument (on npu:0, npu:1 or the CPU): non-tensors, layouts, ranks,
dtypes, shapes (no GQA in FuXi), empty inputs, ``maxSeqLen`` out of ``[1, 20480]`` or not the
normal layout's S or shorter than a sequence, ``seqOffset`` of the wrong type or broken every
way (a host list: checked on the host), a batch past int32 with ``maxSeqLen``, mask types, mask
and bias shapes / dtypes, one bias alone, a tensor on another device, a gradient of the wrong
shape / dtype.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, seeded

FAMILY = "hstu_fuxi"
FWD, BWD = "mxrec::hstu_fuxi", "mxrec::hstu_dense_backward_fuxi"
REF = "conformance.specs.mxrec.hstu_fuxi.fuzz_oracles:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
QKV = ("q", "k", "v")
FWD_BIAS, BWD_BIAS = ("timestampBias", "positionBias"), ("biasTimestamp", "biasPosition")


def _draw(data: Any, backward: bool) -> tuple[dict, dict]:
    """Valid keyword arguments of one op and what they were drawn from."""
    gen = seeded(data)
    layout = "jagged" if backward else data.draw(st.sampled_from(("jagged", "normal")))
    if layout == "jagged":
        lengths = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=4), label="lengths")
        if sum(lengths) == 0:
            lengths[data.draw(st.integers(0, len(lengths) - 1))] = 1  # Rec SDK: q non-empty
        s = max(lengths) + data.draw(st.integers(0, 2))
    else:
        s = data.draw(st.integers(1, 6), label="S")
        lengths = [s] * data.draw(st.integers(1, 3), label="B")
    b, n, d = len(lengths), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 8))
    dtype = data.draw(st.sampled_from(FLOATS))
    off = [0]
    for length in lengths:
        off.append(off[-1] + length)
    lead = (off[-1],) if layout == "jagged" else (b, s)
    kw: dict = {
        "q": (0.5 * torch.randn(*lead, n, d, generator=gen)).to(dtype),
        "k": (0.5 * torch.randn(*lead, n, d, generator=gen)).to(dtype),
        "v": torch.randn(*lead, n, d, generator=gen).to(dtype),
    }
    names = BWD_BIAS if backward else FWD_BIAS
    bias = data.draw(st.booleans(), label="biases")
    if bias:
        kw[names[0]] = torch.rand(b, s, s, generator=gen).to(dtype)
        kw[names[1]] = torch.rand(1, s, s, generator=gen).to(dtype)
    kw["maskType"] = data.draw(st.sampled_from((0, 0, 2, 3)), label="maskType")
    if kw["maskType"] == 3:
        kw["mask"] = (torch.rand(b, n, s, s, generator=gen) > 0.3).to(dtype)
    elif data.draw(st.integers(0, 7), label="unused mask") == 0:  # Rec SDK: ignored, any values
        kw["mask"] = torch.full((b, n, s, s), float("nan"), dtype=dtype)
    kw.update(maxSeqLen=s, layout=layout)
    kw["siluScale"] = data.draw(st.sampled_from((0.0, 0.0, 0.25, -0.5)), label="siluScale")
    if layout == "jagged":
        kw["seqOffset"] = off if data.draw(st.booleans(), label="list") else tuple(off)
    for name, t in list(kw.items()):
        if isinstance(t, torch.Tensor) and t.size(0) > 1:
            if data.draw(st.integers(0, 7), label=f"{name} same rows") == 0:
                kw[name] = t[:1].expand(t.shape).clone()  # equal along dim 0: may be expanded
    if layout == "jagged" and data.draw(st.integers(0, 3), label="garbage") == 0:
        _garbage(kw, lengths)
    if backward:
        g = torch.randn(off[-1], n, (3 if bias else 1) * d, generator=gen).to(dtype)
        kw = {"grad": g, **kw}
    kw = {k: in_layout(data, t) if isinstance(t, torch.Tensor) else t for k, t in kw.items()}
    meta = {"B": b, "S": s, "N": n, "D": d, "dtype": dtype, "bias": bias, "names": names}
    meta.update(layout=layout, off=off, op=BWD if backward else FWD)
    return kw, meta


def _garbage(kw: dict, lengths: list[int]) -> None:
    """NaN in the biases and the mask past each sequence's ``[L, L]`` (the position bias: past
    the longest), where the ops must not read (uninitialised memory may hold anything)."""
    nan = float("nan")
    for name in (*FWD_BIAS, *BWD_BIAS, "mask"):
        t = kw.get(name)
        for b in range(0 if t is None else t.size(0)):
            n = max(lengths) if t.size(0) == 1 else lengths[b]
            t[b, ..., n:, :] = nan
            t[b, ..., :, n:] = nan


def _placed(data: Any, kw: dict) -> tuple[dict, str]:
    """Every tensor on npu:0 (the default), npu:1 or the CPU (our CPU kernel)."""
    where = data.draw(st.sampled_from(("npu:0", "npu:0", "npu:1", "cpu")), label="device")
    if where == "npu:0":
        return kw, ""
    return {n: On(t, where) if isinstance(t, torch.Tensor) else t for n, t in kw.items()}, where


def _valid_case(data: Any, kw: dict, meta: dict, label: str) -> Case:
    backward = meta["op"] == BWD
    tol = TOL[meta["dtype"]]
    grad: tuple = ()
    if not backward and data.draw(st.booleans(), label="autograd"):
        leaves = (*QKV, *FWD_BIAS) if meta["bias"] else QKV
        grad = tuple(data.draw(st.lists(st.sampled_from(leaves), min_size=1, unique=True)))
        label += " autograd"
    oracle = REF + ("backward" if backward else "forward")
    case = Case(meta["op"], (), kw, oracle=oracle, grad=grad, label=label, rtol=tol, atol=tol)
    if data.draw(st.integers(0, 2), label="tiles") == 0:
        rows = data.draw(st.integers(1, 3), label="tile rows")
        channels = 3 if meta["bias"] else 1
        kw["tile_elements"] = meta["B"] * channels * meta["N"] * meta["S"] * rows
        case.target = REF + ("backward_in_tiles" if backward else "forward_in_tiles")
        case.op_name, case.label = meta["op"], label + " in tiles"
    return case


@fuzz_test(FAMILY)
def test_fuzz_hstu_fuxi_valid(data: Any) -> Case:
    """Both ops on valid input: layouts, mask types, biases, dtypes, memory layouts, devices,
    tiles; the forward's gradients through autograd."""
    backward = data.draw(st.integers(0, 2), label="backward op") == 0
    kw, meta = _draw(data, backward)
    kw, where = _placed(data, kw)
    label = f"valid {'backward' if backward else 'forward'} {meta['layout']} {where}".strip()
    return _valid_case(data, kw, meta, label)


SPOILS = (
    "object", "layout", "rank", "dtype", "mixed_dtype", "shape", "empty", "max_seq_len",
    "seq_offset_type", "seq_offset_data", "batch", "mask_type", "mask", "one_bias", "bias",
    "device", "grad",
)  # fmt: skip
OBJECTS = (3, 2.5, "values", [1, 2, 3], (0, 1), {"a": 1}, object())


def _bias_spoil(data: Any, kw: dict, meta: dict) -> tuple[str, ...]:
    b, s, dtype = meta["B"], meta["S"], meta["dtype"]
    ts, pos = meta["names"]
    name = data.draw(st.sampled_from((ts, pos)), label="bias")
    shapes = {ts: [b, s, s], pos: [1, s, s]}
    if not meta["bias"]:
        kw.update({n: torch.rand(shape).to(dtype) for n, shape in shapes.items()})
        if meta["op"] == BWD:  # the gradient of the three channels
            g = kw["grad"]
            kw["grad"] = torch.randn(g.size(0), g.size(1), 3 * g.size(2)).to(dtype)
    kind = data.draw(st.sampled_from(("shape", "dtype")))
    if kind == "dtype":
        to = data.draw(st.sampled_from([d for d in (*FLOATS, torch.int32) if d != dtype]))
        kw[name] = kw[name].to(to)
    else:
        shape = list(shapes[name])
        dim = data.draw(st.integers(0, 3))
        shape = shape[:dim] + [shape[dim] + 1] + shape[dim + 1 :] if dim < 3 else [*shape, 1]
        if name == pos and dim == 0 and b > 1 and data.draw(st.booleans()):
            shape = [b, s, s]  # a timestamp-shaped position bias
        kw[name] = torch.rand(shape).to(dtype)
    return (name,)


def _spoil(data: Any, kw: dict, meta: dict, how: str) -> tuple[str, ...] | None:
    """Break ``kw`` in place as ``how`` says; the argument names an error may give (None: ``how``
    does not apply to this call, which stays valid)."""
    op, b, s, n, dtype, jagged = (meta[x] for x in ("op", "B", "S", "N", "dtype", "layout"))
    jagged = jagged == "jagged"
    ts, pos = meta["names"]
    if how == "object":
        name = data.draw(st.sampled_from((*QKV, ts, pos, "mask")), label="argument")
        choices = (None, *OBJECTS) if name in QKV else OBJECTS
        kw[name] = data.draw(st.sampled_from(choices), label="not a tensor")
        return (name,)
    if how == "layout":
        bad = ("dense", "", "JAGGED", "normal" if op == BWD else "padded")
        kw["layout"] = data.draw(st.sampled_from(bad))
        return ("layout",)
    if how == "rank":
        name = data.draw(st.sampled_from(QKV))
        kw[name] = kw[name][..., 0] if data.draw(st.booleans()) else kw[name].unsqueeze(0)
        return (*QKV, "maxSeqLen")
    if how in ("dtype", "mixed_dtype"):
        name = data.draw(st.sampled_from(QKV))
        bad = (torch.float64, torch.int32, torch.int64, torch.bool, torch.uint8)
        to = data.draw(st.sampled_from(bad if how == "dtype" else FLOATS))
        if to == dtype:
            return None
        kw[name] = kw[name].to(to)
        return QKV
    if how == "shape":  # FuXi has no GQA and one head dim
        name = data.draw(st.sampled_from(("k", "v")))
        t = kw[name]
        dim = data.draw(st.integers(0, t.dim() - 1), label="dim")
        shape = list(t.shape)
        shape[dim] += 1
        kw[name] = torch.zeros(shape, dtype=dtype)
        return (name,)
    if how == "empty":
        dim = data.draw(st.integers(0, kw["q"].dim() - 1), label="dim")
        for name in QKV:
            kw[name] = kw[name].narrow(dim, 0, 0)
        if jagged and dim == 0:
            kw["seqOffset"] = [0] * (b + 1)
        return (*QKV, "seqOffset", "maxSeqLen")
    if how == "max_seq_len":
        longest = max(meta["off"][i + 1] - meta["off"][i] for i in range(b))
        short = longest - 1 if longest >= 2 else 0
        bad = (0, -1, 20481, 2**40, short) if jagged else (0, -1, 20481, s + 1, max(s - 1, 0))
        kw["maxSeqLen"] = data.draw(st.sampled_from(bad), label="maxSeqLen")
        return ("maxSeqLen", "seqOffset")  # a sequence longer than it names seqOffset
    if how == "seq_offset_type":
        if not jagged:
            return None
        off = meta["off"]
        bad = (None, torch.tensor(off), "0,1", [float(x) for x in off], [off], [*off[:-1], 2**63])
        kw["seqOffset"] = data.draw(st.sampled_from(bad), label="seqOffset")
        return ("seqOffset",)
    if how == "seq_offset_data":
        if not jagged:
            return None
        off = list(meta["off"])
        kind = data.draw(st.sampled_from(("short", "from", "end", "decreasing", "negative")))
        if kind == "short":
            off = off[:1] if data.draw(st.booleans()) else []
        elif kind == "from":
            off[0] = data.draw(st.integers(1, 2**40))
        elif kind == "end":
            off[-1] += data.draw(st.sampled_from((1, -1, 2**31, 2**62)))
        elif kind == "decreasing" and b > 1:
            i = data.draw(st.integers(1, b - 1))
            off[i] = off[i + 1] + 1
        else:
            off[data.draw(st.integers(1, b))] = -data.draw(st.integers(1, 2**40))
        kw["seqOffset"] = off
        return ("seqOffset",)
    if how == "batch":  # B x maxSeqLen past int32: one row, 2**31 // S + 1 sequences
        if not jagged:
            return None
        s_big = data.draw(st.sampled_from((20480, 16384)))
        kw["seqOffset"] = [0] * (2**31 // s_big + 1) + [1]
        kw.update(maxSeqLen=s_big, maskType=0)
        kw["q"], kw["k"], kw["v"] = (kw[x][:1] for x in QKV)
        for name in (ts, pos, "mask", "grad"):
            kw.pop(name, None)
        if op == BWD:
            kw["grad"] = torch.zeros(1, n, meta["D"], dtype=dtype)
        return ("maxSeqLen", "seqOffset", "batch")
    if how == "mask_type":
        kw["maskType"] = data.draw(st.sampled_from((1, 4, -1, 10)))
        return ("maskType",)
    if how == "mask":
        kw["maskType"] = 3
        kind = data.draw(st.sampled_from(("none", "shape", "dtype")))
        if kind == "none":
            kw.pop("mask", None)
        elif kind == "dtype":
            to = data.draw(st.sampled_from([d for d in (*FLOATS, torch.bool) if d != dtype]))
            kw["mask"] = torch.ones(b, n, s, s, dtype=to)
        else:
            shape = [b, n, s, s]
            dim = data.draw(st.integers(0, 4))
            shape = shape[:dim] + [shape[dim] + 1] + shape[dim + 1 :] if dim < 4 else shape[1:]
            kw["mask"] = torch.ones(shape, dtype=dtype)
        return ("mask",)
    if how == "one_bias":
        name = data.draw(st.sampled_from((ts, pos)))
        other = pos if name == ts else ts
        kw.pop(other, None)
        kw[name] = torch.rand([b, s, s] if name == ts else [1, s, s]).to(dtype)
        return (name, other)
    if how == "bias":
        return _bias_spoil(data, kw, meta)
    if how == "device":
        used = [x for x, t in kw.items() if isinstance(t, torch.Tensor)]
        if kw["maskType"] != 3 and "mask" in used:
            used.remove("mask")  # an unused mask is not read, nor checked (Rec SDK ignores it)
        name = data.draw(st.sampled_from(used), label="argument")
        kw[name] = On(kw[name], data.draw(st.sampled_from(("cpu", "npu:1"))))
        return (name, "q")
    assert how == "grad"
    if op != BWD:
        return None
    g = kw["grad"]
    kind = data.draw(st.sampled_from(("channels", "rows", "rank", "dtype")))
    if kind == "channels":  # [T, N, D] with the biases, [T, N, 3D] without
        width = g.size(2) // 3 if meta["bias"] else 3 * g.size(2)
        kw["grad"] = torch.randn(g.size(0), g.size(1), width).to(dtype)
    elif kind == "rows":
        kw["grad"] = torch.randn(g.size(0) + 1, *g.shape[1:]).to(dtype)
    elif kind == "rank":
        kw["grad"] = g.unsqueeze(0)
    else:
        kw["grad"] = g.to(data.draw(st.sampled_from([d for d in FLOATS if d != dtype])))
    return ("grad",)


@fuzz_test(FAMILY)
def test_fuzz_hstu_fuxi_invalid(data: Any) -> Case:
    """One argument broken; a clear error naming the op and the argument."""
    backward = data.draw(st.booleans(), label="backward op")
    kw, meta = _draw(data, backward)
    how = data.draw(st.sampled_from(SPOILS), label="spoil")
    names = _spoil(data, kw, meta, how)
    if names is None:  # nothing to break: the call stays valid
        return _valid_case(data, kw, meta, "valid (unspoiled)")
    if how != "device":  # the CPU kernel and npu:1 refuse the same way
        kw, _ = _placed(data, kw)
    return Case(meta["op"], (), kw, expect="error", names=names, label=f"invalid {how}")
