"""Hostile-input fuzz of the quantize_mx family (fbgemm_npu/native/fbgemm/quantize_mx/).

Valid calls equal upstream's CPU kernels (its Python ``py_quantize_mx4`` / ``py_dequantize_mx4``)
bit for bit: float32 inputs of rank 1 to 3 in drawn layouts, last dims not a multiple of the
group (zero padded), every even group size, rounding modes nearest / floor / even / None / ceil
(other ints), any ``scale_bits`` / ``elem_*`` (ignored by upstream and ours), scales from
subnormal to near FLT_MAX, infinities in groups whose shared exponent is finite (modes other
than even); dequantize random uint8 / int8 bytes (exponent byte 255 included).  Not drawn: NaN
(and, in mode even, inf / near-FLT_MAX) groups, whose bytes are the stated difference of mx4.py
(zeros here, upstream writes its NaN's sign), and stochastic rounding (mode 3: random bits on
both sides).  Invalid calls get a clear error naming the op and the argument: other dtypes,
objects, a 0-D input (upstream's IndexError names nothing), group sizes not positive and even,
partial dequantize groups, outputs that cannot be allocated (a stride-0 input of 2**38 rows).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded

QUANT, DEQUANT = "fbgemm::quantize_mx", "fbgemm::dequantize_mx"
GROUPS = (2, 4, 6, 8, 16, 32, 64)
MODES = (0, 1, 2, None, 4, 7, -1)
FLT_MAX = torch.finfo(torch.float32).max


def _extra(data: Any) -> tuple[int, int, int, float]:
    """scale_bits, elem_ebits, elem_mbits, elem_max_norm: any (upstream ignores them)."""
    if data.draw(st.booleans(), label="default formats"):
        return 8, 2, 3, 6.0
    ints = st.integers(-5, 40)
    return (data.draw(ints), data.draw(ints), data.draw(ints), data.draw(st.floats(-10, 1e9)))


def _values(data: Any, shape: tuple[int, ...], mode: int | None) -> torch.Tensor:
    gen = seeded(data)
    scale = data.draw(st.sampled_from((1e-40, 1e-30, 1e-3, 1.0, 6.0, 1e10, 1e30, 1e37)))
    x = torch.randn(shape, generator=gen) * scale
    if x.numel() and data.draw(st.integers(0, 4), label="special") == 0:
        flat = x.view(-1)
        i = data.draw(st.integers(0, flat.numel() - 1))
        value = data.draw(st.sampled_from((0.0, -0.0, FLT_MAX, -FLT_MAX, float("inf"), -1e-45)))
        if mode in (2, None) and abs(value) >= FLT_MAX:
            value = 1.0  # mode even: an inf / near-max group is the stated NaN-group case
        flat[i] = value
    return x


@fuzz_test("quantize_mx")
def test_fuzz_quantize_mx_valid(data: Any) -> Case:
    """Every group size, rounding mode (but stochastic), rank and layout."""
    g = data.draw(st.sampled_from(GROUPS), label="mx_group_size")
    mode = data.draw(st.sampled_from(MODES), label="rounding_mode")
    rank = data.draw(st.integers(1, 3), label="rank")
    shape = tuple(data.draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    if rank:
        last = data.draw(st.sampled_from((g, 2 * g, g - 1, g + 1, 3 * g + 2, 1, 0)), label="n")
        shape = (*shape[:-1], max(last, 0))
    x = in_layout(data, _values(data, shape, mode))
    return Case(QUANT, (x, *_extra(data), g, mode), label=f"valid mode {mode}")


@fuzz_test("quantize_mx")
def test_fuzz_dequantize_mx_valid(data: Any) -> Case:
    """Random bytes, uint8 or int8, whole groups, any rank and layout."""
    g = data.draw(st.sampled_from(GROUPS), label="mx_group_size")
    groups = data.draw(st.integers(0, 6), label="groups")
    rows = data.draw(st.integers(1, 4), label="rows")
    q = torch.randint(0, 256, (rows, groups * (g // 2 + 1)), generator=seeded(data))
    q = q.to(torch.uint8)
    if data.draw(st.booleans(), label="int8"):
        q = q.view(torch.int8)
    if data.draw(st.booleans(), label="1-D"):
        q = q.view(-1)
    return Case(DEQUANT, (in_layout(data, q), g), label="valid dequantize")


@fuzz_test("quantize_mx")
def test_fuzz_quantize_mx_invalid(data: Any) -> Case:
    """Refused arguments of both ops; a tensor on the CPU or npu:1 alone is valid."""
    quant = data.draw(st.booleans(), label="quantize")
    g = data.draw(st.sampled_from(GROUPS), label="mx_group_size")
    gen = seeded(data)  # the values from the draw: a failing case replays
    x: Any = torch.randn(3, 2 * g, generator=gen)
    if not quant:
        x = torch.randint(0, 256, (3, g // 2 + 1), generator=gen).to(torch.uint8)
    how = data.draw(
        st.sampled_from(("object", "dtype", "group", "partial", "huge", "device", "0-D"))
    )
    names: tuple[str, ...] = ("input",)
    if how == "object":
        x = not_a_tensor(data)
    elif how == "dtype":
        x = x.to(other_dtype(data, (torch.float32,) if quant else (torch.uint8, torch.int8)))
    elif how == "group":
        g = data.draw(st.sampled_from((0, -2, -32, 1, 3, 7, 33)))
        names = ("mx_group_size",)
    elif how == "partial" and not quant:
        x = x.reshape(-1)[: data.draw(st.integers(1, g // 2))]
        if g == 2:  # 2 bytes a group: one byte is partial
            x = x[:1]
    elif how == "0-D" and quant:
        x = x[0, 0]
    elif how == "huge":  # a stride-0 input whose output cannot be allocated
        x = x[:1].expand(2**38, x.shape[1])
    else:
        where = data.draw(st.sampled_from(("cpu", "npu:1")), label="device")
        args = (On(x, where), 8, 2, 3, 6.0, g, None) if quant else (On(x, where), g)
        return Case(QUANT if quant else DEQUANT, args, label=f"device {where}")
    args = (x, 8, 2, 3, 6.0, g, None) if quant else (x, g)
    return Case(QUANT if quant else DEQUANT, args, expect="error", names=names, label=how)
