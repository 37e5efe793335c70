"""Specs of the quantize_float ops: bfloat16 and HFP8 against upstream's CPU kernels, bit for bit
(the outputs compared as their int16 / int32 bit patterns: NaN payloads and ``-0.0`` count);
FP8 rowwise and padded FP8 rowwise against the references written from upstream's CUDA kernels
(``reference.py``: upstream's CPU kernels raise for every input in 1.8.0, the padded op has
none), bytes exact and the dequantized values compared as bits.

Inputs: float32 values drawn as bit patterns (every float32 class: NaNs with payloads, infs,
subnormals, -0.0, exact rounding ties) and as scaled normals; shapes of rank 1 to 3 (HFP8: 2-D,
as upstream), empty ones included; HFP8 formats over the accepted range (``_hfp8.py``); one
draw in ten a dtype upstream refuses.  Budgets: the op's entry (``ebits7``, ``half``, ``no_pad``
paths).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec
from conformance.specs.fbgemm.quantize_float.reference import (
    fp8_rowwise_dequantize,
    fp8_rowwise_quantize,
    padded_fp8_rowwise_dequantize,
    padded_fp8_rowwise_quantize,
)

F = torch.ops.fbgemm
SHAPES = st.sampled_from([(5,), (3, 7), (2, 3, 4), (0, 4), (4, 0), (1, 1), (33, 9)])


def _values(draw: st.DrawFn, shape: tuple[int, ...]) -> torch.Tensor:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n = 1
    for s in shape:
        n *= s
    if draw(st.booleans()):  # bit patterns: every class of float32, ties (low half 0x8000)
        hi = torch.randint(-(2**15), 2**15, (n,), generator=g, dtype=torch.int32)
        lo = torch.randint(0, 2**16, (n,), generator=g, dtype=torch.int32)
        lo[torch.rand(n, generator=g) < 0.3] = 0x8000
        return (hi * 2**16 + lo).view(torch.float32).view(shape)
    scale = 10.0 ** draw(st.integers(-8, 8))
    return (torch.randn(n, generator=g) * scale).view(shape)


@st.composite
def _float_input(draw: st.DrawFn, ranks: tuple[int, ...] = (1, 2, 3)) -> dict[str, object]:
    shape = draw(SHAPES.filter(lambda s: len(s) in ranks))
    x = _values(draw, shape)
    if x.numel() and draw(st.integers(0, 9)) == 9:
        return {"input": x.to(draw(st.sampled_from((torch.float16, torch.float64))))}
    return {"input": x}


@st.composite
def _bf16_input(draw: st.DrawFn) -> dict[str, object]:
    shape = draw(SHAPES)
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n = 1
    for s in shape:
        n *= s
    bits = torch.randint(-(2**15), 2**15, (n,), generator=g, dtype=torch.int32).to(torch.int16)
    return {"input": bits.view(torch.bfloat16).view(shape)}


@st.composite
def _hfp8_format(draw: st.DrawFn) -> dict[str, object]:
    ebits = draw(st.integers(1, 7))
    bias = draw(st.one_of(st.sampled_from((15, 31, 7)), st.integers(0, 119 + ebits)))
    max_pos = draw(st.sampled_from((0.875, 0.9375, 1.875, 448.0, 57344.0, 1e-3, 3.0, 1e20)))
    return {"ebits": ebits, "exponent_bias": bias, "max_pos": max_pos}


@st.composite
def _to_hfp8(draw: st.DrawFn) -> dict[str, object]:
    return {**draw(_float_input((2,))), **draw(_hfp8_format())}


@st.composite
def _from_hfp8(draw: st.DrawFn) -> dict[str, object]:
    fmt = draw(_hfp8_format())
    rows, cols = draw(st.integers(0, 20)), draw(st.integers(0, 40))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    codes = torch.randint(0, 256, (rows, cols), generator=g, dtype=torch.int32).to(torch.uint8)
    return {"input": codes, "ebits": fmt["ebits"], "exponent_bias": fmt["exponent_bias"]}


@st.composite
def _to_fp8(draw: st.DrawFn) -> dict[str, object]:
    x = draw(_float_input())["input"]
    assert isinstance(x, torch.Tensor)
    dtype = draw(st.sampled_from((torch.float32, torch.float16, torch.bfloat16)))
    return {"t": x.to(dtype) if x.dtype != torch.float64 else x, "forward": draw(st.booleans())}


@st.composite
def _from_fp8(draw: st.DrawFn) -> dict[str, object]:
    x = draw(_to_fp8())
    t = x["t"]
    assert isinstance(t, torch.Tensor)
    if t.dtype == torch.float64:
        t = t.float()
    rows = fp8_rowwise_quantize(t, bool(x["forward"]))
    return {
        "input": rows,
        "forward": x["forward"],
        "output_dtype": draw(st.sampled_from((0, 1, 5))),
    }


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view({2: torch.int16, 4: torch.int32}[t.element_size()])


def _on(device_of: torch.Tensor, cpu_fn, dev_fn):  # noqa: ANN001, ANN202 - small dispatcher
    return cpu_fn() if device_of.device.type == "cpu" else dev_fn()


def _fp8_q(t: torch.Tensor, forward: bool) -> torch.Tensor:
    return _on(
        t,
        lambda: fp8_rowwise_quantize(t, forward),
        lambda: F.FloatToFP8RowwiseQuantized(t, forward),
    )


def _fp8_dq(input: torch.Tensor, forward: bool, output_dtype: int) -> torch.Tensor:
    out = _on(
        input,
        lambda: fp8_rowwise_dequantize(input, forward, output_dtype),
        lambda: F.FP8RowwiseQuantizedToFloat(input, forward, output_dtype),
    )
    return _bits(out)


def _hfp8_budget(input: torch.Tensor, ebits: int, **_: object) -> BudgetUse:
    return BudgetUse(path="ebits7" if ebits == 7 else None)


def _fp8_budget(t: torch.Tensor, **_: object) -> BudgetUse:
    return BudgetUse(path=None if t.dtype == torch.float32 else "half")


def _fp8_dq_budget(output_dtype: int, **_: object) -> BudgetUse:
    return BudgetUse(path=None if output_dtype == 0 else "half")


@st.composite
def _to_padded(draw: st.DrawFn) -> dict[str, object]:
    x = draw(_to_fp8())
    return {**x, "row_dim": draw(st.sampled_from((4, 8, 12, 16)))}


def _padded_q(t: torch.Tensor, forward: bool, row_dim: int) -> torch.Tensor:
    return _on(
        t,
        lambda: padded_fp8_rowwise_quantize(t, forward, row_dim),
        lambda: F.FloatToPaddedFP8RowwiseQuantized(t, forward, row_dim),
    )


def _padded_budget(t: torch.Tensor, row_dim: int, **_: object) -> BudgetUse:
    if t.dtype != torch.float32:
        return BudgetUse(path="half")
    return BudgetUse(path="no_pad" if t.size(-1) % row_dim == 0 else None)


@st.composite
def _from_padded(draw: st.DrawFn) -> dict[str, object]:
    x = draw(_to_padded())
    t = x["t"]
    assert isinstance(t, torch.Tensor)
    t = t.float() if t.dtype == torch.float64 else t
    rows = padded_fp8_rowwise_quantize(t, bool(x["forward"]), int(x["row_dim"]))  # type: ignore[call-overload]
    last = draw(st.sampled_from((-1, t.size(-1))))
    return {
        "input": rows,
        "forward": x["forward"],
        "row_dim": x["row_dim"],
        "output_last_dim": last,
        "output_dtype": draw(st.sampled_from((0, 1, 5))),
    }


def _padded_dq(
    input: torch.Tensor, forward: bool, row_dim: int, output_last_dim: int, output_dtype: int
) -> torch.Tensor:
    args = (input, forward, row_dim, output_last_dim, output_dtype)
    out = _on(
        input,
        lambda: padded_fp8_rowwise_dequantize(*args),
        lambda: F.PaddedFP8RowwiseQuantizedToFloat(*args),
    )
    return _bits(out)


def _padded_dq_budget(output_last_dim: int, output_dtype: int, **_: object) -> BudgetUse:
    sized = output_last_dim >= 0
    path = ("half" if output_dtype != 0 else "") + ("" if sized else "_unsized")
    return BudgetUse(path=path.strip("_") or None, sized=sized)


NAN_ROW = torch.tensor([[float("nan"), 1.0, -2.0, float("inf"), -0.0]])
SPECS = [
    OpSpec(
        name="FloatToBfloat16Quantized",
        op=lambda input: _bits(F.FloatToBfloat16Quantized(input)),
        inputs=_float_input(),
        compare=Compare({}),
        examples=({"input": NAN_ROW}, {"input": torch.zeros(0, 3)}, {"input": torch.tensor(2.5)}),
    ),
    OpSpec(
        name="Bfloat16QuantizedToFloat",
        op=lambda input: _bits(F.Bfloat16QuantizedToFloat(input)),
        inputs=_bf16_input(),
        compare=Compare({}),
        examples=({"input": NAN_ROW.bfloat16()},),
    ),
    OpSpec(
        name="FloatToHFP8Quantized",
        op=lambda input, ebits, exponent_bias, max_pos: F.FloatToHFP8Quantized(
            input, ebits, exponent_bias, max_pos
        ),
        inputs=_to_hfp8(),
        compare=Compare({}),
        budget=_hfp8_budget,
        examples=({"input": NAN_ROW, "ebits": 4, "exponent_bias": 15, "max_pos": 1.875},),
    ),
    OpSpec(
        name="HFP8QuantizedToFloat",
        op=lambda input, ebits, exponent_bias: _bits(
            F.HFP8QuantizedToFloat(input, ebits, exponent_bias)
        ),
        inputs=_from_hfp8(),
        compare=Compare({}),
        budget=lambda **_: BudgetUse(),
    ),
    OpSpec(
        name="FloatToFP8RowwiseQuantized",
        op=_fp8_q,
        inputs=_to_fp8(),
        compare=Compare({}),
        budget=_fp8_budget,
        examples=({"t": NAN_ROW, "forward": True}, {"t": torch.zeros(3, 4), "forward": False}),
    ),
    OpSpec(
        name="FP8RowwiseQuantizedToFloat",
        op=_fp8_dq,
        inputs=_from_fp8(),
        compare=Compare({}),
        budget=_fp8_dq_budget,
    ),
    OpSpec(
        name="FloatToPaddedFP8RowwiseQuantized",
        op=_padded_q,
        inputs=_to_padded(),
        compare=Compare({}),
        budget=_padded_budget,
        examples=({"t": NAN_ROW, "forward": True, "row_dim": 4},),
    ),
    OpSpec(
        name="PaddedFP8RowwiseQuantizedToFloat",
        op=_padded_dq,
        inputs=_from_padded(),
        compare=Compare({}),
        budget=_padded_dq_budget,
    ),
]
