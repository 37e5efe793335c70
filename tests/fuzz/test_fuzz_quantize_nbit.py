"""Hostile-input fuzz of the quantize_nbit family (fbgemm_npu/native/fbgemm/quantize_nbit/).

Valid calls equal upstream's CPU kernels: every quantizer at bit rates 1..8 on float32 /
float16 rows of every magnitude, constant rows, infinities (rows of one infinity only at 2 / 4 /
8 bits: upstream's reference kernel for the other rates stores another NaN or a NaN scale, stated
in quantize.py), empty and column-free inputs (column-free at 2 / 4 / 8 bits: that kernel leaves
their scale and bias unwritten), in every layout; ``WithRowwiseMinMax`` with bounds that hold
their row; every dequantizer on upstream's rows or raw bytes (NaN / inf half scales too), the
front layout against upstream's CPU math with the scale and bias moved last.  Not drawn: NaN
inputs and rows whose minimum is both +0 and -0 (upstream's lanes pick; stated in quantize.py).
Invalid calls get a clear error naming the op and the argument: other dtypes, ranks, objects,
other devices, bit rates outside 1..8 (or not 2 / 4 / 8 with bounds), widths off the byte
alignment, rows shorter than the scale and bias, bad ``output_dtype``, bad bounds, outputs that
cannot be allocated (a stride-0 input of 2**40 rows).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded

NS = "fbgemm::"
QUANT = {
    "FloatToFusedNBitRowwiseQuantizedSBHalf": (torch.float32,),
    "HalfToFusedNBitRowwiseQuantizedSBHalf": (torch.float16,),
    "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf": (torch.float32, torch.float16),
    "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax": (torch.float32, torch.float16),
}
MIN_MAX = "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax"
DEQUANT = (
    "FusedNBitRowwiseQuantizedSBHalfToFloat",
    "FusedNBitRowwiseQuantizedSBHalfToHalf",
    "FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf",
    "FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf",
)
REF = "fbgemm_npu.testing.quantize_nbit_fuzz:"


def _rates(op: str) -> tuple[int, ...]:
    return (2, 4, 8) if op == MIN_MAX else tuple(range(1, 9))


def _floats(data: Any, rows: int, cols: int, dtype: torch.dtype, bit_rate: int) -> torch.Tensor:
    gen = seeded(data)
    kind = data.draw(st.sampled_from(("normal", "offset", "constant", "inf", "wide")), label="kind")
    x = torch.randn(rows, cols, generator=gen) * 10.0 ** data.draw(st.integers(-9, 5), label="e")
    if kind == "offset":
        x = x + 1e4
    elif kind == "constant":
        x = torch.full((rows, cols), data.draw(st.sampled_from((0.3, -7.0, 0.0, 1e-30))))
    elif kind == "inf" and x.numel():
        x[0, 0] = float("inf")
        x[-1, -1] = float("-inf")
        if bit_rate in (2, 4, 8) and data.draw(st.booleans(), label="row of -inf"):
            x[-1] = float("-inf")
    elif kind == "wide":
        x = x * 1e5  # scale / bias past half's range
    x = x.to(dtype)
    x[x == 0] = 0  # no -0 (module docstring)
    if bit_rate not in (2, 4, 8) and x.numel():
        # a row of one infinity (+inf or -inf, float16's overflow too): upstream's reference
        # kernel stores its NaN scale as 0x7FFF (or NaN for -inf), a stated difference
        lo, hi = torch.aminmax(x.float(), dim=1)
        x[(lo == hi) & lo.isinf(), 0] = 0
    return x


@fuzz_test("quantize_nbit")
def test_fuzz_quantize_nbit_valid(data: Any) -> Case:
    """Every quantizer, bit rate, dtype and layout; bounds that hold their row."""
    op = data.draw(st.sampled_from(sorted(QUANT)), label="op")
    bit_rate = data.draw(st.sampled_from(_rates(op)), label="bit_rate")
    dtype = data.draw(st.sampled_from(QUANT[op]), label="dtype")
    per = 8 // bit_rate
    rows = data.draw(st.integers(0, 9), label="rows")
    # column-free rows only at 2 / 4 / 8 bits: upstream's reference kernel (the other rates)
    # leaves their scale and bias bytes unwritten (measured: garbage), ours stores -inf / inf
    least = 0 if bit_rate in (2, 4, 8) else 1
    cols = 2 * per * data.draw(st.integers(least, 5), label="groups")
    x = _floats(data, rows, cols, dtype, bit_rate)
    args: tuple = (in_layout(data, x), bit_rate)
    if op == MIN_MAX:
        if cols == 0:
            return Case(NS + op, (x, bit_rate, torch.zeros(rows, 2, dtype=dtype)), label="no cols")
        lo, hi = torch.aminmax(x.float(), dim=1)
        widen = data.draw(st.sampled_from((0.0, 0.5, 10.0)), label="widen")
        mm = torch.stack([lo - widen * lo.abs(), hi + widen * hi.abs()], 1).to(dtype)
        mm = torch.where(torch.isnan(mm), torch.stack([lo, hi], 1).to(dtype), mm)
        args = (*args, in_layout(data, mm))
    return Case(NS + op, args, label=f"valid {op} {bit_rate}")


def _rows(data: Any, bit_rate: int) -> torch.Tensor:
    gen = seeded(data)
    rows = data.draw(st.integers(0, 9), label="rows")
    nb = data.draw(st.integers(0, 9), label="code bytes")
    if data.draw(st.booleans(), label="raw bytes"):
        return torch.randint(0, 256, (rows, nb + 4), generator=gen, dtype=torch.int32).to(
            torch.uint8
        )
    per = 8 // bit_rate
    x = torch.randn(rows, nb * per + (nb * per) % (2 * per), generator=gen)
    q = torch.ops.fbgemm.FloatToFusedNBitRowwiseQuantizedSBHalf(x, bit_rate)
    return q[:, : nb + 4] if q.shape[1] == nb + 4 else torch.cat([q[:, :nb], q[:, -4:]], 1)


@fuzz_test("quantize_nbit")
def test_fuzz_dequantize_nbit_valid(data: Any) -> Case:
    """Every dequantizer, bit rate, output dtype and layout (front too)."""
    op = data.draw(st.sampled_from(DEQUANT), label="op")
    bit_rate = data.draw(st.integers(1, 8), label="bit_rate")
    q = _rows(data, bit_rate)
    placed = in_layout(data, q)
    label = f"valid {op} {bit_rate}"
    if op.endswith("FrontToFloatOrHalf"):
        dt = data.draw(st.sampled_from((0, 1, 5)), label="output_dtype")
        return Case(NS + op, (placed, bit_rate, dt), oracle=REF + "front_reference", label=label)
    if op.endswith("ToFloatOrHalf"):
        dt = data.draw(st.sampled_from((0, 1)), label="output_dtype")
        if data.draw(st.booleans(), label="front"):
            oracle = REF + "front_to_float_or_half_reference"
            return Case(
                NS + op, (placed, bit_rate, dt, False), oracle=oracle, label=label + " front"
            )
        return Case(NS + op, (placed, bit_rate, dt), label=label)
    return Case(NS + op, (placed, bit_rate), label=label)


def _oracle(op: str, rest: list[Any]) -> str | None:
    return REF + "front_reference" if "Front" in op else None


HOW = ("object", "dtype", "ndim", "device", "bit_rate", "width", "huge", "output_dtype", "bounds")


@fuzz_test("quantize_nbit")
def test_fuzz_quantize_nbit_invalid(data: Any) -> Case:
    """A refused argument of any op: a clear error naming it."""
    quant = data.draw(st.booleans(), label="quantize")
    op = data.draw(st.sampled_from(sorted(QUANT) if quant else DEQUANT), label="op")
    bit_rate = data.draw(st.sampled_from(_rates(op)), label="bit_rate")
    per = 8 // bit_rate
    if quant:
        x = _floats(data, 3, 2 * per, QUANT[op][0], bit_rate)
    else:
        x = torch.ops.fbgemm.FloatToFusedNBitRowwiseQuantizedSBHalf(
            torch.randn(3, 2 * per, generator=seeded(data)), bit_rate
        )
    rest: list[Any] = [bit_rate]
    if op == MIN_MAX:
        rest.append(torch.stack(torch.aminmax(x, dim=1), 1))
    elif op.endswith("ToFloatOrHalf"):
        rest.append(0)
    allowed = QUANT[op] if quant else (torch.uint8,)
    how = data.draw(st.sampled_from(HOW), label="how")
    names: tuple[str, ...] = ("input",)
    if how == "object":
        x = not_a_tensor(data)
    elif how == "dtype":
        x = x.to(other_dtype(data, allowed))
    elif how == "ndim":
        x = data.draw(st.sampled_from((x.reshape(-1), x[0, 0], x.view(1, *x.shape))))
    elif how == "device":
        # the front op has no CPU kernel upstream: a CPU tensor gets upstream's dispatch error
        where = data.draw(st.sampled_from(("npu:1",) if "Front" in op else ("cpu", "npu:1")))
        if op != MIN_MAX:  # one tensor, wherever it is: upstream's kernel or ours, equal
            oracle = _oracle(op, rest)
            return Case(NS + op, (On(x, where), *rest), oracle=oracle, label=f"device {where}")
        x, names = On(x, where), ("input", "rowwise_min_max")
    elif how == "bit_rate":
        bad = data.draw(st.sampled_from((0, -1, 9, 16, -(2**31), 2**40)))
        if op == MIN_MAX:
            bad = data.draw(st.sampled_from((bad, 1, 3, 5, 6, 7)))
        rest[0], names = bad, ("bit_rate",)
    elif how == "width":  # off the byte alignment (quantize), shorter than scale + bias
        x = x[:, : data.draw(st.integers(1, 2 * per - 1))] if quant else x[:, :3]
    elif how == "huge":  # a stride-0 input whose output cannot be allocated
        x = x[:1].expand(2**40, x.shape[1])
        if op == MIN_MAX:
            rest[1] = rest[1][:1].expand(2**40, 2)
    elif how == "output_dtype" and op.endswith("ToFloatOrHalf"):
        allowed_dt = (0, 1, 5) if "Front" in op else (0, 1)
        rest[1] = data.draw(
            st.sampled_from([d for d in (-1, 1, 2, 3, 4, 5, 6, 100) if d not in allowed_dt])
        )
        names = ("output_dtype",)
    elif how == "bounds" and op == MIN_MAX:
        mm = rest[1]
        which = data.draw(st.sampled_from(("shape", "dtype", "device", "object")))
        if which == "shape":
            mm = data.draw(st.sampled_from((mm[:-1], mm[:, :1], mm.reshape(-1), mm.t())))
        elif which == "dtype":
            mm = mm.to(other_dtype(data, (x.dtype,)))
        elif which == "device":
            mm = On(mm, data.draw(st.sampled_from(("cpu", "npu:1"))))
        else:
            mm = not_a_tensor(data)
        rest[1], names = mm, ("rowwise_min_max",)
    else:
        x = x.to(other_dtype(data, allowed))
    return Case(NS + op, (x, *rest), expect="error", names=names, label=how)
