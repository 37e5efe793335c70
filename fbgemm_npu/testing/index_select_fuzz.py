"""Drawn calls of the index-select family's fuzz tests (``tests/fuzz/test_fuzz_index_select.py``).

:func:`valid_call` draws a valid call of one op of the family: keyword arguments holding CPU
tensors in drawn layouts (strided, transposed, stride 0, storage offsets; the harness reproduces
them on npu), the oracle that judges it (upstream's CPU kernel, or for the CUDA-only ops and the
half-type segment sums the references of :mod:`fbgemm_npu.testing.index_select_inputs`), and the
inputs whose gradients are compared where autograd exists.  :attr:`Call.facts` keeps what a
hostile variant needs to know about the call (the selected total, the number of segments).

The valid domain is the contract of ``fbgemm_npu/native/fbgemm/index_select``: lengths
non-negative summing within the values, offsets that start at 0, do not decrease and end within
the data, indices inside their segments, tables or features, sizes that match the data (or, for
the jagged selects, truncate it).  Float values are multiples of 1/4 below 4 in magnitude, so
that sums over repeated segments are exact in every float dtype whatever the order of the adds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz_strategies import in_layout, lengths_to_offsets, seeded

__all__ = ["KEYED_VALUES", "OPS", "VALUES", "WEIGHTS", "Call", "fill", "valid_call"]

I32, I64 = torch.int32, torch.int64
INDEX = (I32, I64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
VALUES = (*FLOATS, I32, I64)  # upstream's jagged select / add, segment_sum_csr
KEYED_VALUES = (*VALUES, torch.float64, torch.int8, torch.uint8, torch.int16)
WEIGHTS = (*FLOATS, torch.float64)
REF = "fbgemm_npu.testing.index_select_inputs:"
OPS = (
    "jagged_index_select",
    "jagged_index_select_2d_forward_v2",
    "jagged_index_add_2d_forward_v2",
    "keyed_jagged_index_select_dim1",
    "batch_index_select_dim0",
    "group_index_select_dim0",
    "lengths_range",
    "lengths_range_out",
    "offsets_range",
    "segment_sum_csr",
    "jagged_unique_indices",
)


@dataclasses.dataclass
class Call:
    """One valid call: ``fbgemm::<op>(**kwargs)``, judged by ``oracle`` (None: upstream CPU)."""

    op: str
    kwargs: dict[str, Any]
    oracle: str | None = None
    grad: tuple[str, ...] = ()
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def target(self) -> str:
        return f"fbgemm::{self.op}"


def fill(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Values of ``dtype``: quarters in [-4, 4) for floats (exact sums), the whole range for
    integers (their sums wrap alike in any order)."""
    if dtype.is_floating_point:
        return (torch.randint(-16, 16, shape, generator=gen) / 4).to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=gen).to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -(2**62)), min(info.max, 2**62)
    return torch.randint(low, high, shape, generator=gen, dtype=I64).to(dtype)


def _pick(data: Any, options: tuple[Any, ...], label: str) -> Any:
    return data.draw(st.sampled_from(options), label=label)


def _segments(data: Any, gen: torch.Generator, n: int) -> torch.Tensor:
    """``n`` non-negative int64 lengths: all zero sometimes, short or long otherwise."""
    high = _pick(data, (1, 4, 12), "max length")
    lengths = torch.randint(0, high, (n,), generator=gen)
    return lengths.zero_() if data.draw(st.integers(0, 5), label="zero lengths") == 0 else lengths


def _select(data: Any, gen: torch.Generator, v2: bool) -> Call:
    """``jagged_index_select`` (or the v2 op with inclusive int64 offsets)."""
    b_in = data.draw(st.integers(1, 8), label="segments")
    lengths = _segments(data, gen, b_in)
    indices = torch.randint(
        0, b_in, (data.draw(st.integers(0, 10), label="selected"),), generator=gen
    )
    total = int(lengths[indices].sum())
    dtype = _pick(data, VALUES, "values dtype")
    cols = _pick(data, (1, 2, 4) if v2 else (0, 1, 2, 3, 4), "columns")
    tail = _pick(data, (0, 0, 2), "tail")
    values = in_layout(data, fill(gen, (int(lengths.sum()) + tail, cols), dtype))
    idx = in_layout(data, indices.to(_pick(data, INDEX, "indices dtype")))
    if v2:
        kw = {"values": values, "indices": idx}
        kw["input_offsets"] = in_layout(data, lengths.cumsum(0))
        kw["output_offsets"] = in_layout(data, lengths[indices].cumsum(0))
    else:
        kw = {"values": values, "lengths": in_layout(data, lengths.to(_pick(data, INDEX, "l")))}
        kw["indices"] = idx
    size = _pick(data, ("omitted", "exact", "smaller"), "size")
    if size == "exact" or indices.numel() == 0:
        kw["num_dense_output_rows"] = total
    elif size == "smaller":
        kw["num_dense_output_rows"] = data.draw(st.integers(0, total), label="rows")
    truncated = kw.get("num_dense_output_rows", total) < total
    grad = ("values",) if not v2 and dtype == torch.float32 and not truncated else ()
    op = "jagged_index_select_2d_forward_v2" if v2 else "jagged_index_select"
    facts = {"lengths": lengths, "indices": indices, "total": total}
    return Call(op, kw, grad=grad, facts=facts)


def _add(data: Any, gen: torch.Generator) -> Call:
    """``jagged_index_add_2d_forward_v2`` as the select's backward calls it."""
    b_in = data.draw(st.integers(1, 8), label="segments")
    lengths = _segments(data, gen, b_in)
    indices = torch.randint(
        0, b_in, (data.draw(st.integers(1, 10), label="selected"),), generator=gen
    )
    out_lengths = lengths[indices]
    m = int(out_lengths.sum())
    dtype = _pick(data, VALUES, "values dtype")
    kw = {
        "values": in_layout(data, fill(gen, (m, _pick(data, (1, 2, 4), "columns")), dtype)),
        "indices": in_layout(data, indices.to(_pick(data, INDEX, "indices dtype"))),
        "input_offsets": in_layout(data, out_lengths.cumsum(0)),
        "output_offsets": in_layout(data, lengths.cumsum(0)),
        "num_output_rows": int(lengths.sum()) + _pick(data, (0, 0, 2), "tail"),
        "num_dense_input_rows": m,
    }
    return Call("jagged_index_add_2d_forward_v2", kw, facts={"total": m})


def _keyed(data: Any, gen: torch.Generator) -> Call:
    batch_size = data.draw(st.integers(1, 6), label="batch_size")
    lengths = _segments(data, gen, data.draw(st.integers(0, 4), label="keys") * batch_size)
    indices = torch.randint(
        0, batch_size, (data.draw(st.integers(0, 6), label="K"),), generator=gen
    )
    n = int(lengths.sum()) + _pick(data, (0, 0, 3), "tail")
    dtype = _pick(data, KEYED_VALUES, "values dtype")
    kw: dict[str, Any] = {
        "values": in_layout(data, fill(gen, (n,), dtype)),
        "lengths": in_layout(data, lengths.to(_pick(data, INDEX, "lengths dtype"))),
        "offsets": in_layout(data, lengths_to_offsets(lengths, _pick(data, INDEX, "o"))),
        "indices": in_layout(data, indices.to(_pick(data, INDEX, "indices dtype"))),
        "batch_size": batch_size,
    }
    if data.draw(st.booleans(), label="weights"):
        kw["weights"] = in_layout(data, fill(gen, (n,), _pick(data, WEIGHTS, "weights dtype")))
    sel = (torch.arange(lengths.numel() // batch_size).view(-1, 1) * batch_size + indices).view(-1)
    total = int(lengths[sel].sum())
    if data.draw(st.booleans(), label="selected_lengths_sum"):
        kw["selected_lengths_sum"] = total
    grad = ("values",) if dtype == torch.float32 else ()
    return Call(
        "keyed_jagged_index_select_dim1", kw, REF + "keyed_reference", grad, {"total": total}
    )


def _batch(data: Any, gen: torch.Generator) -> Call:
    t = data.draw(st.integers(1, 4), label="tables")
    permute = data.draw(st.booleans(), label="permute_output_dim_0_1")
    rows = [data.draw(st.integers(1, 6), label="rows") for _ in range(t)]
    one = data.draw(st.booleans(), label="one width")
    cols = [data.draw(st.integers(1, 4), label="cols") for _ in range(1 if one else t)] * (
        t if one else 1
    )
    n = data.draw(st.integers(1, 5), label="count")
    counts = [n] * t if permute else [data.draw(st.integers(1, 5), label="c") for _ in range(t)]
    dtype = _pick(data, (*VALUES, torch.float64), "inputs dtype")
    inputs = fill(gen, (sum(r * c for r, c in zip(rows, cols, strict=True)),), dtype)
    idx = torch.cat(
        [torch.randint(0, r, (k,), generator=gen) for r, k in zip(rows, counts, strict=True)]
    )
    kw = {
        "inputs": in_layout(data, inputs),
        "indices": in_layout(data, idx.to(_pick(data, INDEX, "indices dtype"))),
        "input_num_indices": counts,
        "input_rows": rows,
        "input_columns": cols,
        "permute_output_dim_0_1": permute,
    }
    grad = ("inputs",) if dtype == torch.float32 else ()
    return Call("batch_index_select_dim0", kw, grad=grad)


def _group(data: Any, gen: torch.Generator) -> Call:
    members, indices = [], []
    # one dtype and one index dtype per group: a mix is refused (upstream's CUDA kernel's
    # ValueError; tests/fbgemm/index_select/test_index_select_errors.py)
    dtype = _pick(data, (*VALUES, torch.float64), "dtype")
    i_dtype = _pick(data, INDEX, "indices dtype")
    for _ in range(data.draw(st.integers(1, 4), label="members")):
        rows = data.draw(st.integers(1, 6), label="rows")
        inner = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2), label="inner dims"))
        members.append(in_layout(data, fill(gen, (rows, *inner), dtype)))
        idx = torch.randint(
            0, rows, (data.draw(st.integers(0, 6), label="selected"),), generator=gen
        )
        indices.append(in_layout(data, idx.to(i_dtype)))
    # upstream's backward returns a wrongly shaped gradient for a member of zero-width rows,
    # allocates by garbage for a member without indices, and fails on members of mixed ranks
    floats = all(m.dtype == torch.float32 and m[0].numel() > 0 for m in members)
    floats = floats and all(i.numel() > 0 for i in indices)
    floats = floats and len({m.dim() for m in members}) == 1
    kw = {"input_group": members, "indices_group": indices}
    return Call("group_index_select_dim0", kw, grad=("input_group",) if floats else ())


def _shape(data: Any, total: int) -> list[int]:
    """A shape with ``total`` elements: ``[total]``, ``[1, total]`` or a factorization."""
    divisors = [d for d in range(1, total + 1) if total % d == 0] or [1]
    d = _pick(data, tuple(divisors), "factor")
    return _pick(data, ([total], [1, total], [d, total // d]), "shape")


def _lengths_range(data: Any, gen: torch.Generator, out: bool) -> Call:
    lengths = _segments(data, gen, data.draw(st.integers(0, 8), label="n"))
    dtype = _pick(data, INDEX, "dtype")
    kw: dict[str, Any] = {"t_in": in_layout(data, lengths.to(dtype))}
    total = int(lengths.sum())
    if data.draw(st.booleans(), label="shape given"):
        kw["shape"] = _shape(data, total)
    if not out:
        return Call("lengths_range", kw, facts={"total": total})
    size = data.draw(st.integers(0, 12), label="output size")
    output = torch.full((size,), -7, dtype=dtype)
    kw = {"output": in_layout(data, output, ("contiguous", "strided", "offset")), **kw}
    return Call("lengths_range_out", kw, facts={"total": total})


def _offsets_range(data: Any, gen: torch.Generator) -> Call:
    lengths = _segments(data, gen, data.draw(st.integers(1, 8), label="n"))
    offsets = lengths_to_offsets(lengths, _pick(data, INDEX, "dtype"))[:-1]
    range_size = int(lengths.sum())
    kw = {"offsets": in_layout(data, offsets), "range_size": range_size}
    return Call("offsets_range", kw, facts={"total": range_size})


def _segment_sum(data: Any, gen: torch.Generator) -> Call:
    batch_size = data.draw(st.integers(-1, 4), label="batch_size")
    n_seg = data.draw(st.integers(0, 6), label="segments")
    start = data.draw(st.integers(0, 2), label="first boundary")
    csr = start + lengths_to_offsets(_segments(data, gen, n_seg), I64)
    dtype = _pick(data, VALUES, "values dtype")
    n = int(csr[-1]) * max(batch_size, 1) + _pick(data, (0, 0, 5), "tail")
    shape = _pick(data, ((n,), (1, n)), "values shape")
    kw = {
        "batch_size": batch_size,
        "csr_seg": in_layout(data, csr.to(_pick(data, INDEX, "csr dtype"))),
        "values": in_layout(data, fill(gen, shape, dtype)),
    }
    half = dtype in (torch.float16, torch.bfloat16)
    oracle = REF + "segment_sum_reference" if half else None
    return Call("segment_sum_csr", kw, oracle, facts={"segments": n_seg})


def _unique(data: Any, gen: torch.Generator) -> Call:
    """Features of hash sizes 0 to 20, every one its own group or grouped (torchrec's dedup:
    one table's features share a range, ``hsc`` repeats); ids past their own feature's size
    sometimes (still inside ``[hsc[0], hsc[T])``)."""
    n_feat = data.draw(st.integers(1, 4), label="features")
    batch = data.draw(st.integers(1, 4), label="batch")
    sizes = [_pick(data, (0, 1, 5, 20), "hash size") for _ in range(n_feat)]
    hsc = lengths_to_offsets(torch.tensor(sizes), I64)
    if data.draw(st.booleans(), label="partition"):
        hso = list(range(n_feat + 1))
    else:
        inner = data.draw(
            st.lists(st.integers(0, n_feat), min_size=n_feat - 1, max_size=n_feat - 1)
        )
        hso = [0, *sorted(inner), n_feat]
    top = int(hsc[-1])
    spill = top > 0 and data.draw(st.booleans(), label="ids past their feature")
    room = torch.tensor([top if spill else size for size in sizes]).repeat_interleave(batch)
    lengths = torch.randint(0, 6, (n_feat * batch,), generator=gen) * (room > 0)
    feature = torch.arange(n_feat).repeat_interleave(batch).repeat_interleave(lengths)
    # each id uniform in its feature's range, or (spill) anywhere in [hsc[0], hsc[T])
    lo = torch.zeros_like(feature) if spill else hsc[feature]
    span = torch.full_like(feature, top) if spill else hsc[feature + 1] - hsc[feature]
    linear = lo + (torch.rand(feature.numel(), generator=gen) * span).long()
    indices = linear - hsc[feature]
    dtype = _pick(data, INDEX, "dtype")
    kw = {
        "hash_size_cumsum": in_layout(data, hsc.to(dtype)),
        "hash_size_offsets": in_layout(data, torch.tensor(hso, dtype=dtype)),
        "offsets": in_layout(data, lengths_to_offsets(lengths, dtype)),
        "indices": in_layout(data, indices.to(dtype)),
    }
    return Call("jagged_unique_indices", kw, REF + "unique_reference", facts={"top": top})


def valid_call(data: Any, op: str) -> Call:
    """A valid call of ``op`` (one of :data:`OPS`)."""
    gen = seeded(data)
    builders = {
        "jagged_index_select": lambda: _select(data, gen, v2=False),
        "jagged_index_select_2d_forward_v2": lambda: _select(data, gen, v2=True),
        "jagged_index_add_2d_forward_v2": lambda: _add(data, gen),
        "keyed_jagged_index_select_dim1": lambda: _keyed(data, gen),
        "batch_index_select_dim0": lambda: _batch(data, gen),
        "group_index_select_dim0": lambda: _group(data, gen),
        "lengths_range": lambda: _lengths_range(data, gen, out=False),
        "lengths_range_out": lambda: _lengths_range(data, gen, out=True),
        "offsets_range": lambda: _offsets_range(data, gen),
        "segment_sum_csr": lambda: _segment_sum(data, gen),
        "jagged_unique_indices": lambda: _unique(data, gen),
    }
    return builders[op]()
