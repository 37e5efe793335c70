"""Hostile-input fuzz of the quantize_8bit family (fbgemm_npu/native/fbgemm/quantize_8bit/).

Valid calls equal upstream's CPU kernels: quantize float32 / float16 rows (2-D and N-D, empty
rows and inputs, odd widths, rows with an infinity; NaN rows are not drawn: the stated
difference of quantize.py) in every layout, the ``Out`` forms too; dequantize fused rows
(upstream's encoding or raw bytes with a finite scale and bias) to every output dtype and scale
/ bias layout; ``MixedDim`` against upstream's per-table dequantize.  Invalid calls get a clear
error naming the op and the argument: other dtypes, fewer than 2 dims, objects, rows too short
for the scale and bias, bad ``output_dtype`` / flags, ``Out`` outputs of the wrong dtype or
device, inputs on another device, outputs that cannot be allocated (a stride-0 input of 2**40
rows), bad ``D_offsets``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded
from fbgemm_npu.testing.quantize_8bit_fuzz import fused_rows

NS = "fbgemm::"
QUANT = {
    "FloatToFused8BitRowwiseQuantized": (torch.float32,),
    "HalfToFused8BitRowwiseQuantized": (torch.float16,),
    "FloatOrHalfToFused8BitRowwiseQuantized": (torch.float32, torch.float16),
}
DEQUANT = {  # op -> (output_dtype, scale_bias_last, quant_padding_float_type) choices
    "Fused8BitRowwiseQuantizedToFloat": None,
    "Fused8BitRowwiseQuantizedToHalf": None,
    "Fused8BitRowwiseQuantizedToBfloat16": None,
    "Fused8BitRowwiseQuantizedToFloatOrHalf": [
        (d, last, pad)
        for d in (0, 1, 5)
        for last, pad in ((True, True), (False, True), (False, False))
    ],
}
MIXED = NS + "Fused8BitRowwiseQuantizedToFloatMixedDim"
MIXED_ORACLE = "fbgemm_npu.testing.quantize_8bit_fuzz:mixed_dim_reference"


def _shape(data: Any, least: int = 2) -> tuple[int, ...]:
    ndim = data.draw(st.integers(least, 4), label="ndim")
    lead = data.draw(st.lists(st.integers(0, 5), min_size=ndim - 1, max_size=ndim - 1))
    width = data.draw(st.one_of(st.integers(0, 9), st.sampled_from((15, 16, 17, 31, 33, 65))))
    return (*lead, width)


def _floats(data: Any, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    gen = seeded(data)
    x = torch.randn(shape, generator=gen) * 10.0 ** data.draw(st.integers(-4, 4), label="scale")
    x = x + torch.randn((*shape[:-1], 1), generator=gen) * data.draw(st.sampled_from((0, 1, 1e3)))
    if x.numel() and data.draw(st.integers(0, 5), label="inf") == 0:  # an infinity, or a row
        flat = x.view(-1, shape[-1])
        where = data.draw(st.integers(0, flat.shape[0] - 1), label="inf row")
        sign = data.draw(st.sampled_from((1.0, -1.0)))
        if data.draw(st.booleans(), label="whole row"):
            flat[where] = sign * float("inf")
        else:
            flat[where, data.draw(st.integers(0, shape[-1] - 1))] = sign * float("inf")
    return x.to(dtype)


@fuzz_test("quantize_8bit")
def test_fuzz_quantize_8bit_valid(data: Any) -> Case:
    """Every quantize op and the ``Out`` form, float32 / float16 rows in every layout."""
    op = data.draw(st.sampled_from((*sorted(QUANT), "FloatToFused8BitRowwiseQuantizedOut")))
    dtype = data.draw(st.sampled_from(QUANT.get(op, (torch.float32,))), label="dtype")
    x = in_layout(data, _floats(data, _shape(data), dtype))
    if op.endswith("Out"):
        out = torch.empty(data.draw(st.sampled_from(((0,), (3, 5), (200,)))), dtype=torch.uint8)
        return Case(NS + op, (out, x), label=f"valid {op}")
    return Case(NS + op, (x,), label=f"valid {op} {dtype}")


@fuzz_test("quantize_8bit")
def test_fuzz_dequantize_8bit_valid(data: Any) -> Case:
    """Every dequantize op, output dtype and scale / bias layout, the ``Out`` form."""
    op = data.draw(st.sampled_from((*sorted(DEQUANT), "Fused8BitRowwiseQuantizedToFloatOut")))
    flags = data.draw(st.sampled_from(DEQUANT.get(op) or [(0, True, True)]), label="flags")
    dtype, last, pad = flags
    shape = _shape(data)
    raw = data.draw(st.booleans(), label="raw bytes")
    q = fused_rows(shape, seeded(data), raw, last)
    if not pad:  # float16 scale and bias: 4 bytes, not 8
        sb = (torch.randn((*shape[:-1], 2), generator=seeded(data))).half().view(torch.uint8)
        q = torch.cat([sb, q[..., 8:]], -1)
    q = in_layout(data, q)
    label = f"valid {op}" + (" raw" if raw else "")
    if op.endswith("Out"):
        out = torch.empty(data.draw(st.sampled_from(((0,), (4, 4)))), dtype=torch.float32)
        kw = {} if data.draw(st.booleans()) else {"scale_bias_last": True}
        return Case(NS + op, (out, q), kw, label=label)
    if DEQUANT[op] is None:
        return Case(NS + op, (q,), label=label)
    return Case(NS + op, (q, dtype, last, pad), label=f"{label} {flags}")


def _tables(data: Any) -> tuple[torch.Tensor, torch.Tensor]:
    gen = seeded(data)
    widths = data.draw(st.lists(st.integers(0, 9), max_size=5), label="widths")
    rows = data.draw(st.integers(0, 5), label="rows")
    blocks = [fused_rows((rows, w), gen, data.draw(st.booleans(), label="raw")) for w in widths]
    before, after = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    pad = torch.randint(0, 256, (rows, before + after), generator=gen, dtype=torch.int32)
    pad = pad.to(torch.uint8)
    q = torch.cat([pad[:, :before], *blocks, pad[:, before:]], 1)
    sizes = [0, *[w + 8 for w in widths]]
    offsets = torch.tensor(sizes).cumsum(0).add(before).to(torch.int32)
    return q, offsets


@fuzz_test("quantize_8bit")
def test_fuzz_mixed_dim_valid(data: Any) -> Case:
    """Tables of mixed widths (0 too), columns before and after them, any layout."""
    q, offsets = _tables(data)
    out_dtype = data.draw(st.sampled_from((0, 1)), label="output_dtype")
    q = in_layout(data, q, ("contiguous", "strided", "transposed", "offset"))
    return Case(MIXED, (q, offsets, out_dtype), oracle=MIXED_ORACLE, label="valid MixedDim")


HOW = ("object", "dtype", "ndim", "device", "short row", "huge", "output_dtype", "flags", "out")


@fuzz_test("quantize_8bit")
def test_fuzz_quantize_8bit_invalid(data: Any) -> Case:
    """A refused argument of a quantize or dequantize op: a clear error naming it."""
    quant = data.draw(st.booleans(), label="quantize")
    op = data.draw(st.sampled_from(sorted(QUANT) if quant else sorted(DEQUANT)), label="op")
    arg = "t" if quant else "input"
    allowed = QUANT[op] if quant else (torch.uint8,)
    good = _floats(data, (3, 4), allowed[0]) if quant else fused_rows((3, 4), seeded(data), False)
    how = data.draw(st.sampled_from(HOW), label="how")
    extra: tuple = () if quant or DEQUANT[op] is None else (0, True, True)
    names: tuple[str, ...] = (arg,)
    if how == "object":
        args = (not_a_tensor(data), *extra)
    elif how == "dtype":
        args = (good.to(other_dtype(data, allowed)), *extra)
    elif how == "ndim":
        args = (good.reshape(-1)[: data.draw(st.integers(0, 12))] if data.draw(st.booleans())
                else good[0, 0], *extra)  # fmt: skip
    elif how == "device":
        return Case(NS + op, (On(good, "npu:1"), *extra), label="device: npu:1, valid")
    elif how == "huge":  # a stride-0 input whose output cannot be allocated
        args = (good[:1].expand(2**40, good.shape[1]), *extra)
    elif how == "short row" and not quant:
        width = data.draw(st.integers(0, 7))
        args = (good[:, :width], *extra)
        if DEQUANT[op] is not None and width >= 4:
            args = (good[:, :width], 0, False, False)  # 4 bytes: fine with half scale, bias
            return Case(NS + op, args, label="valid: half scale and bias")
    elif how == "output_dtype" and extra:
        bad = data.draw(st.sampled_from((-1, 2, 3, 4, 6, 7, 100)))
        args, names = (good, bad, True, True), ("output_dtype",)
    elif how == "flags" and extra:
        args, names = (good, 0, True, False), ("quant_padding_float_type",)
    else:  # the Out forms' output argument
        return _bad_out(data, quant)
    return Case(NS + op, args, expect="error", names=names, label=how)


def _bad_out(data: Any, quant: bool) -> Case:
    if quant:
        op, x, want = (
            "FloatToFused8BitRowwiseQuantizedOut",
            torch.randn(3, 4, generator=seeded(data)),
            torch.uint8,
        )
    else:
        op, want = "Fused8BitRowwiseQuantizedToFloatOut", torch.float32
        x = fused_rows((3, 4), seeded(data), False)
    which = data.draw(st.sampled_from(("out dtype", "out device", "out object", "input")))
    out: Any = torch.empty(0, dtype=want)
    names = ("output",)
    if which == "out dtype":
        out = torch.empty(0, dtype=other_dtype(data, (want,)))
    elif which == "out device":
        out = On(out, "cpu")
    elif which == "out object":
        out = not_a_tensor(data)
    else:
        x, names = x.to(other_dtype(data, (x.dtype,))), ("input",)
    return Case(NS + op, (out, x), expect="error", names=names, label=f"Out: {which}")


@fuzz_test("quantize_8bit")
def test_fuzz_mixed_dim_invalid(data: Any) -> Case:
    """MixedDim: bad dtypes, ranks, objects, devices, output_dtype; offsets out of range or
    steps under 8 (a queued data check, clamped reads): a clear error naming the argument."""
    q, offsets = _tables(data)
    how = data.draw(
        st.sampled_from(
            ("object", "dtype", "ndim", "device", "output_dtype", "offsets", "short", "huge")
        ),
        label="how",
    )
    arg = data.draw(st.sampled_from(("input", "D_offsets")), label="argument")
    args: list[Any] = [q, offsets, 0]
    i = 0 if arg == "input" else 1
    names: tuple[str, ...] = (arg,)
    if how == "object":
        args[i] = not_a_tensor(data)
    elif how == "dtype":
        args[i] = args[i].to(other_dtype(data, (args[i].dtype,)))
    elif how == "ndim":
        args[i] = args[i].reshape(-1) if i == 0 else args[i].view(1, -1)
    elif how == "device":
        args[i] = On(args[i], data.draw(st.sampled_from(("cpu", "npu:1"))))
    elif how == "output_dtype":
        args[2], names = data.draw(st.sampled_from((-1, 2, 5, 7))), ("output_dtype",)
    elif how == "huge":  # a stride-0 input whose output cannot be allocated
        args[0], names = q.new_zeros(1, q.shape[1] + 1).expand(2**40, -1), ("input",)
    elif how == "short":  # more tables than the columns' scales and biases
        args[1], names = torch.arange(q.shape[1] // 8 + 2, dtype=torch.int32) * 8, ("input",)
    else:
        o = offsets.clone()
        k = data.draw(st.integers(0, o.numel() - 1))
        o[k] = data.draw(st.sampled_from((-1, -(2**31), q.shape[1] + 1, 2**31 - 1)))
        if o.numel() > 1 and data.draw(st.booleans()):
            o[-1] = o[-2] + data.draw(st.integers(0, 7))  # a step under 8
        args[1], names = o, ("D_offsets", "input")
        # a change that left the offsets valid (the same value) is upstream's result
        if torch.equal(o, offsets) or _valid_offsets(o, q.shape[1]):
            return Case(MIXED, tuple(args), oracle=MIXED_ORACLE, label="valid after all")
    if how == "offsets" and (
        q.shape[0] == 0 or o.numel() == 1 or q.shape[1] == 8 * (o.numel() - 1)
    ):
        # no rows, no tables or no output columns: upstream's kernel reads no offset
        return Case(MIXED, tuple(args), expect="equal_or_error", names=names,
                    oracle=MIXED_ORACLE, label="offsets, nothing read")  # fmt: skip
    return Case(MIXED, tuple(args), expect="error", names=names, label=how)


def _valid_offsets(o: torch.Tensor, cols: int) -> bool:
    return bool((o >= 0).all() and (o <= cols).all() and (o.diff() >= 8).all())
