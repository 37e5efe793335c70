"""Hostile-input fuzz of the index-select family (fbgemm_npu/native/fbgemm/index_select/).

Valid calls of every op of the family (the jagged, v2, keyed, batch and group selects, the v2
add, the ranges, ``segment_sum_csr``, ``jagged_unique_indices``), in every layout, dtype and size
(empty selections, zero-length segments, truncated outputs), on npu:0 or npu:1, equal upstream's
CPU kernels (on contiguous copies), gradients included where autograd exists; the CUDA-only ops
and the half-type segment sums are judged by the references of
``fbgemm_npu/testing/index_select_inputs.py``.  Every hostile category of the issue gets a clear
error naming the op and the argument: non-monotone, negative, wrapped and float offsets; lengths
that do not match the values; out-of-range and negative indices; wrong dtypes; ``None`` and
objects; empty selections without a size; mixed devices; sizes that disagree or cannot be
allocated; int32 lengths, offsets and indices near 2**31.  Valid calls come from
``fbgemm_npu/testing/index_select_fuzz.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import not_a_tensor, other_dtype
from fbgemm_npu.testing.index_select_fuzz import (
    KEYED_VALUES,
    OPS,
    VALUES,
    WEIGHTS,
    Call,
    valid_call,
)
from fbgemm_npu.testing.index_select_hostile import DATA_SPOILERS, case, error, replace

FAMILY = "index_select"


def _on(value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor):
        return On(value, device)
    if isinstance(value, list):
        return [_on(v, device) for v in value]
    return value


@fuzz_test(FAMILY)
def test_fuzz_index_select_valid(data: Any) -> Case:
    """Every op on valid input in any layout, on npu:0 or (the whole call) npu:1."""
    op = data.draw(st.sampled_from(OPS), label="op")
    call = valid_call(data, op)
    if data.draw(st.integers(0, 4), label="device") == 0:
        call.kwargs = {k: _on(v, "npu:1") for k, v in call.kwargs.items()}
        return case(call, grad=call.grad, label="valid on npu:1")
    return case(call, grad=call.grad, label=f"valid {op}")


# ---- hostile input: one argument broken in a drawn way, the rest of the call valid ----------

HOSTILE = (
    "dtype",
    "not a tensor",
    "mixed devices",
    "indices out of range",
    "offsets",
    "lengths do not match values",
    "sizes",
    "int32 near 2**31",
    "empty",
)
INDEX = (torch.int32, torch.int64)
# op -> tensor argument -> the dtypes it takes (None: any)
DTYPES: dict[str, dict[str, tuple[torch.dtype, ...] | None]] = {
    "jagged_index_select": {"values": VALUES, "lengths": INDEX, "indices": INDEX},
    "jagged_index_select_2d_forward_v2": {
        "values": VALUES,
        "indices": INDEX,
        "input_offsets": (torch.int64,),
        "output_offsets": (torch.int64,),
    },
    "jagged_index_add_2d_forward_v2": {
        "values": VALUES,
        "indices": INDEX,
        "input_offsets": (torch.int64,),
        "output_offsets": (torch.int64,),
    },
    "keyed_jagged_index_select_dim1": {
        "values": KEYED_VALUES,
        "lengths": INDEX,
        "offsets": INDEX,
        "indices": INDEX,
        "weights": WEIGHTS,
    },
    "batch_index_select_dim0": {"inputs": None, "indices": INDEX},
    "group_index_select_dim0": {"input_group": None, "indices_group": INDEX},
    "lengths_range": {"t_in": INDEX},
    "lengths_range_out": {"output": None, "t_in": INDEX},
    "offsets_range": {"offsets": INDEX},
    "segment_sum_csr": {"csr_seg": INDEX, "values": VALUES},
    "jagged_unique_indices": dict.fromkeys(
        ("hash_size_cumsum", "hash_size_offsets", "offsets", "indices"), INDEX
    ),
}


def _tensor_args(call: Call) -> list[tuple[str, int | None]]:
    """(argument, list position or None) of every tensor the call passes."""
    out: list[tuple[str, int | None]] = []
    for k, v in call.kwargs.items():
        if isinstance(v, torch.Tensor):
            out.append((k, None))
        elif isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            out.extend((k, i) for i in range(len(v)))
    return out


def _get(call: Call, arg: str, pos: int | None) -> Any:
    return call.kwargs[arg] if pos is None else call.kwargs[arg][pos]


def _bad_dtype(data: Any, call: Call) -> Case:
    typed = [(a, p) for a, p in _tensor_args(call) if DTYPES[call.op].get(a) is not None]
    arg, pos = data.draw(st.sampled_from(typed), label="argument")
    allowed = DTYPES[call.op][arg]
    if call.op == "jagged_unique_indices":  # one index dtype for all four
        allowed = (call.kwargs["indices"].dtype,)
    replace(call, arg, pos, _get(call, arg, pos).to(other_dtype(data, allowed)))
    names = (arg, "indices") if call.op == "jagged_unique_indices" else (arg,)
    return error(call, names, "dtype")


def _not_a_tensor(data: Any, call: Call) -> Case:
    arg, pos = data.draw(st.sampled_from(_tensor_args(call)), label="argument")
    value = not_a_tensor(data)
    if arg == "weights" and value is None:
        value = "weights"  # None is the default there
    replace(call, arg, pos, value)
    return error(call, (arg,), "not a tensor")


def _mixed_devices(data: Any, call: Call) -> Case:
    tensors = _tensor_args(call)
    arg, pos = data.draw(st.sampled_from(tensors), label="argument")
    replace(call, arg, pos, On(_get(call, arg, pos), data.draw(st.sampled_from(("cpu", "npu:1")))))
    return error(call, tuple({a for a, _ in tensors}), "mixed devices")


SPOILERS = {
    "dtype": _bad_dtype,
    "not a tensor": _not_a_tensor,
    "mixed devices": _mixed_devices,
    **DATA_SPOILERS,
}
SINGLE_TENSOR = ("lengths_range", "offsets_range")  # valid on any device
GRAD_ARGS = {
    "jagged_index_select": "values",
    "keyed_jagged_index_select_dim1": "values",
    "batch_index_select_dim0": "inputs",
    "group_index_select_dim0": "input_group",
}


@fuzz_test(FAMILY)
def test_fuzz_index_select_hostile(data: Any) -> Case:
    """One argument of a valid call broken in a drawn way (falls back to a non-tensor where the
    drawn way does not apply to the drawn call)."""
    op = data.draw(st.sampled_from(OPS), label="op")
    how = data.draw(st.sampled_from(HOSTILE), label="hostile")
    call = valid_call(data, op)
    if how == "mixed devices" and op in SINGLE_TENSOR:
        how = "dtype"
    case = SPOILERS[how](data, call) or _not_a_tensor(data, call)
    # through the autograd kernel too: the same errors when the values require grad
    grad_arg = GRAD_ARGS.get(op)
    value = case.kwargs.get(grad_arg) if grad_arg else None
    tensors = value if isinstance(value, list) else [value]
    floats = all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in tensors)
    if grad_arg and floats and data.draw(st.booleans(), label="requires grad"):
        case.grad = (grad_arg,)
    return case
