"""Hostile-input fuzz of the pooled family (fbgemm_npu/native/fbgemm/pooled/): the four
``permute_pooled_embs`` ops and the cross-device ops; the KeyedTensor regrouping is in
``test_fuzz_pooled_regroup.py``.

Valid calls in every layout (strided, transposed, stride 0, storage offsets), dtype and size (an
empty batch included), on npu:0 or npu:1, equal upstream's CPU kernels, gradients included
where upstream has autograd.  The cross-device ops run on inputs spread over npu:0 and npu:1
and must put every output on ``target_device`` without aliasing an input.  Every hostile
category of the issue gets a clear error naming the op and the argument: permute lists that are
not permutations, negative and decreasing cut points, short lists, wrong dtypes and ranks, None
and objects, empty lists, mixed devices (a CPU input among npu ones), targets that do not exist,
shapes and dtypes that do not combine, sizes that cannot be allocated.
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
