"""Hostile-input fuzz of the bucketize family (fbgemm_npu/native/fbgemm/bucketize/).

Valid calls of the four ops, every argument combination (``sequence``, ``bucketize_pos``,
weights 1-D and 2-D, ``keep_orig_idx`` and its per-feature flags, ``total_num_blocks``,
``block_bucketize_pos``, VBE batch sizes and ``max_B``, ``my_size`` powers of two and not, int32
/ int64, indices at the dtype's ends, every layout, a second device) equal upstream's CPU kernel
(or, where upstream CPU writes out of bounds or leaves an output uninitialised, the references of
``fbgemm_npu/testing/bucketize_references.py``).  Everything else gets a clear error naming the op
and the argument: negative, wrapping or miscounted lengths and batch sizes, negative or
overflowing block sizes, bad ``total_num_blocks``, unsorted boundaries, wrong dtypes and counts,
objects and ``None``, ``my_size`` below 1 or too large to allocate, mixed devices.  Inputs come
from ``fbgemm_npu/testing/bucketize_fuzz.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.bucketize_fuzz import (
    BLOCK,
    BLOCK_2D,
    CYCLIC,
    INDEX,
    INFERENCE,
    W1D,
    W2D,
    block_kwargs,
    cyclic_kwargs,
    layouts,
)
from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import other_dtype, seeded

BLOCK_OPS = (BLOCK, INFERENCE, BLOCK_2D)
OBJECTS = st.sampled_from([3, 2.5, "values", [1, 2, 3], (0, 1), {"a": 1}, object()])
I32, I64 = torch.int32, torch.int64


def _pick(data: Any, options: list[str], label: str) -> str:
    return data.draw(st.sampled_from(options), label=label)


def _wrap(values: list[int], dtype: torch.dtype) -> list[int] | None:
    """``values`` changed so that their sum wraps around ``dtype`` back to the same value, each
    entry staying non-negative (two at the dtype's max, a third taking up the rest); ``None``
    with fewer than three entries."""
    if len(values) < 3:
        return None
    top, v = torch.iinfo(dtype).max, list(values)
    v[2] += v[0] + v[1] + 2
    v[0] = v[1] = top
    return v


def _spoil_counts(data: Any, kw: dict[str, Any], arg: str) -> str | None:
    """Make ``kw[arg]`` (lengths or VBE batch sizes) negative, miscounted or wrapping; the label
    (``None``: not possible for this input)."""
    t = kw[arg]
    v = [int(a) for a in t.reshape(-1).tolist()]
    how = _pick(data, ["negative", "sum", "wrap"], arg)
    wrapped = _wrap(v, t.dtype)
    how = "negative" if how == "wrap" and wrapped is None else how
    if how == "wrap" and wrapped is not None:
        v = wrapped
    elif how == "sum" and v:
        i = data.draw(st.integers(0, len(v) - 1))
        v[i] = v[i] + data.draw(st.integers(1, 5)) if v[i] == 0 or data.draw(st.booleans()) else 0
    elif v:
        i, j = data.draw(st.integers(0, len(v) - 1)), data.draw(st.integers(0, len(v) - 1))
        k, old = data.draw(st.integers(1, 2**20)), v[i]
        v[i] = -k
        if i != j:
            v[j] += old + k  # the sum still matches: only the sign is wrong
    else:
        return None
    kw[arg] = torch.tensor(v, dtype=t.dtype).view(t.shape)
    return f"{arg} {how}"


def _spoil_data(data: Any, kw: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """One data error (only the values show it): the label and the argument to name."""
    uniform = not kw.get("block_bucketize_pos")
    options = ["lengths", "lengths"]
    options += ["batch_size_per_feature"] if "batch_size_per_feature" in kw else []
    options += ["block_sizes", "block_sizes"] if uniform else ["block_bucketize_pos"]
    options += ["total_num_blocks"] if "total_num_blocks" in kw else []
    arg = _pick(data, options, "broken")
    if arg in ("lengths", "batch_size_per_feature"):
        label = _spoil_counts(data, kw, arg)
        return None if label is None else (label, (arg,))
    p, blocks = kw["my_size"], kw["block_sizes"].clone()
    top, t = torch.iinfo(blocks.dtype).max, data.draw(st.integers(0, blocks.numel() - 1))
    if arg == "block_sizes":
        total = kw.get("total_num_blocks")
        g = p if total is None else int(total[t])
        if data.draw(st.booleans()):
            blocks[t] = -data.draw(st.integers(1, 2**30))
            label = "block_sizes negative"
        else:  # block_sizes * G past the dtype (upstream: a signed overflow)
            past = top // g + 1 + data.draw(st.integers(0, 2**20))
            if past > top:  # G = 1: no block size overflows
                return None
            blocks[t] = past
            label = "block_sizes * G overflows"
        kw["block_sizes"] = blocks
        return label, ("block_sizes",)
    if arg == "total_num_blocks":
        total = kw["total_num_blocks"].clone()
        zero_blocks = [i for i, b in enumerate(blocks.tolist()) if b == 0]
        if not uniform:  # only a 0 block size reads it
            if not zero_blocks:
                return None
            t = zero_blocks[0]
        bad = [0, -p * data.draw(st.integers(1, 3))]
        bad += [int(total[t]) + data.draw(st.integers(1, p - 1))] if uniform and p > 1 else []
        top = torch.iinfo(total.dtype).max
        total[t] = data.draw(st.sampled_from([v for v in bad if v <= top]))
        kw["total_num_blocks"] = total
        return "total_num_blocks", ("total_num_blocks",)
    pos = list(kw["block_bucketize_pos"])
    if pos[t].numel() >= 2 and int(pos[t][0]) != int(pos[t][-1]):
        pos[t] = pos[t].flip(0)  # decreasing (in unsigned order too: first and last swapped)
    else:
        pos[t] = torch.tensor([5, 1], dtype=pos[t].dtype)
    kw["block_bucketize_pos"] = pos
    return "boundaries unsorted", ("block_bucketize_pos",)


def _tensor_args(kw: dict[str, Any]) -> list[str]:
    """The tensor arguments of a call (boundaries: the list)."""
    names = [k for k, v in kw.items() if isinstance(v, torch.Tensor)]
    return names + (["block_bucketize_pos"] if kw.get("block_bucketize_pos") else [])


def _allowed(op: str, arg: str) -> tuple[torch.dtype, ...]:
    if arg == "keep_orig_idx_per_feature":
        return (torch.bool,)
    if arg == "weights":
        return W2D if op == BLOCK_2D else W1D
    return INDEX


def _grown(t: torch.Tensor, shrink: bool) -> torch.Tensor:
    """``t`` flat with one element less (``shrink``, where it has one) or one more."""
    flat = t.reshape(-1)
    return flat[:-1] if shrink and flat.numel() else torch.cat([flat, flat.new_zeros(1)])


def _count(data: Any, kw: dict[str, Any], arg: str) -> tuple[str, str] | None:
    """A tensor (or the boundary list) with a wrong element count: (label, expect)."""
    n_feat = kw["block_sizes"].numel()
    vbe = "batch_size_per_feature" in kw
    shrink = data.draw(st.booleans(), label="shrink")
    if arg == "block_bucketize_pos":
        pos, k = kw[arg], data.draw(st.integers(0, len(kw[arg]) - 1))
        if data.draw(st.booleans()):
            kw[arg] = pos[:-1] if shrink else [*pos, pos[0]]
            # one feature shrunk to no list: upstream reads [] as omitted (uniform blocks)
            return "boundary count", "error" if kw[arg] else "equal"
        kw[arg] = [*pos[:k], pos[k][:0], *pos[k + 1 :]]
        return "boundaries empty", "error"
    if arg == "block_sizes":  # no features (with rows: no features and no rows is valid)
        rows = kw["lengths"].numel()
        shrink = shrink and rows > 0
        kw[arg] = kw[arg][:0] if shrink else _grown(kw[arg], False)
        sized = vbe or any(k in kw for k in ("total_num_blocks", "keep_orig_idx_per_feature"))
        fits = not shrink and not sized and not kw.get("block_bucketize_pos")
        return "block_sizes count", "equal" if fits and rows % (n_feat + 1) == 0 else "error"
    if arg == "lengths":  # one more row, of length 0: the sum is unchanged
        if not vbe and n_feat == 1:
            return None
        kw[arg] = _grown(kw[arg], False)
        return "lengths count", "error"
    if arg == "indices" and "weights" in kw and data.draw(st.booleans()):
        arg = "weights"
    if arg == "weights" and "weights_dim" in kw and data.draw(st.booleans()):
        dim = kw["weights_dim"]
        kw["weights_dim"] = data.draw(st.sampled_from([dim + 1, dim - 1, -1, 2**40]))
        fits = kw["indices"].numel() == 0 and kw["weights_dim"] >= 0  # 0 * dim elements
        return "weights_dim", "equal_or_error" if fits else "error"
    kw[arg] = _grown(kw[arg], shrink)
    return f"{arg} count", "error"


def _spoil_argument(
    data: Any, op: str, kw: dict[str, Any]
) -> tuple[str, tuple[str, ...], str] | None:
    """One metadata error: (label, arguments the error may name, expect)."""
    how = _pick(data, ["dtype", "mismatch", "object", "count", "my_size", "device"], "how")
    names = _tensor_args(kw)
    arg = _pick(data, names, "argument")
    pos = kw.get("block_bucketize_pos") or []
    k = data.draw(st.integers(0, max(len(pos) - 1, 0)), label="k")
    t = pos[k] if arg == "block_bucketize_pos" else kw[arg]
    if how == "object":
        required = arg in ("lengths", "indices", "block_sizes") or (op, arg) == (
            BLOCK_2D,
            "weights",
        )
        obj = data.draw(st.one_of(OBJECTS, st.just(None)) if required else OBJECTS)
        inside = arg == "block_bucketize_pos" and data.draw(st.booleans())
        kw[arg] = [*pos[:k], obj, *pos[k + 1 :]] if inside else obj
        return f"object for {arg}", (arg,), "error"
    if how == "my_size":
        kw["my_size"] = data.draw(st.sampled_from([0, -1, -(2**40), 2**42, 2**62, 2**63 - 1]))
        ok = kw["my_size"] > 0 and kw["lengths"].numel() == 0  # nothing to allocate
        return "my_size", ("my_size",), "equal_or_error" if ok else "error"
    if how == "count":
        got = _count(data, kw, arg)
        if got is None:
            return None
        names = {"block_sizes": ("block_sizes", "lengths"), "indices": ("indices", "weights")}
        return got[0], names.get(arg, (arg,)), got[1]
    expect = "error"
    if how == "dtype":
        moved: Any = t.to(other_dtype(data, _allowed(op, arg)))
    elif how == "mismatch":  # the other index dtype: lengths alone may differ
        if t.dtype not in INDEX:
            return None
        moved = t.to(I64 if t.dtype == I32 else I32)
        if arg == "lengths" and "batch_size_per_feature" not in kw:
            expect = "equal"
    else:
        where = _pick(data, ["cpu", "npu:1"], "device")
        if data.draw(st.integers(0, 3)) == 0:  # every tensor on npu:1: a valid call
            for name in names:
                v = kw[name]
                kw[name] = [On(p, "npu:1") for p in v] if isinstance(v, list) else On(v, "npu:1")
            return "all on npu:1", (), "equal"
        moved = On(t, where)
    if arg == "block_bucketize_pos":
        kw[arg] = [*pos[:k], moved, *pos[k + 1 :]]
    else:
        kw[arg] = moved
    return f"{how} {arg}", (arg,), expect


@fuzz_test("bucketize")
def test_fuzz_block_bucketize_valid(data: Any) -> Case:
    """Valid calls of the three block ops, every option and layout."""
    op = data.draw(st.sampled_from(BLOCK_OPS), label="op")
    kw, oracle = block_kwargs(data, op, seeded(data))
    label = "valid" if oracle is None else f"valid ({oracle.rpartition(':')[2]})"
    return Case(op, (), layouts(data, kw), oracle=oracle, label=label)


@fuzz_test("bucketize")
def test_fuzz_block_bucketize_data_errors(data: Any) -> Case:
    """Lengths, batch sizes, block sizes, total_num_blocks and boundaries only the data shows
    to be wrong: one device assert names the argument."""
    op = data.draw(st.sampled_from(BLOCK_OPS), label="op")
    kw, oracle = block_kwargs(data, op, seeded(data))
    spoiled = _spoil_data(data, kw)
    if spoiled is None:
        return Case(op, (), kw, oracle=oracle, label="valid (nothing to spoil)")
    label, names = spoiled
    return Case(op, (), layouts(data, kw), expect="error", names=names, label=label)


@fuzz_test("bucketize")
def test_fuzz_block_bucketize_argument_errors(data: Any) -> Case:
    """Dtypes, objects and None, element counts, my_size, devices."""
    op = data.draw(st.sampled_from(BLOCK_OPS), label="op")
    kw, oracle = block_kwargs(data, op, seeded(data))
    kw = layouts(data, kw)
    spoiled = _spoil_argument(data, op, kw)
    if spoiled is None:
        return Case(op, (), kw, oracle=oracle, label="valid (nothing to spoil)")
    label, names, expect = spoiled
    return Case(op, (), kw, expect=expect, names=names, oracle=oracle, label=label)


@fuzz_test("bucketize")
def test_fuzz_bucketize_sparse_features(data: Any) -> Case:
    """The cyclic op: valid calls, and each way to get its arguments wrong."""
    g = seeded(data)
    kw = cyclic_kwargs(data, g)
    how = _pick(
        data, ["valid", "valid", "data", "dtype", "object", "count", "my_size", "device"], "how"
    )
    if how == "valid":
        return Case(CYCLIC, (), layouts(data, kw), label="valid")
    if how == "data":
        label = _spoil_counts(data, kw, "lengths")
        if label is None:
            return Case(CYCLIC, (), kw, label="valid (nothing to spoil)")
        return Case(CYCLIC, (), layouts(data, kw), expect="error", names=("lengths",), label=label)
    names = _tensor_args(kw)
    arg = _pick(data, names, "argument")
    expect = "error"
    if how == "dtype":
        allowed = (torch.float32,) if arg == "weights" else INDEX
        if arg != "weights" and data.draw(st.booleans()):  # the other index dtype
            kw[arg] = kw[arg].to(I64 if kw[arg].dtype == I32 else I32)
        else:
            kw[arg] = kw[arg].to(other_dtype(data, allowed))
    elif how == "object":
        kw[arg] = data.draw(st.one_of(OBJECTS, st.just(None)) if arg != "weights" else OBJECTS)
    elif how == "count":  # weights or indices one element off (lengths may grow freely)
        arg = "weights" if "weights" in kw and data.draw(st.booleans()) else "indices"
        kw[arg] = _grown(kw[arg], data.draw(st.booleans()))
    elif how == "my_size":
        arg = "my_size"
        kw[arg] = data.draw(st.sampled_from([0, -1, -(2**40), 2**42, 2**62, 2**63 - 1]))
        if kw[arg] > 0 and kw["lengths"].numel() == 0:
            expect = "equal_or_error"
    else:  # one tensor on the CPU or npu:1, or every tensor on npu:1 (valid)
        every = data.draw(st.integers(0, 3)) == 0
        where = "npu:1" if every else _pick(data, ["cpu", "npu:1"], "device")
        for name in names if every else [arg]:
            kw[name] = On(kw[name], where)
        expect = "equal" if every else "error"
    return Case(CYCLIC, (), kw, expect=expect, names=(arg,), label=f"{how} {arg}")
