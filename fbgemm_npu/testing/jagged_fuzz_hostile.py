"""Hostile calls of the jagged fuzz tests (``tests/fuzz/test_fuzz_jagged.py``): a valid call of
:mod:`.jagged_fuzz` spoiled in one drawn way, as a :class:`~fbgemm_npu.testing.fuzz.Case` that
says what must come of it.

Metadata faults (a non-tensor, a dtype, a rank, a device, a size that is negative or cannot be
allocated, arguments that disagree) must raise an error naming the op and the argument.  Data
faults (broken offsets or lengths, fewer value rows than the offsets reach, int32 offsets near
2**31) must raise, naming the offsets (or lengths, or the values, or ``total_L``), where a
position would read or write outside its tensor, and otherwise give upstream's result: upstream
reads and writes wherever such offsets point, so "equal or a clear error" is the contract.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On
from fbgemm_npu.testing.fuzz_strategies import INT32_MAX, bad_offsets, not_a_tensor, other_dtype
from fbgemm_npu.testing.jagged_fuzz import (
    FLOATS,
    INDEX,
    REF,
    SIZED,
    VALUES,
    elementwise_call,
    matmul_call,
    stacked_call,
    to_dense_call,
    to_jagged_call,
)

__all__ = ["HOSTILE", "hostile_case"]

HOSTILE = (
    "not a tensor",
    "dtype",
    "rank",
    "mixed devices",
    "broken offsets",
    "values short",
    "int32 offsets near 2**31",
    "size",
    "disagreeing arguments",
)
_OFFSETS = ("offsets", "x_offsets", "a_offsets", "lengths")
_ROWS = ("values", "x_values", "a_values")  # the tensors the offsets index by rows
_SIZES = ("max_lengths", "max_sequence_length", "total_L", "max_lengths_per_key")
_HUGE = (2**36, 2**40, 2**62)
_GRAD_DTYPES = (*FLOATS, torch.float64)  # jagged_dense_elementwise_mul_backward's


def _schema(op: str) -> list[tuple[str, str]]:
    packet = getattr(torch.ops.fbgemm, op.split("::", 1)[1])
    return [(a.name, str(a.type)) for a in packet.default._schema.arguments]


def _valid(data: Any) -> tuple[str, dict[str, Any], str | None]:
    """A valid call as keyword arguments, and the oracle its data faults are judged by."""
    group = data.draw(
        st.sampled_from(("to_dense", "to_jagged", "elementwise", "matmul", "stacked")),
        label="group",
    )
    if group == "to_dense":
        (op, args, kwargs), _ = to_dense_call(data)
    elif group == "to_jagged":
        (op, args, kwargs), _ = to_jagged_call(data)
    elif group == "elementwise":
        (op, args, kwargs), _, _ = elementwise_call(data)
    elif group == "matmul":
        op, args, kwargs = matmul_call(data)
    else:
        op, args, kwargs, _ = stacked_call(data)
    names = [n for n, _ in _schema(op)]
    call = {**dict(zip(names, args, strict=False)), **kwargs}
    short = op.split("::", 1)[1]
    return op, call, (REF + SIZED[short]) if short in SIZED else None


def _allowed(op: str, arg: str) -> tuple[torch.dtype, ...]:
    if arg in _OFFSETS:
        return INDEX
    if "batched_dense_vec" in op:
        return FLOATS
    if op.endswith("_mul_backward"):
        return _GRAD_DTYPES
    return VALUES


def _tensor_args(op: str, call: dict[str, Any]) -> list[str]:
    return [n for n, t in _schema(op) if "Tensor" in t and call.get(n) is not None]


def _one_tensor(data: Any, value: Any) -> tuple[Any, int | None]:
    """``value`` itself or, for a list, one drawn element (and its index)."""
    if isinstance(value, list):
        if not value:
            return value, None
        i = data.draw(st.integers(0, len(value) - 1), label="element")
        return value[i], i
    return value, None


def _put(call: dict[str, Any], arg: str, i: int | None, new: Any) -> None:
    if i is None:
        call[arg] = new
    else:
        call[arg] = [new if k == i else t for k, t in enumerate(call[arg])]


def _offsets_arg(call: dict[str, Any]) -> str:
    return next(n for n in _OFFSETS if n in call)


def hostile_case(data: Any) -> Case:
    """A valid call of any jagged op with one drawn fault (see the module docstring)."""
    op, call, sized_oracle = _valid(data)
    how = data.draw(st.sampled_from(HOSTILE), label="hostile")
    tensors = _tensor_args(op, call)
    err: dict[str, Any] = {"expect": "error", "label": how}
    data_fault: dict[str, Any] = {"expect": "equal_or_error", "label": how, "oracle": sized_oracle}
    if how == "not a tensor":
        arg = data.draw(st.sampled_from(tensors), label="arg")
        _, i = _one_tensor(data, call[arg])
        _put(call, arg, i, not_a_tensor(data))
        return Case(op, (), call, names=(arg,), **err)
    if how == "dtype":
        arg = data.draw(st.sampled_from(tensors), label="arg")
        t, i = _one_tensor(data, call[arg])
        _put(call, arg, i, t.to(other_dtype(data, _allowed(op, arg))))
        return Case(op, (), call, names=(arg, *tensors), **err)
    if how == "rank":
        arg = data.draw(st.sampled_from(tensors), label="arg")
        t, i = _one_tensor(data, call[arg])
        shape = data.draw(st.sampled_from(("unsqueeze", "flatten", "scalar")), label="rank")
        if shape == "unsqueeze":
            new = t.unsqueeze(data.draw(st.integers(0, t.dim()), label="dim"))
        elif shape == "flatten" or t.numel() == 0:
            new = t.reshape(-1) if t.dim() != 1 else t.reshape(1, -1)
        else:
            new = t.reshape(-1)[:1].reshape(())
        _put(call, arg, i, new)
        return Case(op, (), call, names=(arg, *tensors), **data_fault)
    if how == "mixed devices":
        arg = data.draw(st.sampled_from(tensors), label="arg")
        t, i = _one_tensor(data, call[arg])
        _put(call, arg, i, On(t, data.draw(st.sampled_from(("cpu", "npu:1")), label="device")))
        return Case(op, (), call, names=tuple(tensors), **err)
    if how in ("broken offsets", "int32 offsets near 2**31"):
        return _broken(data, op, call, how, data_fault)
    if how == "values short":
        return _short(data, op, call, data_fault)
    if how == "size":
        return _size(data, op, call, err)
    return _disagree(data, op, call, err)


def _broken(data: Any, op: str, call: dict[str, Any], how: str, fault: dict[str, Any]) -> Case:
    arg = _offsets_arg(call)
    names = (arg, *(n for n in (*_ROWS, "total_L", "offset_per_key") if n in call))
    if arg == "lengths":  # stacked: negative, or int32 near 2**31 (the row starts wrap)
        ln = call["lengths"].clone().to(torch.int32 if how.startswith("int32") else torch.int64)
        if ln.numel():
            k = data.draw(st.integers(0, ln.numel() - 1), label="entry")
            big = INT32_MAX - data.draw(st.integers(0, 3), label="below 2**31")
            ln.view(-1)[k] = big if how.startswith("int32") else -data.draw(st.integers(1, 9))
        call["lengths"] = ln
        return Case(op, (), call, names=names, **fault)
    t, i = _one_tensor(data, call[arg])
    last = call[arg][-1] if isinstance(call[arg], list) else call[arg]
    total = int(last[-1]) if last.numel() else 0
    if "dense_to_jagged" in op:
        # the rows the offsets had: broken offsets may reach 2**31 rows, an output that is
        # valid when asked for (total_L omitted) but that no host holds
        call["total_L"] = call.get("total_L", total)
    if how.startswith("int32"):  # offsets near 2**31: a start far past the rows, or a long row
        o = t.to(torch.int64) + data.draw(st.sampled_from((0, INT32_MAX - 8)), label="shift")
        if o.numel():
            o[-1] = INT32_MAX - data.draw(st.integers(0, 3), label="below 2**31")
        _put(call, arg, i, o.to(t.dtype))  # int32 ones wrap past 2**31, as the user's would
        return Case(op, (), call, names=names, **fault)
    total = int(t[-1]) if t.numel() else 0
    broken, new = bad_offsets(data, t, total)
    _put(call, arg, i, new)
    return Case(op, (), call, names=names, **{**fault, "label": f"offsets {broken}"})


def _short(data: Any, op: str, call: dict[str, Any], fault: dict[str, Any]) -> Case:
    """Fewer value rows (or a smaller ``total_L``) than the offsets reach."""
    arg = _offsets_arg(call)
    names = (arg, *(n for n in (*_ROWS, "total_L", "grad_output") if n in call))
    if "total_L" in call or op.endswith("dense_to_jagged_forward"):
        reach = int(call[arg][-1].max()) if call[arg][-1].numel() else 0
        call["total_L"] = max(reach - data.draw(st.integers(1, 3), label="rows missing"), 0)
        return Case(op, (), call, names=names, **fault)
    rows = next((n for n in _ROWS if n in call), None)
    if rows is None:  # jagged_to_padded_dense_backward: grad_output is dense
        call["total_L"] = 0
        return Case(op, (), call, names=names, **fault)
    t = call[rows]
    cut = data.draw(st.integers(1, 3), label="rows missing")
    call[rows] = t[: max(t.size(0) - cut, 0)]
    if op.endswith("_mul_backward"):  # grad_output and x_values stay one shape
        call["grad_output"] = call["grad_output"][: call[rows].size(0)]
    return Case(op, (), call, names=names, **fault)


def _size(data: Any, op: str, call: dict[str, Any], err: dict[str, Any]) -> Case:
    """A size argument that is negative or that no memory holds."""
    arg = next((n for n in _SIZES if n in call), None)
    if arg is None or (op.endswith("dense_to_jagged_forward") and "total_L" not in call):
        arg = "total_L" if "dense_to_jagged" in op else None
    if arg is None:  # no size argument: the elementwise ops and the matmul
        return _disagree(data, op, call, err)
    big = data.draw(st.sampled_from((-1, -(2**31), *_HUGE)), label="size")
    if isinstance(call.get(arg), list):
        sizes = list(call[arg])
        if not sizes:
            return _disagree(data, op, call, err)
        sizes[data.draw(st.integers(0, len(sizes) - 1), label="entry")] = big
        call[arg] = sizes
    else:
        call[arg] = big
    if big > 0:  # nothing to allocate (an empty batch, D = 0) is fine: upstream's empty result
        return Case(op, (), call, names=(arg,), **{**err, "expect": "equal_or_error"})
    return Case(op, (), call, names=(arg,), **err)


def _disagree(data: Any, op: str, call: dict[str, Any], err: dict[str, Any]) -> Case:
    """Arguments that contradict each other: a batch, a count of jagged dims, a list length."""
    err = {**err, "label": "disagreeing arguments"}
    if "offset_per_key" in call:  # stacked: lists shorter than the keys
        arg = data.draw(st.sampled_from(("offset_per_key", "max_lengths_per_key")), label="arg")
        t = call["lengths"].size(0)
        call[arg] = list(call[arg])[: (t + 1 if arg == "offset_per_key" else t) - 1]
        if t == 0 and arg == "max_lengths_per_key":
            call["lengths"] = torch.zeros(1, 1, dtype=call["lengths"].dtype)
        return Case(op, (), call, names=(arg,), **err)
    if "a_offsets" in call:  # matmul: B that does not divide v's rows
        b = call["a_offsets"].numel() - 1
        call["a_offsets"] = torch.cat([call["a_offsets"], call["a_offsets"][-1:]])
        names = ("a_offsets", "v", "grad_output")
        if call["v"].size(0) % (b + 1) == 0:  # still divides: change v's rows instead
            call["v"] = torch.cat([call["v"], call["v"][:1]]) if call["v"].numel() else call["v"]
            if call["v"].size(0) % (b + 1) == 0:
                return Case(op, (), call, names=names, **{**err, "expect": "equal_or_error"})
        return Case(op, (), call, names=names, **err)
    arg = _offsets_arg(call)
    dense = next(
        n for n in ("max_lengths", "dense", "grad_output", "y", "y_0", "values") if n in call
    )
    if dense == "max_lengths":
        call["max_lengths"] = [*call["max_lengths"], 2]  # one length more than jagged dims
        return Case(op, (), call, names=("max_lengths",), **err)
    if not isinstance(call[arg], list):  # 1d/2d to_dense: a batch of one row more
        call[arg] = torch.cat([call[arg], call[arg][-1:]])
        return Case(op, (), call, names=(arg, dense), **{**err, "expect": "equal_or_error"})
    t = call[dense]
    call[dense] = torch.cat([t, t[:1]]) if t.size(0) else t.new_zeros((1, *t.shape[1:]))
    if dense in ("y", "y_0"):  # upstream's elementwise step broadcasts a batch of one
        return Case(op, (), call, names=(arg, dense), **{**err, "expect": "equal_or_error"})
    return Case(op, (), call, names=(arg, dense), **err)
