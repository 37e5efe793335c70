"""Hostile-input fuzz of the pooled family's KeyedTensor regrouping
(fbgemm_npu/native/fbgemm/pooled/regroup.py): ``permute_multi_embedding`` (gradients too),
``permute_multi_embedding_function`` (forward and reverse), ``regroup_keyed_tensor`` (gradients
too), ``kt_regroup_arguments``; the rest of the family is in ``test_fuzz_pooled.py``.

Valid keys, widths and groups (keys repeated across and within groups, an empty batch, inputs
wider than their keys), inputs in any layout on npu:0 or npu:1, equal upstream's CPU kernels;
where upstream leaves memory uninitialised (gradients of input columns no output reads) the
references of ``fbgemm_npu/testing/pooled_inputs.py`` judge.  Rows of ``permutes`` out of range
or negative, widths that disagree, unknown keys, wrong dtypes and ranks, empty lists,
non-tensors and mixed devices get a clear error naming the op and the argument.  And no plan
outlives a write to the index tensor it was derived from.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded
from fbgemm_npu.testing.pooled_inputs import WRITES

FAMILY = "pooled"
F = torch.ops.fbgemm
REF = "fbgemm_npu.testing.pooled_inputs:"
MULTI_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALF_GRAD = {"rtol": 2e-2, "atol": 2e-2}  # sums of repeated reads in a half type
MULTI_OPS = ("permute_multi_embedding", "permute_multi_embedding_function")


def _values(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return (torch.randint(-64, 64, shape, generator=gen) / 8).to(dtype)


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
        # a row of length 0 copies nothing wherever it points: spoil its length then
        col = data.draw(st.integers(0, 4), label="column") if bad[r, 4] > 0 else 4
        limit = max(t.shape[1] for t in embs) + max(out_lengths) + len(embs) + len(out_lengths)
        big = limit + data.draw(st.sampled_from((1, 2**20, 2**31 - 1 - limit)))
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


@fuzz_test(FAMILY)
def test_fuzz_plans_follow_writes(data: Any) -> Case:
    """ "A cache keyed on tensor data is never stale": permute_multi_embedding(_function) and
    permute_pooled_embs called, their index tensor written (in place, through ``.data``, through
    the storage), called again: both results equal upstream's."""
    how = data.draw(st.sampled_from(WRITES), label="write")
    if data.draw(st.booleans(), label="multi"):
        k = _keyed(data, cover=True)
        embs = _embs(data, k["lengths"], exact=True)
        args = F.kt_regroup_arguments(embs[0], k["keys"], k["lengths"], k["groups"])
        # the same keys in another order within each group: same rows, same output widths
        order = [data.draw(st.permutations(g), label="order") for g in k["groups"]]
        new = F.kt_regroup_arguments(embs[0], k["keys"], k["lengths"], order)[0]
        op = data.draw(st.sampled_from(MULTI_OPS), label="op")
        call = [embs, *args[:3], list(args[3])]
    else:
        gen = seeded(data)
        n = data.draw(st.integers(1, 5), label="blocks")
        perm, new = torch.randperm(n, generator=gen), torch.randperm(n, generator=gen)
        offsets = torch.arange(n + 1) * 2
        op = "permute_pooled_embs"
        call = [torch.randn(3, 2 * n, generator=gen), offsets, perm, offsets, torch.argsort(perm)]
    index = 1 if op != "permute_pooled_embs" else 2
    return Case(
        REF + "call_write_call",
        (op, call, index, new, how),
        label=f"write {how}",
        op_name=f"fbgemm::{op}",
    )
