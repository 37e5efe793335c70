"""Hostile-input fuzz of the input_combine family (fbgemm_npu/native/fbgemm/input_combine/):
``fbgemm::tbe_input_combine``, ``fbgemm::padding_fused_tbe_input_combine`` and their
``_with_length`` forms.

Valid input -- 1 to 4 tables of int32 / int64 indices, offsets and lengths (mixed per table),
weights on some tables, empty bags and tables, ``include_last_offsets`` drawn or all set with
padding indices (the trimming path; :func:`fbgemm_npu.testing.op_samples_input_combine.tables`),
the flags on the host or the device, a ``batch_size`` at or past every table's bags, any memory
layout of every tensor -- equals upstream's CPU kernels exactly.  Invalid input -- lists of
different lengths, a None, a non-tensor, a float / bool / uint8 / int16 or 2-D tensor in a
list, float64 or wrongly sized weights, flags of the wrong dtype, count or rank, a negative or
too small ``batch_size``, a trimmed table's last offset negative or past its indices, empty
offsets, a tensor on another device -- gets an error naming the op and the argument.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor
from fbgemm_npu.testing.op_samples_input_combine import Tables, tables

COMBINE = "fbgemm::tbe_input_combine"
PADDING = "fbgemm::padding_fused_tbe_input_combine"
WITH_LENGTH = "fbgemm::tbe_input_combine_with_length"
PADDING_WITH_LENGTH = "fbgemm::padding_fused_tbe_input_combine_with_length"
OPS = (COMBINE, PADDING, WITH_LENGTH, PADDING_WITH_LENGTH)
LAYOUTS = ("contiguous", "strided", "expanded", "offset")


def _tables(data: Any, op: str) -> Tables:
    seed = data.draw(st.integers(0, 2**20), label="seed")
    n = data.draw(st.integers(1, 4), label="tables")
    padded = op == COMBINE and data.draw(st.booleans(), label="padded")
    return tables(seed, n_tables=n, padded=padded, min_batch=1 if op == PADDING else 0)


def _laid(data: Any, ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [in_layout(data, t, LAYOUTS) for t in ts]


def _args(data: Any, op: str, a: Tables) -> list[Any]:
    """The op's arguments: the lists in drawn layouts, the flags on the host or the device, B."""
    second = a.lengths if op in (WITH_LENGTH, PADDING_WITH_LENGTH) else a.offsets
    args: list[Any] = [_laid(data, a.indices), _laid(data, second), _laid(data, a.weights)]
    if op in (COMBINE, PADDING):
        host = data.draw(st.booleans(), label="host flags")
        args.append(On(a.include_last, "cpu") if host else a.include_last)
    if op in (PADDING, PADDING_WITH_LENGTH):
        args.append(a.batch_size + data.draw(st.integers(0, 3), label="extra batch"))
    return args


@fuzz_test("input_combine")
def test_fuzz_input_combine_valid(data: Any) -> Case:
    """Every op on valid tables in every layout."""
    op = data.draw(st.sampled_from(OPS), label="op")
    return Case(op, tuple(_args(data, op, _tables(data, op))), label=f"valid {op[8:]}")


LIST_NAMES = ("indices_list", "offsets_list", "per_sample_weights")


def _break_list(data: Any, op: str, args: list[Any]) -> tuple[str, tuple[str, ...]]:
    """One list broken: a length, a None / an object, a dtype, a rank, another device."""
    k = data.draw(st.integers(0, 2), label="list")
    name = LIST_NAMES[k] if k != 1 or op in (COMBINE, PADDING) else "lengths_list"
    items = list(args[k])
    how = data.draw(st.sampled_from(("length", "none", "object", "dtype", "rank", "device")))
    i = data.draw(st.integers(0, len(items) - 1), label="item")
    if how == "length":
        items = items[:-1] if len(items) > 1 else [*items, items[0]]
        args[k] = items
        return f"{name} length", (*LIST_NAMES, "lengths_list", "include_last_offsets")
    if how in ("none", "object"):
        items[i] = None if how == "none" else not_a_tensor(data)
    elif how == "dtype":
        bad = (torch.float64, torch.float16) if k == 2 else (torch.float32, torch.bool,
                                                            torch.uint8, torch.int16)  # fmt: skip
        t = items[i] if items[i].numel() or k != 2 else torch.ones(args[0][i].numel())
        items[i] = t.to(data.draw(st.sampled_from(bad), label="dtype"))
    elif how == "rank":
        t = items[i] if items[i].numel() or k != 2 else torch.ones(args[0][i].numel())
        items[i] = t.reshape(1, -1)
    else:
        items[i] = On(items[i], data.draw(st.sampled_from(("cpu", "npu:1")), label="device"))
    args[k] = items
    if k == 2 and how in ("dtype", "rank") and items[i].numel() == 0:
        return f"{name} {how} empty", ()  # an empty weights tensor is an unweighted table
    return f"{name} {how}", (name,)


def _break_scalar(data: Any, op: str, args: list[Any], a: Tables) -> tuple[str, tuple[str, ...]]:
    """The flags, the batch size, the weights' sizes, a trimmed table's last offset."""
    choices = ["weights"]
    if op in (COMBINE, PADDING):
        choices += ["flags dtype", "flags count", "flags rank", "flags device"]
    if op in (PADDING, PADDING_WITH_LENGTH):
        choices += ["negative batch", "small batch"]
    if op == COMBINE:
        choices += ["trim", "empty offsets"]
    how = data.draw(st.sampled_from(choices), label="how")
    T = len(a.indices)
    if how == "weights":
        i = data.draw(st.integers(0, T - 1), label="table")
        n = args[0][i].numel()
        args[2] = list(args[2])
        args[2][i] = torch.rand(n + data.draw(st.sampled_from((1, 2))))
        return how, ("per_sample_weights",)
    if how.startswith("flags"):
        flags = a.include_last
        args[3] = {
            "flags dtype": flags.to(torch.int64),
            "flags count": torch.cat([flags, flags[:1]]),
            "flags rank": flags.view(1, -1),
            "flags device": On(flags, "npu:1"),
        }[how]
        return how, ("include_last_offsets",)
    if how == "negative batch":
        args[-1] = -data.draw(st.integers(1, 5))
        return how, ("batch_size",)
    if how == "small batch":  # fewer bags than a table has: upstream writes past its buffer
        sizes = [o.numel() - int(f) for o, f in zip(a.offsets, a.include_last, strict=True)]
        if op == PADDING_WITH_LENGTH:
            sizes = [t.numel() for t in a.lengths]
        # a table of s bag starts needs B >= s - 1 (offsets) or B >= s (lengths)
        short = max(sizes) - (2 if op == PADDING else 1)
        if short < 0:
            return "valid small batch", ()
        args[-1] = short
        return how, ("batch_size", "offsets_list", "lengths_list")
    i = data.draw(st.integers(0, T - 1), label="table")
    offsets = list(args[1])
    if how == "empty offsets":
        offsets[i] = a.offsets[i][:0]
        args[1] = offsets
        return how, ("offsets_list",)
    # every flag set, a table's last offset negative or past its indices (the trimming path)
    args[3] = torch.ones(T, dtype=torch.bool)
    o = a.offsets[i].clone() if a.include_last[i] else torch.cat([a.offsets[i],
                                                                  a.offsets[i][-1:]])  # fmt: skip
    negative = data.draw(st.booleans(), label="negative")
    o[-1] = -data.draw(st.integers(1, 3)) if negative else \
        a.indices[i].numel() + data.draw(st.integers(1, 3))  # fmt: skip
    offsets[i] = o
    args[1] = offsets
    # past its indices: trimmed (refused) only if some table has padding, else not read
    return ("trim negative" if negative else "trim past"), ("offsets_list",)


@fuzz_test("input_combine")
def test_fuzz_input_combine_invalid(data: Any) -> Case:
    """A broken list, flags, batch size, weights or trimmed offsets: an error naming them."""
    op = data.draw(st.sampled_from(OPS), label="op")
    a = _tables(data, op)
    args = _args(data, op, a)
    if data.draw(st.booleans(), label="list"):
        label, names = _break_list(data, op, args)
    else:
        label, names = _break_scalar(data, op, args, a)
    if not names:  # no contract: upstream's result, or a clear error
        return Case(op, tuple(args), expect="equal_or_error", names=LIST_NAMES, label=label)
    expect = "equal_or_error" if label == "trim past" else "error"
    return Case(op, tuple(args), expect=expect, names=names, label=label)
