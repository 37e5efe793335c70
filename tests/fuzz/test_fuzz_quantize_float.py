"""Hostile-input fuzz of the quantize_float family (fbgemm_npu/native/fbgemm/quantize_float/).

Valid calls: bfloat16 and HFP8 against upstream's CPU kernels bit for bit (float32 drawn as bit
patterns: NaN payloads, infs, subnormals, -0.0, rounding ties; any rank for bfloat16, 2-D for
HFP8, empty too; HFP8 formats over the accepted range); FP8 rowwise and padded FP8 rowwise
against the references written from upstream's CUDA kernels
(``conformance/specs/fbgemm/quantize_float/reference.py``: upstream's CPU kernels raise for every
input), float32 / float16 / bfloat16 inputs of rank 1 to 3, every output dtype, dequantized rows
from the reference's encoding or raw bytes.  Every input in drawn layouts.  Invalid calls get a
clear error naming the op and the argument: other dtypes, ranks, objects, formats outside the
range (ebits, exponent_bias, max_pos), bad row widths, row_dim, output_dtype, tags past row_dim,
rows that keep another count than ``output_last_dim``, outputs that cannot be allocated (a
stride-0 input of 2**40 rows, an ``output_last_dim`` of 2**40).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded

NS = "fbgemm::"
REF = "conformance.specs.fbgemm.quantize_float.reference:"
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TO_BF16, FROM_BF16 = NS + "FloatToBfloat16Quantized", NS + "Bfloat16QuantizedToFloat"
TO_HFP8, FROM_HFP8 = NS + "FloatToHFP8Quantized", NS + "HFP8QuantizedToFloat"
TO_FP8, FROM_FP8 = NS + "FloatToFP8RowwiseQuantized", NS + "FP8RowwiseQuantizedToFloat"
TO_PAD, FROM_PAD = NS + "FloatToPaddedFP8RowwiseQuantized", NS + "PaddedFP8RowwiseQuantizedToFloat"
TARGETS = ("bf16", "from bf16", "hfp8", "from hfp8", "fp8", "from fp8", "padded", "from padded")


def _shape(data: Any, ranks: tuple[int, ...], rows: bool = False) -> tuple[int, ...]:
    """A shape of a drawn rank; ``rows``: at most 24 rows (the references loop over rows in
    Python: CI time)."""
    rank = data.draw(st.sampled_from(ranks), label="rank")
    sizes = st.one_of(st.integers(0, 6), st.sampled_from((9, 17, 33)))
    shape = tuple(data.draw(st.lists(sizes, min_size=rank, max_size=rank), label="shape"))
    if rows:
        lead = [min(s, 24) for s in shape[:-1]]
        while lead and _prod(lead) > 24:
            lead[lead.index(max(lead))] //= 2
        shape = (*lead, *shape[-1:])
    return shape


def _prod(sizes: list[int]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def _bits(data: Any, shape: tuple[int, ...]) -> torch.Tensor:
    """float32 values: bit patterns of every class (rounding ties often) or scaled normals."""
    gen = seeded(data)
    n = 1
    for s in shape:
        n *= s
    if data.draw(st.booleans(), label="bit patterns"):
        hi = torch.randint(-(2**15), 2**15, (n,), generator=gen, dtype=torch.int32)
        lo = torch.randint(0, 2**16, (n,), generator=gen, dtype=torch.int32)
        lo[torch.rand(n, generator=gen) < 0.3] = 0x8000
        return (hi * 2**16 + lo).view(torch.float32).view(shape)
    return torch.randn(shape, generator=gen) * 10.0 ** data.draw(st.integers(-8, 8), label="e")


def _format(data: Any) -> tuple[int, int]:
    ebits = data.draw(st.integers(1, 7), label="ebits")
    bias = data.draw(st.one_of(st.sampled_from((15, 31, 7)), st.integers(0, 119 + ebits)))
    return ebits, bias


def _max_pos(data: Any) -> float:
    return data.draw(st.sampled_from((0.875, 0.9375, 1.875, 448.0, 57344.0, 1e-3, 3.0, 1e20, 0.0)))


def _fp8_rows(data: Any, shape: tuple[int, ...], forward: bool) -> torch.Tensor:
    from conformance.specs.fbgemm.quantize_float.reference import fp8_rowwise_quantize

    if data.draw(st.booleans(), label="raw bytes"):
        lead, aligned = shape[:-1], (shape[-1] + 3) // 4 * 4
        q = torch.randint(0, 256, (*lead, aligned + 8), generator=seeded(data), dtype=torch.int32)
        return q.to(torch.uint8)
    return fp8_rowwise_quantize(_bits(data, shape).nan_to_num_(0.0), forward)


def _padded_rows(data: Any, forward: bool, row_dim: int) -> torch.Tensor:
    from conformance.specs.fbgemm.quantize_float.reference import padded_fp8_rowwise_quantize

    shape = _shape(data, (1, 2, 3), rows=True)
    return padded_fp8_rowwise_quantize(_bits(data, shape), forward, row_dim)


@fuzz_test("quantize_float")
def test_fuzz_quantize_float_valid(data: Any) -> Case:
    """Every op on valid input in a drawn layout, equal to upstream's CPU kernel or the
    reference of its CUDA kernel."""
    which = data.draw(st.sampled_from(TARGETS), label="op")
    forward = data.draw(st.booleans(), label="forward")
    row_dim = data.draw(st.sampled_from((4, 8, 12, 16)), label="row_dim")
    label = f"valid {which}"
    if which == "bf16":
        return Case(
            TO_BF16, (in_layout(data, _bits(data, _shape(data, (0, 1, 2, 3)))),), label=label
        )
    if which == "from bf16":
        x = _bits(data, _shape(data, (0, 1, 2, 3))).to(torch.bfloat16)
        return Case(FROM_BF16, (in_layout(data, x),), label=label)
    if which == "hfp8":
        x = in_layout(data, _bits(data, _shape(data, (2,))))
        return Case(TO_HFP8, (x, *_format(data), _max_pos(data)), label=label)
    if which == "from hfp8":
        q = torch.randint(0, 256, _shape(data, (2,)), generator=seeded(data), dtype=torch.int32)
        return Case(FROM_HFP8, (in_layout(data, q.to(torch.uint8)), *_format(data)), label=label)
    if which == "fp8":
        dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
        x = in_layout(data, _bits(data, _shape(data, (1, 2, 3), rows=True)).to(dtype))
        return Case(TO_FP8, (x, forward), oracle=REF + "fp8_rowwise_quantize", label=label)
    if which == "from fp8":
        q = in_layout(data, _fp8_rows(data, _shape(data, (1, 2, 3), rows=True), forward))
        out = data.draw(st.sampled_from((0, 1, 5)), label="output_dtype")
        return Case(FROM_FP8, (q, forward, out), oracle=REF + "fp8_rowwise_dequantize", label=label)
    if which == "padded":
        dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
        x = in_layout(data, _bits(data, _shape(data, (1, 2, 3), rows=True)).to(dtype))
        oracle = REF + "padded_fp8_rowwise_quantize"
        return Case(TO_PAD, (x, forward, row_dim), oracle=oracle, label=label)
    q = _padded_rows(data, forward, row_dim)
    out = data.draw(st.sampled_from((0, 1, 5)), label="output_dtype")
    args: tuple = (in_layout(data, q), forward, row_dim)
    if data.draw(st.booleans(), label="sized"):  # the size the rows keep
        from conformance.specs.fbgemm.quantize_float.reference import (
            padded_fp8_rowwise_dequantize,
        )

        args = (*args, padded_fp8_rowwise_dequantize(q, forward, row_dim).shape[-1], out)
    else:
        args = (*args, -1, out)
    return Case(FROM_PAD, args, oracle=REF + "padded_fp8_rowwise_dequantize", label=label)


def _good(data: Any, which: str, forward: bool, row_dim: int) -> tuple[str, list[Any], str]:
    """(target, args, the name of the tensor argument) of a small valid call."""
    x = torch.randn(3, 8, generator=seeded(data))
    if which == "bf16":
        return TO_BF16, [x], "input"
    if which == "from bf16":
        return FROM_BF16, [x.bfloat16()], "input"
    if which == "hfp8":
        return TO_HFP8, [x, 4, 15, 1.875], "input"
    if which == "from hfp8":
        return FROM_HFP8, [x.abs().mul(9).to(torch.uint8), 4, 15], "input"
    if which == "fp8":
        return TO_FP8, [x, forward], "t"
    if which == "from fp8":
        return FROM_FP8, [_fp8_rows(data, (3, 8), forward), forward, 0], "input"
    if which == "padded":
        return TO_PAD, [x, forward, row_dim], "t"
    from conformance.specs.fbgemm.quantize_float.reference import padded_fp8_rowwise_quantize

    q = padded_fp8_rowwise_quantize(x, forward, row_dim)
    return FROM_PAD, [q, forward, row_dim, -1, 0], "input"


SCALARS = {  # target -> (position, name, bad values)
    TO_HFP8: [
        (1, "ebits", (0, 8, -1, 2**40)),
        (2, "exponent_bias", (-1, 127, 200, -(2**31))),
        (3, "max_pos", (float("inf"), float("nan"), -1.0, 2.0**101, 1e-40)),
    ],
    FROM_HFP8: [(1, "ebits", (0, 8, -1)), (2, "exponent_bias", (-1, 127, 2**40))],
    FROM_FP8: [(2, "output_dtype", (-1, 2, 3, 4, 6, 100))],
    TO_PAD: [(2, "row_dim", (0, -4, 3, 6, 2**40 + 2))],
    FROM_PAD: [(2, "row_dim", (0, -4, 3, 6)), (4, "output_dtype", (-1, 2, 3, 6))],
}
ALLOWED = {
    TO_BF16: (torch.float32,),
    FROM_BF16: (torch.bfloat16,),
    TO_HFP8: (torch.float32,),
    FROM_HFP8: (torch.uint8,),
    TO_FP8: FLOATS,
    FROM_FP8: (torch.uint8,),
    TO_PAD: FLOATS,
    FROM_PAD: (torch.uint8,),
}
HOW = ("object", "dtype", "rank", "device", "scalar", "width", "huge", "tags", "kept")


@fuzz_test("quantize_float")
def test_fuzz_quantize_float_invalid(data: Any) -> Case:
    """A refused argument: a clear error naming the op and the argument."""
    which = data.draw(st.sampled_from(TARGETS), label="op")
    forward = data.draw(st.booleans(), label="forward")
    row_dim = data.draw(st.sampled_from((4, 8, 12)), label="row_dim")
    target, args, arg = _good(data, which, forward, row_dim)
    how = data.draw(st.sampled_from(HOW), label="how")
    names: tuple[str, ...] = (arg,)
    x = args[0]
    if how == "object":
        args[0] = not_a_tensor(data)
    elif how == "dtype":
        args[0] = x.to(other_dtype(data, ALLOWED[target]))
    elif how == "rank":
        if target in (TO_HFP8, FROM_HFP8):
            args[0] = data.draw(st.sampled_from((x[0], x[0, 0], x.view(1, *x.shape))))
        elif target in (TO_BF16, FROM_BF16):
            return _device_case(data, target, args)
        else:
            args[0] = x[0, 0]  # 0-D
    elif how == "device":
        return _device_case(data, target, args)
    elif how == "scalar" and target in SCALARS:
        pos, name, bad = data.draw(st.sampled_from(SCALARS[target]), label="scalar")
        args[pos], names = data.draw(st.sampled_from(bad), label="bad"), (name,)
    elif how == "width" and target in (FROM_FP8, FROM_PAD):
        cut = data.draw(st.integers(1, 3)) if target == FROM_FP8 else 4
        args[0] = x[..., :-cut] if x.shape[-1] > cut else x[..., :0]
        if target == FROM_FP8 and data.draw(st.booleans()):
            args[0] = x[..., :4]  # a multiple of 4 under 8
    elif how == "huge":  # a stride-0 input whose output cannot be allocated
        args[0] = x[:1].expand(2**40, *x.shape[1:])
    elif how == "kept" and target == FROM_PAD:
        # a row that keeps another count than output_last_dim (or 2**40: no allocation)
        args[3] = data.draw(st.sampled_from((0, 1, 2**40, int(x.shape[-1]) + 50)))
    elif how == "tags" and target == FROM_PAD:
        q = x.clone().view(x.shape[0], -1, row_dim + 8)
        b = data.draw(st.integers(0, q.shape[1] - 1))
        tag = data.draw(st.sampled_from((row_dim + 1, 2**31 - 1, 2**20)))
        q[data.draw(st.integers(0, q.shape[0] - 1)), b, row_dim + 4 :] = torch.tensor(
            [tag], dtype=torch.int32
        ).view(torch.uint8)
        args[0] = q.view(x.shape)
    else:
        args[0] = x.to(other_dtype(data, ALLOWED[target]))
    return Case(target, tuple(args), expect="error", names=names, label=how)


def _device_case(data: Any, target: str, args: list[Any]) -> Case:
    """One tensor argument elsewhere: upstream's kernel or ours wherever it is (no partner);
    npu:1 only for the ops with no CPU kernel upstream (it refuses a CPU tensor)."""
    cpu_ok = target in (TO_BF16, FROM_BF16, TO_HFP8, FROM_HFP8)
    where = data.draw(st.sampled_from(("cpu", "npu:1") if cpu_ok else ("npu:1",)))
    oracle = {
        TO_FP8: "fp8_rowwise_quantize",
        FROM_FP8: "fp8_rowwise_dequantize",
        TO_PAD: "padded_fp8_rowwise_quantize",
        FROM_PAD: "padded_fp8_rowwise_dequantize",
    }.get(target)
    args = [On(args[0], where), *args[1:]]
    return Case(target, tuple(args), oracle=REF + oracle if oracle else None, label=f"{where}")
