"""Specs for the jagged index-select ops: ``fbgemm::jagged_index_select``,
``jagged_index_select_2d_forward_v2``, ``jagged_index_add_2d_forward_v2`` and (upstream: CUDA
only) ``keyed_jagged_index_select_dim1``.

Inputs: ``values`` float32 / float16 / bfloat16 / int32 / int64 rows (1 to 4 columns; 0 columns
sometimes), sometimes non-contiguous (transposed storage or every other row); ``lengths`` with
zero-length segments and empty batches; ``indices`` int32 / int64 with repeats and drops; the
output size omitted, given exactly, or given smaller (a truncated output); ``values`` longer than
the lengths' sum (an ignored tail).  Edge cases in ``examples``: empty selections (upstream raises
without a size, returns empty with size 0), zero-length rows only, one long row.

Oracles: upstream's CPU kernels (exact: every output is a copy, except the adds).
``keyed_jagged_index_select_dim1`` has no CPU kernel upstream: its spec runs
:func:`keyed_reference` (plain Python loops over the segments, read from upstream's CUDA kernel)
on the CPU side.  Gradients: ``[grad]`` specs on float values; repeated segments make them sums
(``SUMS`` tolerances: upstream adds in the values' dtype in a thread-dependent order, ours in
another order).  Budgets: the kernels' launch counts (``native/fbgemm/index_select``) plus the
data checks' fixed cost when ``FBGEMM_NPU_VALIDATE`` is on; 1 sync when no output size is given.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, Compare, OpSpec, TensorView, Tol
from conformance.strategies import values as fill_values
from fbgemm_npu.native._checks import validation_enabled

F = torch.ops.fbgemm
VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)
EXACT = Compare({d: Tol(0.0, 0.0) for d in (*FLOATS, torch.float64)})
# Sums of a few terms in [-10, 10] (repeated segments), rounded per add in the dtype:
# a few units in the last place of partial sums up to ~40.
SUMS = Compare(
    {
        torch.float32: Tol(rtol=1e-6, atol=2e-5),
        torch.float16: Tol(rtol=4e-3, atol=4e-2),
        torch.bfloat16: Tol(rtol=3e-2, atol=0.25),
        torch.float64: Tol(rtol=1e-12, atol=1e-12),
    }
)
# (kernel launches, data-check launches) per call; see the kernels' docstrings.
COSTS = {
    "jagged_index_select": ((10, 4), (10, 9)),  # (size omitted, size given)
    "jagged_index_select_2d_forward_v2": ((10, 7), (9, 12)),
    "jagged_index_add_2d_forward_v2": ((10, 12), (10, 12)),
    "keyed_jagged_index_select_dim1": ((11, 7), (11, 12)),
}


def _budget(name: str, given: bool, extra: int = 0) -> Budget:
    kernel, checks = COSTS[name][int(given)]
    launches = kernel + extra + (checks if validation_enabled() else 0)
    return Budget(launches, 0 if given else 1)


def _seed(draw: st.DrawFn) -> int:
    return draw(st.integers(0, 2**31 - 1))


def _rows(draw: st.DrawFn, n: int, cols: int, dtype: torch.dtype) -> torch.Tensor | TensorView:
    """``(n, cols)`` values, contiguous or a non-contiguous view of the same values."""
    fill = draw(st.sampled_from(("small_ints", "uniform") if dtype.is_floating_point else
                                ("signed",)))  # fmt: skip
    t = fill_values((n, cols), dtype, fill, _seed(draw))
    layout = draw(st.sampled_from(("contiguous", "contiguous", "transposed", "every_other")))
    if layout == "transposed":
        return TensorView(t.t().contiguous(), lambda x: x.t(), "transposed")
    if layout == "every_other":
        base = torch.zeros((2 * n + 1, cols), dtype=dtype)
        base[1::2] = t
        return TensorView(base, lambda x: x[1::2], "rows [1::2]")
    return t


def _jagged(draw: st.DrawFn, max_segments: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """(lengths int64, indices int64) of a valid selection; repeats and drops included."""
    b_in = draw(st.integers(1, max_segments))
    gen = torch.Generator().manual_seed(_seed(draw))
    high = draw(st.sampled_from((1, 4, 12)))
    lengths = torch.randint(0, high, (b_in,), generator=gen)
    if draw(st.integers(0, 4)) == 0:
        lengths.zero_()
    b_out = draw(st.integers(1, 10))
    indices = torch.randint(0, b_in, (b_out,), generator=gen)
    return lengths, indices


@st.composite
def select_inputs(draw: st.DrawFn, v2: bool = False, dtypes: tuple = VALUE_DTYPES) -> dict:
    """A ``jagged_index_select`` call (or the v2 op's, with inclusive int64 offsets)."""
    lengths, indices = _jagged(draw)
    dtype = draw(st.sampled_from(dtypes))
    cols = draw(st.sampled_from((1, 2, 3, 4, 0) if not v2 else (1, 2, 4)))
    tail = draw(st.sampled_from((0, 0, 2)))
    n = int(lengths.sum()) + tail
    out_total = int(lengths[indices].sum())
    args: dict[str, Any] = {"values": _rows(draw, n, cols, dtype)}
    idx_dtype = draw(st.sampled_from(INDEX_DTYPES))
    if v2:
        args["indices"] = indices.to(idx_dtype)
        args["input_offsets"] = lengths.cumsum(0)
        args["output_offsets"] = lengths[indices].cumsum(0)
    else:
        args["lengths"] = lengths.to(draw(st.sampled_from(INDEX_DTYPES)))
        args["indices"] = indices.to(idx_dtype)
    size = draw(st.sampled_from(("omitted", "exact", "smaller")))
    if size == "exact":
        args["num_dense_output_rows"] = out_total
    elif size == "smaller":
        args["num_dense_output_rows"] = draw(st.integers(0, out_total))
    return args


@st.composite
def add_inputs(draw: st.DrawFn, dtypes: tuple = VALUE_DTYPES) -> dict:
    """A ``jagged_index_add_2d_forward_v2`` call as the select's backward makes it."""
    lengths, indices = _jagged(draw)
    dtype = draw(st.sampled_from(dtypes))
    out_lengths = lengths[indices]
    m = int(out_lengths.sum())
    return {
        "values": _rows(draw, m, draw(st.sampled_from((1, 2, 4))), dtype),
        "indices": indices.to(draw(st.sampled_from(INDEX_DTYPES))),
        "input_offsets": out_lengths.cumsum(0),
        "output_offsets": lengths.cumsum(0),
        "num_output_rows": int(lengths.sum()) + draw(st.sampled_from((0, 0, 2))),
        "num_dense_input_rows": m,
    }


def _select_examples() -> tuple[dict, ...]:
    v = torch.arange(12.0).view(6, 2)
    i64 = torch.int64
    return (
        {"values": v, "lengths": torch.tensor([1, 2, 3]), "indices": torch.tensor([2, 0, 2])},
        {"values": v, "lengths": torch.tensor([0, 0, 0]), "indices": torch.tensor([1, 2])},
        {
            "values": v,
            "lengths": torch.tensor([6]),
            "indices": torch.tensor([0, 0], dtype=i64),
            "num_dense_output_rows": 7,
        },  # fmt: skip
        {
            "values": v,
            "lengths": torch.tensor([1, 2, 3]),
            "indices": torch.zeros(0, dtype=i64),
            "num_dense_output_rows": 0,
        },  # fmt: skip
        # upstream raises: no indices and no size; 1-D values
        {"values": v, "lengths": torch.tensor([1, 2, 3]), "indices": torch.zeros(0, dtype=i64)},
        {"values": v[:, 0], "lengths": torch.tensor([1, 2, 3]), "indices": torch.tensor([1])},
    )


# ---- keyed_jagged_index_select_dim1: the reference (upstream has no CPU kernel) -----------------


def keyed_reference(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int,
    weights: torch.Tensor | None = None,
    selected_lengths_sum: int | None = None,
) -> list[torch.Tensor]:
    """Loop over (batch, selected sample): output segment ``n * K + j`` copies input segment
    ``n * batch_size + indices[j]`` (starting at ``offsets`` of it); truncated to
    ``selected_lengths_sum`` rows when given, as upstream's CUDA kernel writes only those."""
    num_batches = lengths.numel() // batch_size
    lens, offs = lengths.tolist(), offsets.tolist()
    src: list[int] = []
    out_lengths = []
    for n in range(num_batches):
        for j in indices.tolist():
            seg = n * batch_size + j
            out_lengths.append(lens[seg])
            src.extend(range(offs[seg], offs[seg] + lens[seg]))
    if selected_lengths_sum is not None:
        src = src[:selected_lengths_sum]
    idx = torch.tensor(src, dtype=torch.int64)
    out = [values[idx], torch.tensor(out_lengths, dtype=lengths.dtype)]
    if weights is not None:
        out.append(weights[idx])
    return out


def _keyed_op(**kw: Any) -> Any:
    """Ours on npu tensors; the reference on CPU tensors (upstream has no CPU kernel)."""
    if kw["values"].device.type == "cpu":
        return keyed_reference(**kw)
    return F.keyed_jagged_index_select_dim1(**kw)


@st.composite
def keyed_inputs(draw: st.DrawFn, dtypes: tuple = (*VALUE_DTYPES, torch.float64, torch.int8),
                 weights: tuple = (False, True)) -> dict:  # fmt: skip
    batch_size = draw(st.integers(1, 6))
    num_batches = draw(st.integers(0, 4))
    gen = torch.Generator().manual_seed(_seed(draw))
    l_dtype = draw(st.sampled_from(INDEX_DTYPES))
    lengths = torch.randint(0, draw(st.sampled_from((1, 3, 6))), (num_batches * batch_size,),
                            generator=gen)  # fmt: skip
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    k = draw(st.integers(0, 6))
    indices = torch.randint(0, batch_size, (k,), generator=gen)
    dtype = draw(st.sampled_from(dtypes))
    n = int(lengths.sum()) + draw(st.sampled_from((0, 0, 3)))
    fill = "uniform" if dtype.is_floating_point else "signed"
    vals = fill_values((n,), dtype, fill, _seed(draw))
    args: dict[str, Any] = {
        "values": vals if draw(st.booleans()) else TensorView(
            torch.stack([vals, vals], 1).reshape(-1), lambda x: x[::2], "every other"),
        "lengths": lengths.to(l_dtype),
        "offsets": offsets.to(draw(st.sampled_from(INDEX_DTYPES))),
        "indices": indices.to(draw(st.sampled_from(INDEX_DTYPES))),
        "batch_size": batch_size,
    }  # fmt: skip
    if draw(st.sampled_from(weights)):
        w_dtype = draw(st.sampled_from((torch.float32, torch.float16)))
        args["weights"] = fill_values((n,), w_dtype, "uniform", _seed(draw))
    total = int(sum(lengths[b * batch_size + j] for b in range(num_batches) for j in indices))
    size = draw(st.sampled_from(("omitted", "exact", "smaller")))
    if size != "omitted":
        args["selected_lengths_sum"] = total if size == "exact" else draw(st.integers(0, total))
    return args


def _keyed_budget(**kw: Any) -> Budget:
    given = kw.get("selected_lengths_sum") is not None
    return _budget("keyed_jagged_index_select_dim1", given, int(kw.get("weights") is not None))


def _keyed_examples() -> tuple[dict, ...]:
    vals = torch.arange(1.0, 12.0)
    lengths = torch.tensor([1, 2, 3, 0, 4, 1])  # two keys, batch_size 3
    offsets = torch.tensor([0, 1, 3, 6, 6, 10, 11])
    base = {"values": vals, "lengths": lengths, "offsets": offsets, "batch_size": 3}
    return (
        {**base, "indices": torch.tensor([2, 0])},
        {**base, "indices": torch.tensor([1, 1, 1]), "weights": vals * 0.5},
        {**base, "indices": torch.tensor([2, 0]), "selected_lengths_sum": 5},
        {**base, "indices": torch.zeros(0, dtype=torch.int64)},
    )


def _kw(fn: Any) -> Any:
    return lambda **kw: fn(**kw)


def _sel_budget(name: str) -> Any:
    return lambda **kw: _budget(name, kw.get("num_dense_output_rows") is not None)


_KEYED_NOTE = "CUDA-only upstream: judged by keyed_reference (loops over the segments)"
SPECS = [
    OpSpec("jagged_index_select", _kw(F.jagged_index_select), select_inputs(), EXACT,
           _sel_budget("jagged_index_select"), examples=_select_examples()),
    OpSpec("jagged_index_select[grad]", _kw(F.jagged_index_select),
           select_inputs(dtypes=FLOATS), SUMS, _sel_budget("jagged_index_select"),
           backward=True, grad_inputs=("values",)),
    OpSpec("jagged_index_select_2d_forward_v2", _kw(F.jagged_index_select_2d_forward_v2),
           select_inputs(v2=True), EXACT, _sel_budget("jagged_index_select_2d_forward_v2")),
    OpSpec("jagged_index_add_2d_forward_v2", _kw(F.jagged_index_add_2d_forward_v2), add_inputs(),
           SUMS, lambda **kw: _budget("jagged_index_add_2d_forward_v2", True)),
    OpSpec("keyed_jagged_index_select_dim1", _keyed_op, keyed_inputs(), EXACT, _keyed_budget,
           examples=_keyed_examples(), notes=_KEYED_NOTE),
    OpSpec("keyed_jagged_index_select_dim1[grad]", _keyed_op,
           keyed_inputs(dtypes=FLOATS + (torch.float64,), weights=(False,)), SUMS, _keyed_budget,
           backward=True, grad_inputs=("values",), notes=_KEYED_NOTE),
]  # fmt: skip
