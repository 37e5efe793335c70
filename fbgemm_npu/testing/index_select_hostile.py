"""Hostile variants of the index-select family's valid calls, for its fuzz tests
(``tests/fuzz/test_fuzz_index_select.py``; the valid calls come from
:mod:`fbgemm_npu.testing.index_select_fuzz`).

Each spoiler takes a drawn valid :class:`~fbgemm_npu.testing.index_select_fuzz.Call` and breaks
it in one way the data shows (indices out of range, broken offsets, lengths that do not match the
values, sizes that disagree or cannot be allocated, int32 sums at 2**31, empty arguments the op
needs), returning the :class:`~fbgemm_npu.testing.fuzz.Case` with the arguments its error must
name, or ``None`` where the drawn call cannot be broken that way.  A variant that stays valid
(offsets moved, still in range) is a case that must equal the oracle.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case
from fbgemm_npu.testing.fuzz_strategies import bad_offsets, in_layout, lengths_to_offsets
from fbgemm_npu.testing.index_select_fuzz import Call

__all__ = ["DATA_SPOILERS", "case", "error", "replace"]

M = 2**31


def case(call: Call, **kw: Any) -> Case:
    """The call as a fuzz case (its oracle unless given)."""
    kw.setdefault("oracle", call.oracle)
    return Case(call.target, (), call.kwargs, **kw)


def error(call: Call, names: tuple[str, ...], label: str) -> Case:
    return case(call, expect="error", names=names, label=label)


def replace(call: Call, arg: str, pos: int | None, value: Any) -> None:
    if pos is None:
        call.kwargs[arg] = value
    else:
        call.kwargs[arg] = [value if i == pos else v for i, v in enumerate(call.kwargs[arg])]


def _bad_index(data: Any, limit: int, dtype: torch.dtype) -> int:
    """An index outside ``[0, limit)``: just past, far past, negative, at int32's ends."""
    options = [limit, limit + 1000, -1, -(2**31)] + ([M - 1] if dtype == torch.int32 else [2**40])
    return data.draw(st.sampled_from(options), label="bad index")


def _set_index(data: Any, t: torch.Tensor, limit: int) -> torch.Tensor:
    """``t`` (1-D indices; empty: one entry) with one entry out of ``[0, limit)``."""
    flat = t.contiguous().clone() if t.numel() else torch.zeros(1, dtype=t.dtype)
    flat[data.draw(st.integers(0, flat.numel() - 1), label="at")] = _bad_index(data, limit, t.dtype)
    return in_layout(data, flat)


def _indices(data: Any, call: Call) -> Case | None:
    kw, op = call.kwargs, call.op
    if op == "jagged_index_select":
        kw["indices"] = _set_index(data, kw["indices"], kw["lengths"].numel())
        kw.pop("num_dense_output_rows", None)
    elif op == "jagged_index_select_2d_forward_v2" and kw["indices"].numel():
        kw["indices"] = _set_index(data, kw["indices"], kw["input_offsets"].numel())
    elif op == "jagged_index_add_2d_forward_v2" and kw["values"].shape[0]:
        kw["indices"] = _set_index(data, kw["indices"], kw["output_offsets"].numel())
    elif op == "keyed_jagged_index_select_dim1" and kw["lengths"].numel():
        kw["indices"] = _set_index(data, kw["indices"], kw["batch_size"])
        kw.pop("selected_lengths_sum", None)
    elif op == "batch_index_select_dim0":  # outside its own table (maybe inside another)
        counts, rows = kw["input_num_indices"], kw["input_rows"]
        t = data.draw(st.integers(0, len(rows) - 1), label="table")
        idx = kw["indices"].contiguous().clone()
        at = sum(counts[:t]) + data.draw(st.integers(0, counts[t] - 1), label="at")
        idx[at] = _bad_index(data, rows[t], idx.dtype)
        kw["indices"] = in_layout(data, idx)
    elif op == "group_index_select_dim0":
        i = data.draw(st.integers(0, len(kw["indices_group"]) - 1), label="member")
        rows = kw["input_group"][i].shape[0]
        replace(call, "indices_group", i, _set_index(data, kw["indices_group"][i], rows))
    elif op == "jagged_unique_indices" and kw["indices"].numel():
        # below every feature's range (hsc[0]); ids past hsc[T] are the last feature's (valid)
        top, idx = call.facts["top"], kw["indices"].contiguous().clone()
        idx[data.draw(st.integers(0, idx.numel() - 1))] = data.draw(
            st.sampled_from((-top - 1, -(2**31)))
        )
        kw["indices"] = in_layout(data, idx)
    else:
        return None
    return error(call, ("indices", "indices_group"), "indices out of range")


def _valid_offsets(o: torch.Tensor, first: int | None, last_max: int, last_min: int) -> bool:
    """Integer offsets that start at ``first`` (None: at any non-negative value), never
    decrease and end in ``[last_min, last_max]``."""
    if o.is_floating_point() or o.numel() == 0:
        return False
    v = o.tolist()
    start_ok = v[0] >= 0 if first is None else v[0] == first
    steps = all(b >= a for a, b in zip(v, v[1:], strict=False))
    return start_ok and steps and last_min <= v[-1] <= last_max


def _offsets(data: Any, call: Call) -> Case | None:
    kw, op = call.kwargs, call.op
    if op == "keyed_jagged_index_select_dim1" and not kw["lengths"].numel():
        return None  # no segment: the offsets are never read
    if op in ("keyed_jagged_index_select_dim1", "offsets_range", "segment_sum_csr"):
        arg = {"segment_sum_csr": "csr_seg"}.get(op, "offsets")
        if op == "segment_sum_csr" and kw[arg].numel() < 2:
            return None  # no segment: nothing is read, nothing to check
        if op == "segment_sum_csr" and kw["batch_size"] <= 0:
            kw["batch_size"] = 1  # else no segment is read: nothing to check
        how, o = bad_offsets(data, kw[arg], int(kw[arg].max()) if kw[arg].numel() else 0)
        if torch.equal(o.to(kw[arg].dtype), kw[arg]) and not o.is_floating_point():
            return None  # too short to break that way
        if op == "segment_sum_csr":
            valid = _valid_offsets(o, None, kw["values"].numel() // kw["batch_size"], 0)
        elif op == "offsets_range":
            valid = _valid_offsets(o, 0, kw["range_size"], 0)
        else:
            valid = False  # any change disagrees with the lengths
        kw[arg] = in_layout(data, o)
        if valid:
            return case(call, label=f"offsets {how}, still valid")
        return error(call, (arg, "lengths"), f"offsets {how}")
    if op == "jagged_unique_indices":
        arg = data.draw(st.sampled_from(("offsets", "hash_size_offsets")), label="argument")
        n = kw["indices"].numel() if arg == "offsets" else kw["hash_size_cumsum"].numel() - 1
        how, o = bad_offsets(data, kw[arg], n)
        if _valid_offsets(o, 0, n, n):
            return None
        kw[arg] = in_layout(data, o)
        return error(call, (arg,), f"{arg} {how}")
    if op in ("jagged_index_select_2d_forward_v2", "jagged_index_add_2d_forward_v2"):
        arg = "output_offsets" if op.startswith("jagged_index_select") else "input_offsets"
        o = kw[arg].contiguous().clone()
        if o.numel() == 0 or kw["values"].shape[0] == 0:  # no rows: nothing is added
            return None
        k = data.draw(st.integers(0, o.numel() - 1), label="at")
        o[k] = (o[k - 1] if k else 0) - data.draw(st.sampled_from((1, 5, 2**40)))
        kw[arg] = in_layout(data, o)  # a negative segment length
        return error(call, (arg,), f"{arg} decreasing")
    return None


def _select_something(kw: dict[str, Any]) -> None:
    """At least one index for ``jagged_index_select`` (nothing selected reads no lengths)."""
    if kw["indices"].numel() == 0:
        kw["indices"] = torch.zeros(1, dtype=kw["indices"].dtype)


def _lengths(data: Any, call: Call) -> Case | None:
    kw, op = call.kwargs, call.op
    if op == "jagged_index_select":
        _select_something(kw)
    if op in ("jagged_index_select", "keyed_jagged_index_select_dim1") and kw["lengths"].numel():
        lengths = kw["lengths"].contiguous().clone()
        k = data.draw(st.integers(0, lengths.numel() - 1), label="at")
        negative = data.draw(st.booleans(), label="negative")
        lengths[k] = (
            -data.draw(st.integers(1, 9)) if negative else lengths[k] + kw["values"].shape[0] + 1
        )
        kw["lengths"] = in_layout(data, lengths)
        kw.pop("num_dense_output_rows", None)
        kw.pop("selected_lengths_sum", None)
        return error(call, ("lengths", "offsets"), "lengths past values")
    if op == "jagged_index_add_2d_forward_v2":  # one row more than the offsets cover
        kw["values"] = torch.cat([kw["values"], kw["values"].new_zeros((1, kw["values"].shape[1]))])
        return error(call, ("input_offsets", "values"), "values past input_offsets")
    if op == "jagged_unique_indices":
        idx = kw["indices"]
        kw["indices"] = idx[:-1] if idx.numel() else torch.zeros(1, dtype=idx.dtype)
        return error(call, ("offsets", "indices"), "offsets do not end at indices")
    if op == "batch_index_select_dim0":
        arg = data.draw(st.sampled_from(("inputs", "indices")), label="argument")
        kw[arg] = kw[arg][:-1]
        return error(call, (arg,), f"{arg} too short")
    csr = kw.get("csr_seg")
    if op == "segment_sum_csr" and kw["batch_size"] > 0 and csr.numel() > 1 and int(csr.max()):
        end = int(kw["csr_seg"].max()) * kw["batch_size"]
        kw["values"] = kw["values"].reshape(-1)[: end - 1]
        return error(call, ("csr_seg",), "csr_seg past values")
    if op == "jagged_index_select_2d_forward_v2" and kw["indices"].numel():
        kw["output_offsets"] = kw["output_offsets"][:-1]
        return error(call, ("output_offsets",), "output_offsets shorter than indices")
    return None


def _sizes(data: Any, call: Call) -> Case | None:
    kw, op, total = call.kwargs, call.op, call.facts.get("total", 0)
    if op in ("jagged_index_select", "jagged_index_select_2d_forward_v2"):
        arg, bad = "num_dense_output_rows", (total + 1, total + 1000, -1, 2**40)
    elif op == "keyed_jagged_index_select_dim1":
        arg, bad = "selected_lengths_sum", (total + 1, total - 1, -1, 2**40)
    elif op == "jagged_index_add_2d_forward_v2":  # too few output rows, or too many to allocate
        arg, bad = "num_output_rows", (-1, 2**40) + ((0,) if total else ())
    elif op in ("lengths_range", "lengths_range_out"):
        arg, bad = "shape", ([total + 1], [-1], [2**20, 2**20], [total, 2])
        bad = tuple(s for s in bad if s != [0, 2])
    elif op == "offsets_range":
        arg = "range_size"
        bad = (-1, 2**40) if kw["offsets"].dtype == torch.int64 else (-1, M + 5)
        bad += (int(kw["offsets"].max()) - 1,) if int(kw["offsets"].max()) > 0 else ()
    elif op == "segment_sum_csr" and kw["csr_seg"].numel() > 1 and int(kw["csr_seg"].max()):
        arg, bad = "batch_size", (kw["values"].numel() + 1, 2**40)
    elif op == "batch_index_select_dim0":
        return _table_lists(data, call)
    else:
        return None
    kw[arg] = data.draw(st.sampled_from(bad), label=arg)
    return error(call, (arg, "offsets", "csr_seg"), f"{arg} {kw[arg]}")


def _table_lists(data: Any, call: Call) -> Case:
    """A list argument of ``batch_index_select_dim0`` that disagrees with the tensors or holds
    non-positive sizes."""
    kw = call.kwargs
    arg = data.draw(
        st.sampled_from(("input_rows", "input_columns", "input_num_indices")), label="list"
    )
    values = list(kw[arg])
    how = data.draw(st.sampled_from(("more", "zero", "negative", "huge", "length")), label="how")
    t = data.draw(st.integers(0, len(values) - 1), label="table")
    if how == "length":
        values = values + [1]
    else:
        values[t] = {"more": values[t] + 1, "zero": 0, "negative": -1, "huge": 2**40}[how]
    kw[arg] = values
    return error(call, (arg, "inputs", "indices"), f"{arg} {how}")


def _int32(data: Any, call: Call) -> Case | None:
    """int32 lengths, offsets, boundaries or hash sizes at 2**31: sums that wrap."""
    kw, op, near = call.kwargs, call.op, M - 1 - data.draw(st.integers(0, 10), label="below")
    if op == "keyed_jagged_index_select_dim1" and kw["lengths"].numel() >= 2:
        # lengths and their offsets consistent, in int32: the offsets wrap past 2**31
        v = kw["lengths"].to(torch.int64).tolist()
        v[0] = v[1] = near
        lengths = torch.tensor(v)
        kw["lengths"], kw["offsets"] = lengths.int(), lengths_to_offsets(lengths, torch.int32)
        kw.pop("selected_lengths_sum", None)
        return error(call, ("lengths", "offsets"), "offsets wrap int32")
    if op in ("jagged_index_select", "lengths_range", "lengths_range_out"):
        arg = "lengths" if op == "jagged_index_select" else "t_in"
        if op == "jagged_index_select":
            _select_something(kw)
        v = kw[arg].tolist() + [0, 0]  # two entries more where there are fewer than two
        v[0] = v[1] = near
        kw[arg] = in_layout(data, torch.tensor(v, dtype=torch.int32))
        if op == "lengths_range_out":
            kw["output"] = kw["output"].to(torch.int32)
        for extra in ("num_dense_output_rows", "shape"):
            kw.pop(extra, None)
        return error(call, (arg,), f"{arg} near 2**31")
    if op == "offsets_range" or (op == "segment_sum_csr" and kw["csr_seg"].numel() > 1):
        arg = "offsets" if op == "offsets_range" else "csr_seg"
        o = kw[arg].to(torch.int64).tolist()
        o[-1] = near
        kw[arg] = in_layout(data, torch.tensor(o, dtype=torch.int32))
        if op == "segment_sum_csr":
            kw["batch_size"] = max(kw["batch_size"], 1)
        return error(call, (arg,), f"{arg} near 2**31")
    if op == "jagged_unique_indices":
        return _unique_near_max(data, call)
    return None


def _unique_near_max(data: Any, call: Call) -> Case:
    """Hash sizes near 2**31 in int32: ids up to the top are valid (the reference's Python ints
    do not wrap); an id past it wraps in ``indices + hash_size_cumsum``."""
    i32 = torch.int32
    big = M - 8
    ids = [3, big - 4, data.draw(st.integers(0, big - 6), label="id")]
    wrap = data.draw(st.booleans(), label="wrap")
    if wrap:
        ids[1] = M - 1 - data.draw(st.integers(0, 3), label="below")
    call.kwargs = {
        "hash_size_cumsum": torch.tensor([0, 5, 5 + big], dtype=i32),
        "hash_size_offsets": torch.tensor([0, 1, 2], dtype=i32),
        "offsets": torch.tensor([0, 1, 3], dtype=i32),
        "indices": in_layout(data, torch.tensor(ids, dtype=i32)),
    }
    if wrap:
        return error(call, ("indices",), "indices wrap int32")
    return case(call, label="hash sizes near 2**31")


def _empty(data: Any, call: Call) -> Case | None:
    """Empty and zero-size arguments where the op needs them not to be."""
    kw, op = call.kwargs, call.op
    i64 = torch.zeros(0, dtype=torch.int64)
    if op == "jagged_index_select":  # no size and nothing selected: the size is unknown
        kw["indices"] = kw["indices"][:0]
        kw.pop("num_dense_output_rows", None)
        return error(call, ("indices",), "no indices, no size")
    if op == "jagged_index_select_2d_forward_v2":
        if data.draw(st.booleans(), label="empty input_offsets") and kw["indices"].numel():
            kw["input_offsets"] = i64
            return error(call, ("input_offsets",), "empty input_offsets")
        kw["indices"], kw["output_offsets"] = kw["indices"][:0], i64
        kw.pop("num_dense_output_rows", None)
        return error(call, ("output_offsets",), "no segments, no size")
    if op == "jagged_index_add_2d_forward_v2" and kw["values"].shape[0]:
        kw["indices"], kw["input_offsets"], kw["output_offsets"] = kw["indices"][:0], i64, i64
        return error(call, ("values",), "rows but no segment")
    if op == "keyed_jagged_index_select_dim1":
        kw["batch_size"] = data.draw(st.sampled_from((0, -1)), label="batch_size")
        return error(call, ("batch_size",), "batch_size 0")
    if op == "group_index_select_dim0":
        kw["input_group"], kw["indices_group"] = [], []
        return error(call, ("input_group", "indices_group"), "empty group")
    if op == "batch_index_select_dim0":  # no table at all: an empty output (or a clear error)
        call.kwargs = {**kw, "inputs": kw["inputs"][:0], "indices": kw["indices"][:0]}
        for arg in ("input_num_indices", "input_rows", "input_columns"):
            call.kwargs[arg] = []
        return case(call, expect="equal_or_error", names=("inputs",), label="no tables")
    if op == "offsets_range":
        kw["offsets"] = kw["offsets"][:0]
        kw["range_size"] = data.draw(st.sampled_from((1, 7)), label="range_size")
        return error(call, ("offsets",), "empty offsets")
    if op == "segment_sum_csr":
        kw["csr_seg"], kw["batch_size"] = kw["csr_seg"][:0], max(kw["batch_size"], 1)
        return error(call, ("csr_seg",), "empty csr_seg")
    if op == "jagged_unique_indices":
        arg = data.draw(st.sampled_from(("hash_size_cumsum", "offsets")), label="argument")
        kw[arg] = kw[arg][:0]
        return error(call, (arg,), f"empty {arg}")
    return None


DATA_SPOILERS = {
    "indices out of range": _indices,
    "offsets": _offsets,
    "lengths do not match values": _lengths,
    "sizes": _sizes,
    "int32 near 2**31": _int32,
    "empty": _empty,
}
