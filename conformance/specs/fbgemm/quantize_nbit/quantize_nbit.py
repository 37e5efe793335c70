"""Specs of the fused N-bit "SBHalf" quantize ops: float / half rows to packed codes with a half
scale and bias, and back.

Inputs: 0 to 40 rows of ``2 * (8 // bit_rate) * k`` columns (k up to 12), bit rates 2 / 4 / 8
(upstream's AVX2 kernels) and 1 / 3 / 5..7 (its reference kernel), float32 or float16 values of
one magnitude per draw (1e-9 to 1e5: half-subnormal scales, scales and biases past half's range),
constant rows, some infinite values; ``rowwise_min_max`` drawn around each row's true bounds.
Dequantize: random bytes with finite half scales and biases, 4 to 40 bytes a row.  Not drawn:
NaN, a minimum that is both +0 and -0, rows of only -inf at the reference kernel's rates (see
``quantize.py``: upstream's lane order / NaN scale), ``scale_bias_last=False`` (upstream's CPU
kernel ignores it; tests/fbgemm/quantize_nbit/ judges it).  Oracle: upstream, bit for bit:
uint8 outputs exact, float outputs with zero tolerance (``scale * q`` is exact in float32).
Budget: the op's entry; paths ``byte_codes`` (bit_rate >= 5), ``half``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

F = torch.ops.fbgemm
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (torch.float32, torch.float16)})


@st.composite
def _rows(draw: st.DrawFn, dtypes: tuple[torch.dtype, ...], rates: tuple[int, ...]) -> dict:
    bit_rate = draw(st.sampled_from(rates))
    per = 8 // bit_rate
    rows, k = draw(st.integers(0, 40)), draw(st.integers(1, 12))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = torch.randn(rows, 2 * per * k, generator=g) * 10.0 ** draw(st.integers(-9, 5))
    kind = draw(st.integers(0, 4))
    if kind == 1 and rows:
        x[torch.arange(rows), torch.randint(0, x.size(1), (rows,), generator=g)] = float("inf")
    elif kind == 2:
        x = torch.full_like(x, draw(st.floats(-10, 10)))
    x = x.to(draw(st.sampled_from(dtypes)))
    x[x == 0] = 0  # no -0
    if bit_rate not in (2, 4, 8):
        x[x == float("-inf")] = 0
    return {"input": x, "bit_rate": bit_rate}


def _path(input: torch.Tensor, bit_rate: int, **_: object) -> BudgetUse:
    half = input.dtype == torch.float16
    wide = bit_rate >= 5
    name = "_".join(p for p, on in (("half", half), ("byte_codes", wide)) if on)
    return BudgetUse(path=name or None)


def _only_wide(input: torch.Tensor, bit_rate: int) -> BudgetUse:
    return BudgetUse(path="byte_codes" if bit_rate >= 5 else None)


@st.composite
def _with_bounds(draw: st.DrawFn) -> dict:
    args = draw(_rows((torch.float32, torch.float16), (2, 4, 8)))
    x = args["input"].float()
    x = torch.where(x.isinf(), 0.0, x)
    args["input"] = x.to(args["input"].dtype)
    lo, hi = x.aminmax(dim=1) if x.numel() else (x.new_zeros(x.size(0)),) * 2
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    pad = torch.rand(x.size(0), 2, generator=g) * (hi - lo).unsqueeze(1)
    args["rowwise_min_max"] = torch.stack([lo - pad[:, 0], hi + pad[:, 1]], 1).to(x.dtype)
    args["rowwise_min_max"] = args["rowwise_min_max"].to(args["input"].dtype)
    return args


@st.composite
def _fused(draw: st.DrawFn) -> dict:
    bit_rate = draw(st.sampled_from((1, 2, 3, 4, 5, 8)))
    rows, ncols = draw(st.integers(0, 30)), draw(st.integers(4, 40))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    q = torch.randint(0, 256, (rows, ncols), generator=g, dtype=torch.uint8)
    sb = (torch.randn(rows, 2, generator=g) * 10.0 ** draw(st.integers(-6, 3))).half()
    q[:, -4:] = sb.view(torch.uint8).reshape(rows, 4)
    return {"input": q, "bit_rate": bit_rate}


@st.composite
def _fused_dtype(draw: st.DrawFn) -> dict:
    args = draw(_fused())
    args["output_dtype"] = draw(st.sampled_from((0, 1)))
    return args


SPECS = [
    OpSpec(
        name="FloatToFusedNBitRowwiseQuantizedSBHalf",
        op=lambda input, bit_rate: F.FloatToFusedNBitRowwiseQuantizedSBHalf(input, bit_rate),
        inputs=_rows((torch.float32,), (1, 2, 3, 4, 5, 6, 7, 8)),
        compare=EXACT,
        budget=_only_wide,
        examples=(
            {"input": torch.zeros(3, 0), "bit_rate": 4},
            {"input": torch.zeros(0, 8), "bit_rate": 2},
            {"input": torch.full((2, 8), float("-inf")), "bit_rate": 4},
        ),
    ),
    OpSpec(
        name="HalfToFusedNBitRowwiseQuantizedSBHalf",
        op=lambda input, bit_rate: F.HalfToFusedNBitRowwiseQuantizedSBHalf(input, bit_rate),
        inputs=_rows((torch.float16,), (2, 4, 8, 3)),
        compare=EXACT,
        budget=_only_wide,
    ),
    OpSpec(
        name="FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf",
        op=lambda input, bit_rate: F.FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf(input, bit_rate),
        inputs=_rows((torch.float32, torch.float16), (2, 4, 8, 1, 6)),
        compare=EXACT,
        budget=_path,
    ),
    OpSpec(
        name="FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax",
        op=lambda input, bit_rate, rowwise_min_max: (
            F.FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax(
                input, bit_rate, rowwise_min_max
            )
        ),
        inputs=_with_bounds(),
        compare=EXACT,
        budget=_path,
    ),
    OpSpec(
        name="FusedNBitRowwiseQuantizedSBHalfToFloat",
        op=lambda input, bit_rate: F.FusedNBitRowwiseQuantizedSBHalfToFloat(input, bit_rate),
        inputs=_fused(),
        compare=EXACT,
    ),
    OpSpec(
        name="FusedNBitRowwiseQuantizedSBHalfToHalf",
        op=lambda input, bit_rate: F.FusedNBitRowwiseQuantizedSBHalfToHalf(input, bit_rate),
        inputs=_fused(),
        compare=EXACT,
    ),
    OpSpec(
        name="FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf",
        op=lambda input, bit_rate, output_dtype: F.FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf(
            input, bit_rate, output_dtype
        ),
        inputs=_fused_dtype(),
        compare=EXACT,
        budget=lambda output_dtype, **_: BudgetUse(path="half" if output_dtype == 1 else None),
    ),
]
