"""Specs for ``fbgemm::offsets_range``, ``lengths_range``, ``lengths_range_out`` and
``segment_sum_csr`` against upstream's CPU kernels.

Inputs: int32 / int64 offsets, lengths and CSR boundaries with zero-length segments, empty
batches and non-contiguous views (every other element); ``offsets_range`` with ``range_size`` at
or past the last offset (the last segment runs to it); ``lengths_range`` with ``shape`` omitted,
flat or 2-D (the output stays flat), ``lengths_range_out`` with a too-small or too-large
``output`` (resized); ``segment_sum_csr`` with ``batch_size`` 1 to 4 (0 and -1: every segment
empty), boundaries starting past 0, values longer than the segments, values float32 / float16 /
bfloat16 / int32 / int64 (int32 sums that wrap, as upstream's do).

Oracles and tolerances: the ranges are exact.  ``segment_sum_csr``: integers exact; float32
against upstream within ``1e-6 * scale`` (``scale`` = the segment's sum of ``|x|``: ours adds
in a device's order, upstream sequentially); float16 / bfloat16 against a float64 reference
within ``1e-2 * scale`` (upstream sums in the half type itself and drifts far: 3000 x 0.1 gives
256 / 32; ours accumulates in float32 and rounds once); strided ``values`` or ``csr_seg``
against the reference too (upstream's CPU kernel reads them through their raw data pointers,
ignoring the strides: wrong sums).  Budgets: the op's ``BUDGETS`` entry; ``shape`` given or not
selects the syncs of the lengths ranges, the values' dtype the path of the segment sums.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, TensorView, Tol
from conformance.specs.fbgemm.index_select.common import EXACT, INDEX_DTYPES, by_name, seed, stored
from conformance.strategies import values as fill_values

F = torch.ops.fbgemm
HALF = (torch.float16, torch.bfloat16)
SUM_DTYPES = (torch.float32, *HALF, torch.int32, torch.int64)


def _maybe_strided(draw: st.DrawFn, t: torch.Tensor) -> Any:
    if t.numel() and draw(st.booleans()):
        return TensorView(torch.stack([t, t], 1).reshape(-1), lambda x: x[::2], "every other")
    return t


def _lengths(draw: st.DrawFn, dtype: torch.dtype) -> torch.Tensor:
    n = draw(st.sampled_from((0, 1, 3, 8, 40)))
    high = draw(st.sampled_from((1, 3, 7)))
    lengths = torch.randint(0, high, (n,), generator=torch.Generator().manual_seed(seed(draw)))
    return lengths.to(dtype)


@st.composite
def offsets_range_inputs(draw: st.DrawFn) -> dict:
    lengths = _lengths(draw, torch.int64)
    if lengths.numel() == 0:
        return {
            "offsets": torch.zeros(0, dtype=draw(st.sampled_from(INDEX_DTYPES))),
            "range_size": 0,
        }
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]])
    range_size = int(lengths.sum()) + draw(st.sampled_from((0, 0, 3)))
    offsets = offsets.to(draw(st.sampled_from(INDEX_DTYPES)))
    return {"offsets": _maybe_strided(draw, offsets), "range_size": range_size}


@st.composite
def lengths_range_inputs(draw: st.DrawFn, out: bool = False) -> dict:
    dtype = draw(st.sampled_from(INDEX_DTYPES))
    lengths = _lengths(draw, dtype)
    args: dict[str, Any] = {"t_in": _maybe_strided(draw, lengths)}
    total = int(lengths.sum())
    shape = draw(st.sampled_from(("omitted", "flat", "2d")))
    if shape == "flat":
        args["shape"] = [total]
    elif shape == "2d":
        args["shape"] = [1, total]
    if out:
        size = draw(st.sampled_from((0, total, total + 5)))
        return {"output": torch.full((size,), -7, dtype=dtype), **args}
    return args


def _lengths_range_budget(op: str) -> Any:
    def use(**kw: Any) -> BudgetUse:
        sized = kw.get("shape") is not None
        return BudgetUse(op=op, path=None if sized else "no_shape", sized=sized)

    return use


# ---- segment_sum_csr ------------------------------------------------------------------------


@st.composite
def segment_inputs(draw: st.DrawFn) -> dict:
    counts = _lengths(draw, torch.int64)
    start = draw(st.sampled_from((0, 0, 2)))
    csr = torch.cat([torch.tensor([start]), start + counts.cumsum(0)])
    batch_size = draw(st.sampled_from((1, 2, 3, 4, 4, 0, -1)))
    dtype = draw(st.sampled_from(SUM_DTYPES))
    n = int(csr[-1]) * max(batch_size, 1) + draw(st.sampled_from((0, 0, 5)))
    fill = draw(
        st.sampled_from(
            ("uniform", "positive", "tenths") if dtype.is_floating_point else ("signed", "extreme")
        )
    )
    vals = fill_values((n,), dtype, fill, seed(draw))
    csr = csr.to(draw(st.sampled_from(INDEX_DTYPES)))
    return {
        "batch_size": batch_size,
        "csr_seg": _maybe_strided(draw, csr),
        "values": _maybe_strided(draw, vals),
    }


def segment_reference(batch_size: int, csr_seg: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Loop: ``out[s] = sum(values[csr[s] * bs : csr[s + 1] * bs])``, in float64 for floats and
    in int64 for integers, cast back to their dtype (int32 wraps, as upstream's sums do)."""
    bounds = [int(b) * batch_size for b in csr_seg.reshape(-1).tolist()]
    wide = torch.float64 if values.dtype.is_floating_point else torch.int64
    flat = values.reshape(-1).to(wide)
    pairs = zip(bounds[:-1], bounds[1:], strict=True)
    sums = [flat[a:b].sum() if b > a else flat.new_zeros(()) for a, b in pairs]
    out = torch.stack(sums) if sums else flat.new_zeros((0,))
    return out if wide == torch.float64 else out.to(values.dtype)


def _segment_use_reference(batch_size: int, csr_seg: torch.Tensor, values: torch.Tensor) -> bool:
    """Half types (upstream sums in them) and strided inputs: upstream's CPU kernel reads
    ``values`` and ``csr_seg`` through their raw data pointers, ignoring the strides."""
    return values.dtype in HALF or not (values.is_contiguous() and csr_seg.is_contiguous())


def _segment_scale(batch_size: int, csr_seg: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return segment_reference(batch_size, csr_seg, values.to(torch.float64).abs())


SEGMENT_COMPARE = Compare(
    {
        torch.float32: Tol(rtol=1e-6, atol=1e-6),
        torch.float16: Tol(rtol=1e-2, atol=1e-3),
        torch.bfloat16: Tol(rtol=1e-2, atol=1e-3),
    },
    scale=_segment_scale,
)


def _segment_budget(batch_size: int, csr_seg: Any, values: Any) -> BudgetUse:
    if batch_size <= 0 or stored(csr_seg).numel() < 2:
        return BudgetUse(path="no_segments")
    dtype = stored(values).dtype
    if dtype == torch.int64:  # an int64 index_add_: the AI CPU's (budgets.py says so)
        return BudgetUse(path="int64_values")
    return BudgetUse(path=None if dtype in HALF else "no_cast")


def _segment_examples() -> tuple[dict, ...]:
    seg = torch.tensor([0, 1, 3, 6])
    return (
        {"batch_size": 2, "csr_seg": seg, "values": torch.arange(1.0, 13.0)},
        {
            "batch_size": 1,
            "csr_seg": torch.tensor([0, 3000]),
            "values": torch.full((3000,), 0.1, dtype=torch.float16),
        },  # upstream: 256, not 300
        {
            "batch_size": 1,
            "csr_seg": torch.tensor([0, 3000]),
            "values": torch.full((3000,), 0.1, dtype=torch.bfloat16),
        },  # upstream: 32
        {
            "batch_size": 2,
            "csr_seg": seg.int(),
            "values": torch.full((12,), 2**30, dtype=torch.int32),
        },  # wraps
        {"batch_size": 2, "csr_seg": torch.tensor([0]), "values": torch.ones(3)},
        {"batch_size": 2, "csr_seg": torch.tensor([1, 2, 4]), "values": torch.arange(1.0, 13.0)},
        {"batch_size": 2, "csr_seg": torch.zeros(0, dtype=torch.int64), "values": torch.ones(3)},
        {"batch_size": 2, "csr_seg": seg, "values": torch.ones(12, dtype=torch.float64)},
    )


SPECS = [
    OpSpec(
        "offsets_range",
        by_name(F.offsets_range),
        offsets_range_inputs(),
        EXACT,
        examples=(
            {"offsets": torch.tensor([0, 2, 2, 5]), "range_size": 7},
            {"offsets": torch.tensor([0], dtype=torch.int32), "range_size": 4},
            {"offsets": torch.tensor([0.0, 1.0]), "range_size": 2},
        ),
    ),
    OpSpec(
        "lengths_range",
        by_name(F.lengths_range),
        lengths_range_inputs(),
        EXACT,
        _lengths_range_budget("fbgemm::lengths_range"),
        examples=(
            {"t_in": torch.tensor([2, 0, 3, 1])},
            {"t_in": torch.tensor([2, 0, 3, 1], dtype=torch.int32), "shape": [2, 3]},
            {"t_in": torch.zeros(0, dtype=torch.int64)},
            {"t_in": torch.tensor([2, -1, 3])},
            {"t_in": torch.tensor([2, 0, 3]), "shape": [3]},
            {"t_in": torch.tensor([[1, 2]])},
        ),
    ),
    OpSpec(
        "lengths_range_out",
        by_name(F.lengths_range_out),
        lengths_range_inputs(out=True),
        EXACT,
        _lengths_range_budget("fbgemm::lengths_range_out"),
    ),
    OpSpec(
        "segment_sum_csr",
        by_name(F.segment_sum_csr),
        segment_inputs(),
        SEGMENT_COMPARE,
        _segment_budget,
        reference=segment_reference,
        use_reference=_segment_use_reference,
        examples=_segment_examples(),
        notes="half types and strided inputs against a loop reference (upstream accumulates "
        "in the half type; reads strided inputs through their raw pointers)",
    ),
]
