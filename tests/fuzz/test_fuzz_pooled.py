"""Hostile-input fuzz of the pooled family (fbgemm_npu/native/fbgemm/pooled/).

Valid calls in every layout (strided, transposed, stride 0, storage offsets), dtype and size (an
empty batch included), on npu:0 or npu:1, equal upstream's CPU kernels, gradients included
where upstream has autograd; where upstream leaves memory uninitialised (input columns no
output reads) or reads rows ours reads too but differently shaped, the references of
``fbgemm_npu/testing/pooled_inputs.py`` judge.  The cross-device ops run on inputs spread over
npu:0, npu:1 (and the CPU, refused), and must put every output on ``target_device`` without
aliasing an input.  Every hostile category of the issue gets a clear error naming the op and the
argument: permutes that are not permutations, out-of-range / negative rows and cut points,
decreasing offsets, widths that disagree, wrong dtypes, wrong ranks, None and objects, empty
lists, mixed devices, unknown keys, targets that do not exist, sizes that cannot be allocated.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    ALL_DTYPES,
    in_layout,
    not_a_tensor,
    other_dtype,
    seeded,
)

FAMILY = "pooled"
F = torch.ops.fbgemm
REF = "fbgemm_npu.testing.pooled_inputs:"
POOLED_OPS = (
    "permute_pooled_embs",
    "permute_pooled_embs_split",
    "permute_pooled_embs_auto_grad",
    "permute_pooled_embs_auto_grad_split",
)
MULTI_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALF_GRAD = {"rtol": 2e-2, "atol": 2e-2}  # sums of repeated reads in a half type


def _values(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        return (torch.randint(-64, 64, shape, generator=gen) / 8).to(dtype)
    return torch.randint(-100, 100, shape, generator=gen).to(dtype)


def _pooled_call(data: Any) -> dict[str, Any]:
    """PermutePooledEmbeddings' arguments: blocks of drawn widths, a permutation of them."""
    gen = seeded(data)
    dims = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=5), label="block widths")
    batch = data.draw(st.integers(0, 4), label="B")
    perm = torch.randperm(len(dims), generator=gen)
    offsets = torch.tensor([0, *torch.tensor(dims).cumsum(0).tolist()])
    inv_offsets = torch.tensor([0, *torch.tensor(dims)[perm].cumsum(0).tolist()])
    dtype = data.draw(st.sampled_from(ALL_DTYPES), label="dtype")
    extra = data.draw(st.sampled_from(((), (), (2,))), label="trailing dims")
    x = _values(gen, (batch, sum(dims), *extra), dtype)
    return {
        "pooled_embs": x,
        "offset_dim_list": offsets,
        "permute_list": perm,
        "inv_offset_dim_list": inv_offsets,
        "inv_permute_list": torch.argsort(perm),
    }


@fuzz_test(FAMILY)
def test_fuzz_permute_pooled_embs_valid(data: Any) -> Case:
    """The four permute_pooled_embs ops on valid lists, any dtype and layout, on npu:0 or npu:1;
    gradients of the auto_grad ones."""
    op = data.draw(st.sampled_from(POOLED_OPS), label="op")
    call = {k: in_layout(data, v) for k, v in _pooled_call(data).items()}
    x = call["pooled_embs"]
    grad = ("pooled_embs",) if "auto_grad" in op and x.is_floating_point() and x.numel() else ()
    if data.draw(st.integers(0, 4), label="device") == 0:
        call = {k: On(v, "npu:1") for k, v in call.items()}
    return Case(f"fbgemm::{op}", (), call, grad=grad, label=f"valid {x.dtype}")


POOLED_HOSTILE = (
    "not a permutation",
    "cut points",
    "offsets too short",
    "empty permute_list",
    "dtype",
    "not a tensor",
    "rank",
    "mixed devices",
)


@fuzz_test(FAMILY)
def test_fuzz_permute_pooled_embs_hostile(data: Any) -> Case:
    """One hostile argument in an otherwise valid permute_pooled_embs call."""
    op = data.draw(st.sampled_from(POOLED_OPS), label="op")
    how = data.draw(st.sampled_from(POOLED_HOSTILE), label="hostile")
    call = _pooled_call(data)
    if call["pooled_embs"].numel() == 0:  # upstream returns an empty input unchecked
        call["pooled_embs"] = torch.ones(2, int(call["offset_dim_list"][-1]) + 1)
    err: dict[str, Any] = {"expect": "error", "label": how}
    target = f"fbgemm::{op}"
    perm = call["permute_list"]
    if how == "not a permutation":
        if perm.numel() < 2 and data.draw(st.booleans()):
            call["permute_list"] = torch.tensor([1])
        else:
            bad = perm.clone()
            k = data.draw(st.integers(0, bad.numel() - 1))
            repeat = bad[(k + 1) % bad.numel()] if bad.numel() > 1 else bad.numel()
            bad[k] = data.draw(st.sampled_from((repeat, -1, bad.numel(), 2**40)))
            call["permute_list"] = in_layout(data, bad)
        return Case(target, (), call, names=("permute_list",), **err)
    if how == "cut points":
        if perm.numel() < 2:
            call = _two_blocks(call)
        off = call["offset_dim_list"].clone()
        k = data.draw(st.integers(1, call["permute_list"].numel() - 1))
        off[k] = data.draw(st.sampled_from((-1, -(2**40), int(off[k - 1]) - 1)))
        if k > 1 and int(off[k]) >= int(off[k - 1]):
            off[k] = off[k - 1] - 1  # decreasing
        if k == 1 and int(off[1]) >= 0:
            off[1] = -1
        call["offset_dim_list"] = in_layout(data, off)
        return Case(target, (), call, names=("offset_dim_list",), **err)
    if how == "offsets too short":
        call["offset_dim_list"] = call["offset_dim_list"][: perm.numel() - 1]
        return Case(target, (), call, names=("offset_dim_list",), **err)
    if how == "empty permute_list":
        call["permute_list"] = perm[:0]
        return Case(target, (), call, names=("permute_list",), **err)
    if how == "dtype":
        arg = data.draw(st.sampled_from(("offset_dim_list", "permute_list")), label="arg")
        call[arg] = call[arg].to(other_dtype(data, (torch.int64,)))
        return Case(target, (), call, names=(arg,), **err)
    if how == "not a tensor":
        arg = data.draw(st.sampled_from(tuple(call)), label="arg")
        call[arg] = not_a_tensor(data)
        return Case(target, (), call, names=(arg,), **err)
    if how == "rank":
        call["pooled_embs"] = call["pooled_embs"].reshape(-1)
        return Case(target, (), call, names=("pooled_embs",), **err)
    arg = data.draw(st.sampled_from(tuple(call)), label="arg")
    call[arg] = On(call[arg], data.draw(st.sampled_from(("cpu", "npu:1"))))
    return Case(target, (), call, names=tuple(call), **err)


def _two_blocks(call: dict[str, Any]) -> dict[str, Any]:
    x = call["pooled_embs"]
    w = max(x.shape[1], 2)
    return {
        "pooled_embs": torch.ones(max(x.shape[0], 1), w, dtype=x.dtype),
        "offset_dim_list": torch.tensor([0, 1, w]),
        "permute_list": torch.tensor([1, 0]),
        "inv_offset_dim_list": torch.tensor([0, w - 1, w]),
        "inv_permute_list": torch.tensor([1, 0]),
    }


# --- KeyedTensor regrouping -------------------------------------------------------------------


def _keyed(data: Any, cover: bool) -> dict[str, Any]:
    """Keys of 1-3 inputs, their widths, groups of them (repeats across and within groups);
    ``cover``: every key in some group (no input column left unread)."""
    n_in = data.draw(st.integers(1, 3), label="inputs")
    keys = [[f"k{i}_{j}" for j in range(data.draw(st.integers(1, 3)))] for i in range(n_in)]
    lengths = [[data.draw(st.integers(0, 3)) for _ in ks] for ks in keys]
    flat = [k for ks in keys for k in ks]
    n_groups = data.draw(st.integers(1, 3), label="groups")
    groups = [
        data.draw(st.lists(st.sampled_from(flat), min_size=1, max_size=4)) for _ in range(n_groups)
    ]
    if cover:
        missing = [k for k in flat if not any(k in g for g in groups)]
        groups[-1] = groups[-1] + missing
    return {"keys": keys, "lengths": lengths, "groups": groups}


def _embs(data: Any, lengths: list[list[int]], exact: bool) -> list[torch.Tensor]:
    """One input per key list, of the keys' total width (``exact``) or wider, in layouts."""
    gen = seeded(data)
    batch = data.draw(st.integers(0 if exact else 1, 4), label="B")
    dtype = data.draw(st.sampled_from(MULTI_DTYPES), label="dtype")
    out = []
    for ls in lengths:
        width = sum(ls) + (0 if exact else data.draw(st.sampled_from((0, 0, 2)), label="extra"))
        out.append(in_layout(data, _values(gen, (batch, width), dtype)))
    return out


@fuzz_test(FAMILY)
def test_fuzz_regroup_valid(data: Any) -> Case:
    """permute_multi_embedding (gradients too), permute_multi_embedding_function (forward and
    reverse), regroup_keyed_tensor (gradients too) and kt_regroup_arguments on valid keys."""
    op = data.draw(
        st.sampled_from(
            ("permute_multi_embedding", "function", "reverse", "regroup", "kt_regroup_arguments")
        ),
        label="op",
    )
    upstream = data.draw(st.booleans(), label="upstream judges")  # else the reference
    k = _keyed(data, cover=upstream or op == "reverse")
    embs = _embs(data, k["lengths"], exact=upstream or op == "reverse")
    args = (k["keys"], k["lengths"], k["groups"])
    if op == "kt_regroup_arguments":
        return Case("fbgemm::kt_regroup_arguments", (embs[0], *args), label="valid")
    grad = (0,) if embs[0].numel() and op in ("permute_multi_embedding", "regroup") else ()
    sums = bool(grad) or op == "reverse"  # repeated keys add up: half types round
    tol = HALF_GRAD if sums and embs[0].dtype != torch.float32 else {}
    on = data.draw(st.integers(0, 4), label="device") == 0
    placed = [On(t, "npu:1") for t in embs] if on else embs
    label = f"valid {op}" + (" on npu:1" if on else "")
    if op == "regroup":
        oracle = None if upstream else REF + "regroup_reference"
        return Case(
            "fbgemm::regroup_keyed_tensor",
            (placed, *args),
            grad=grad,
            oracle=oracle,
            label=label,
            **tol,
        )
    permutes, in_shapes, out_shapes, out_lengths = F.kt_regroup_arguments(embs[0], *args)
    tensors = [permutes, in_shapes, out_shapes]
    if on:
        tensors = [On(t, "npu:1") for t in tensors]
    oracle = None if upstream else REF + "multi_reference"
    if op == "reverse":
        gen = seeded(data)
        grads = [_values(gen, (embs[0].shape[0], n), embs[0].dtype) for n in out_lengths]
        grads = [On(g, "npu:1") if on else g for g in grads]
        widths = [sum(ls) for ls in k["lengths"]]
        call = (grads, tensors[0], tensors[2], tensors[1], widths, True)
        return Case(
            "fbgemm::permute_multi_embedding_function", call, oracle=oracle, label=label, **tol
        )
    target = "fbgemm::permute_multi_embedding" + ("_function" if op == "function" else "")
    call = (placed, *tensors, list(out_lengths))
    return Case(target, call, grad=grad, oracle=oracle, label=label, **tol)


MULTI_HOSTILE = (
    "permutes rows",
    "permutes dtype",
    "permutes shape",
    "out_lengths",
    "inputs dtype",
    "inputs disagree",
    "inputs rank",
    "empty inputs",
    "not a tensor",
    "mixed devices",
)


@fuzz_test(FAMILY)
def test_fuzz_permute_multi_embedding_hostile(data: Any) -> Case:
    """One hostile argument in an otherwise valid permute_multi_embedding(_function) call."""
    k = _keyed(data, cover=True)
    embs = _embs(data, k["lengths"], exact=True)
    if embs[0].shape[0] == 0:  # no rows: nothing is read, upstream checks nothing either
        embs = [torch.ones(2, t.shape[1], dtype=t.dtype) for t in embs]
    permutes, in_shapes, out_shapes, out_lengths = F.kt_regroup_arguments(
        embs[0], k["keys"], k["lengths"], k["groups"]
    )
    op = data.draw(
        st.sampled_from(("permute_multi_embedding", "permute_multi_embedding_function")), label="op"
    )
    how = data.draw(st.sampled_from(MULTI_HOSTILE), label="hostile")
    call: dict[str, Any] = {
        "pooled_embs": embs,
        "permutes": permutes,
        "in_shapes": in_shapes,
        "out_shapes": out_shapes,
        "out_lengths": list(out_lengths),
    }
    names: tuple[str, ...] = ("permutes",)
    if how == "permutes rows":
        bad = permutes.clone()
        r = data.draw(st.integers(0, bad.shape[0] - 1), label="row")
        col = data.draw(st.integers(0, 4), label="column")
        widths = [t.shape[1] for t in embs] + list(out_lengths)
        big = max(widths) + data.draw(st.sampled_from((1, 2**20, 2**31 - 1 - max(widths))))
        bad[r, col] = data.draw(st.sampled_from((-1, big, -(2**31))))
        call["permutes"] = bad
        names = ("permutes", "out_lengths")
    elif how == "permutes dtype":
        call["permutes"] = permutes.to(other_dtype(data, (torch.int32,)))
    elif how == "permutes shape":
        call["permutes"] = data.draw(
            st.sampled_from((permutes[:, :5], permutes.reshape(-1), permutes.reshape(-1, 3, 2)))
        )
    elif how == "out_lengths":
        lengths = list(out_lengths)
        lengths[data.draw(st.integers(0, len(lengths) - 1))] += data.draw(
            st.sampled_from((1, -1, -(10**6), 2**40))
        )
        call["out_lengths"] = lengths
        names = ("out_lengths", "permutes")
    elif how == "inputs dtype":
        dtype = other_dtype(data, MULTI_DTYPES)
        j = data.draw(st.integers(0, len(embs) - 1), label="input")
        call["pooled_embs"] = [t.to(dtype) if i == j else t for i, t in enumerate(embs)]
        names = ("pooled_embs",)
    elif how == "inputs disagree":
        other = {torch.float32: torch.float16}.get(embs[0].dtype, torch.float32)
        call["pooled_embs"] = [*embs, torch.ones(2, 1, dtype=other)]
        names = ("pooled_embs",)
    elif how == "inputs rank":  # a 1-D first input, or a later one with fewer rows
        j = data.draw(st.integers(0, len(embs) - 1), label="input")
        short = embs[0].reshape(-1) if j == 0 else embs[j][:0]
        call["pooled_embs"] = [short if i == j else t for i, t in enumerate(embs)]
        names = ("pooled_embs",)
    elif how == "empty inputs":
        call["pooled_embs"] = []
        names = ("pooled_embs",)
    elif how == "not a tensor":
        arg = data.draw(st.sampled_from(("permutes", "in_shapes", "out_shapes", "an input")))
        if arg == "an input":
            call["pooled_embs"] = [*embs[:-1], not_a_tensor(data)]
            names = ("pooled_embs",)
        else:
            call[arg] = not_a_tensor(data)
            names = (arg,)
    else:
        arg = data.draw(st.sampled_from(("permutes", "in_shapes", "out_shapes", "an input")))
        where = data.draw(st.sampled_from(("cpu", "npu:1")), label="device")
        if arg == "an input":
            call["pooled_embs"] = [*embs[:-1], On(embs[-1], where)]
        else:
            call[arg] = On(call[arg], where)
        names = ("pooled_embs", "permutes", "in_shapes", "out_shapes")
    return Case(f"fbgemm::{op}", (), call, expect="error", names=names, label=how)


REGROUP_HOSTILE = (
    "unknown key",
    "lengths lists",
    "lengths too wide",
    "negative length",
    "inputs dtype",
    "empty inputs",
    "not a tensor",
    "mixed devices",
)


@fuzz_test(FAMILY)
def test_fuzz_regroup_keyed_tensor_hostile(data: Any) -> Case:
    """Keys, lengths and groups that disagree with each other or with the inputs, for
    regroup_keyed_tensor and (the key errors) kt_regroup_arguments."""
    k = _keyed(data, cover=False)
    embs = _embs(data, k["lengths"], exact=True)
    how = data.draw(st.sampled_from(REGROUP_HOSTILE), label="hostile")
    if how == "mixed devices" and len(embs) == 1:
        how = "unknown key"  # one input elsewhere is a valid call there
    keys, lengths, groups = k["keys"], k["lengths"], k["groups"]
    op = "regroup_keyed_tensor"
    names: tuple[str, ...] = ("lengths",)
    if how == "unknown key":
        groups = [*groups[:-1], [*groups[-1], "no such key"]]
        op = data.draw(st.sampled_from((op, "kt_regroup_arguments")), label="op")
        names = ("groups",)
    elif how == "lengths lists":
        lengths = data.draw(st.sampled_from(([*lengths, [1]], [[*lengths[0], 1], *lengths[1:]])))
        op = data.draw(st.sampled_from((op, "kt_regroup_arguments")), label="op")
    elif how == "lengths too wide":
        j = data.draw(st.integers(0, len(lengths) - 1), label="input")
        lengths = [[*ls[:-1], ls[-1] + 1] if i == j else ls for i, ls in enumerate(lengths)]
        groups = [*groups, [keys[j][-1]]]  # read the widened key
    elif how == "negative length":
        j = data.draw(st.integers(0, len(lengths) - 1), label="input")
        lengths = [[-1, *ls[1:]] if i == j else ls for i, ls in enumerate(lengths)]
        groups = [*groups, [keys[j][0]]]
    elif how == "inputs dtype":
        embs = [t.to(other_dtype(data, MULTI_DTYPES)) for t in embs]
        names = ("pooled_embs",)
    elif how == "empty inputs":
        embs, names = [], ("pooled_embs",)
    elif how == "not a tensor":
        embs, names = [*embs[:-1], not_a_tensor(data)], ("pooled_embs",)
    else:
        embs = [*embs[:-1], On(embs[-1], data.draw(st.sampled_from(("cpu", "npu:1"))))]
        names = ("pooled_embs",)
    first = embs[0] if op == "kt_regroup_arguments" else embs
    return Case(
        f"fbgemm::{op}", (first, keys, lengths, groups), expect="error", names=names, label=how
    )


# --- the cross-device ops ---------------------------------------------------------------------

CROSS = ("merge_pooled_embeddings", "all_to_one_device", "sum_reduce_to_one")


def _spread(data: Any, op: str) -> tuple[list[Any], list[torch.Tensor], dict[str, Any]]:
    """Inputs on npu:0 / npu:1 in layouts (placed, and as CPU tensors) and the op's extras."""
    gen = seeded(data)
    n = data.draw(st.integers(1, 4), label="inputs")
    dtype = data.draw(st.sampled_from(ALL_DTYPES[4:]), label="dtype")
    batch = data.draw(st.integers(0, 3), label="B")
    cat_dim = data.draw(st.sampled_from((0, 1, -1)), label="cat_dim")
    shapes = []
    width = data.draw(st.integers(0, 4), label="width")
    for _ in range(n):
        own = data.draw(st.integers(0, 4))
        if op == "merge_pooled_embeddings":
            shapes.append((own, width) if cat_dim == 0 else (batch, own))
        else:
            shapes.append((batch, width))
    cpu = [in_layout(data, _values(gen, s, dtype)) for s in shapes]
    where = [data.draw(st.sampled_from(("npu:0", "npu:1")), label="device") for _ in cpu]
    placed = [On(t, d) for t, d in zip(cpu, where, strict=True)]
    return placed, cpu, {"cat_dim": cat_dim, "uncat": batch}


def _cross(op: str, tensors: list[Any], target: Any, extra: dict[str, Any], **kw: Any) -> Case:
    rest = (extra["uncat"], extra["cat_dim"]) if op == "merge_pooled_embeddings" else ()
    return Case(
        REF + "cross_device_call",
        (op, tensors, target, *rest),
        oracle=REF + "cross_device_reference",
        op_name=f"fbgemm::{op}",
        **kw,
    )


@fuzz_test(FAMILY)
def test_fuzz_cross_device_valid(data: Any) -> Case:
    """merge_pooled_embeddings, all_to_one_device, sum_reduce_to_one over inputs spread on two
    devices, every output on target_device (npu:0, npu:1, the current npu; the CPU for merge),
    none aliasing an input."""
    op = data.draw(st.sampled_from(CROSS), label="op")
    placed, _, extra = _spread(data, op)
    targets = ["npu:0", "npu:1", "npu"] + (["cpu"] if op == "merge_pooled_embeddings" else [])
    target = torch.device(data.draw(st.sampled_from(targets), label="target"))
    return _cross(op, placed, target, extra, label=f"valid {op} to {target}")


CROSS_HOSTILE = (
    "target",
    "empty",
    "not a tensor",
    "on the cpu",
    "shapes",
    "dtypes",
    "cannot be allocated",
)


@fuzz_test(FAMILY)
def test_fuzz_cross_device_hostile(data: Any) -> Case:
    """Targets that do not exist (or the CPU where not allowed), empty lists, non-tensors, a CPU
    input among npu ones, shapes / dtypes that do not combine, outputs no memory holds."""
    op = data.draw(st.sampled_from(CROSS), label="op")
    # all_to_one_device takes any shapes and dtypes
    kinds = CROSS_HOSTILE if op != "all_to_one_device" else CROSS_HOSTILE[:4] + CROSS_HOSTILE[6:]
    how = data.draw(st.sampled_from(kinds), label="hostile")
    placed, cpu, extra = _spread(data, op)
    arg = "pooled_embeddings" if op == "merge_pooled_embeddings" else "input_tensors"
    target: Any = torch.device("npu:0")
    names: tuple[str, ...] = (arg,)
    if how == "target":
        bad = ["npu:7", "meta"] + ([] if op == "merge_pooled_embeddings" else ["cpu"])
        target, names = torch.device(data.draw(st.sampled_from(bad))), ("target_device",)
    elif how == "empty":
        placed = []
    elif how == "not a tensor":
        placed = [*placed, not_a_tensor(data)]
    elif how == "on the cpu":
        placed = [*placed, On(torch.ones_like(cpu[0]), "cpu")]
    elif how == "shapes":
        if op == "merge_pooled_embeddings":
            extra["cat_dim"] = data.draw(st.sampled_from((2, -3, 5)))
            names = (arg, "cat_dim")
        else:
            placed = [*placed, torch.ones(cpu[0].shape[0] + 1, cpu[0].shape[1] + 2)]
    elif how == "dtypes":  # floats into a sum / concatenation of the first input's int32
        first = cpu[0].to(torch.int32)
        placed = [first, On(torch.ones_like(first, dtype=torch.float32) + 0.5, "npu:1")]
    else:  # stride 0: 2**40 elements in 4 bytes of memory, copied out
        huge = torch.ones(1, 1).expand(2**20, 2**20)
        placed = [huge] + ([On(huge, "npu:1")] if op == "merge_pooled_embeddings" else [])
        extra["cat_dim"] = 1
    return _cross(op, placed, target, extra, expect="error", names=names, label=how)
