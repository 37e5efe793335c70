"""Specs of the MX4 ops against upstream's CPU kernels (its Python reference), bit for bit: the
quantize bytes, the dequantized values as int32 bit patterns.

Inputs: finite float32 values (bit patterns below 2**126, so no group's shared exponent is NaN:
the one stated exception of tests/fbgemm/quantize_mx/test_quantize_mx_parity.py) and scaled
normals; shapes of rank 1 to 3, last dims padded or not; group sizes 8 / 16 / 32; rounding modes
nearest / floor / even / ceil and None; dequantize of arbitrary bytes.  Budgets: the op's entry
(``floor`` for floor / ceil, ``pad`` for a padded last dim).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec

F = torch.ops.fbgemm
SHAPES = st.sampled_from([(64,), (3, 32), (2, 3, 16), (5, 40), (7,), (1, 1), (0, 32)])


@st.composite
def _to_mx(draw: st.DrawFn) -> dict[str, object]:
    shape = draw(SHAPES)
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    n = torch.Size(shape).numel()
    if draw(st.booleans()):
        bits = torch.randint(-(2**31), 2**31 - 1, (n,), generator=g, dtype=torch.int32)
        x = bits.view(torch.float32)
        x = torch.where(x.abs() < 2.0**126, x, 0.0)  # drops inf / NaN / near-max too
    else:
        x = torch.randn(n, generator=g) * 2.0 ** draw(st.integers(-140, 100))
    return {
        "input": x.view(shape),
        "mx_group_size": draw(st.sampled_from((8, 16, 32))),
        "rounding_mode": draw(st.sampled_from((None, 0, 1, 2, 4))),
    }


@st.composite
def _from_mx(draw: st.DrawFn) -> dict[str, object]:
    gs = draw(st.sampled_from((8, 16, 32)))
    groups = draw(st.integers(0, 12))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    q = torch.randint(0, 256, (groups * (gs // 2 + 1),), generator=g, dtype=torch.int32)
    return {"input": q.to(torch.uint8), "mx_group_size": gs}


def _quant(input: torch.Tensor, mx_group_size: int, rounding_mode: int | None) -> torch.Tensor:
    return F.quantize_mx(input, 8, 2, 3, 6.0, mx_group_size, rounding_mode)


def _quant_budget(input: torch.Tensor, mx_group_size: int, rounding_mode: int | None) -> BudgetUse:
    if input.dim() and input.size(-1) % mx_group_size:
        return BudgetUse(path="pad")
    return BudgetUse(path="floor" if rounding_mode in (1, 4) else None)


SPECS = [
    OpSpec(
        name="quantize_mx",
        op=_quant,
        inputs=_to_mx(),
        compare=Compare({}),
        budget=_quant_budget,
    ),
    OpSpec(
        name="dequantize_mx",
        op=lambda input, mx_group_size: F.dequantize_mx(input, mx_group_size).view(torch.int32),
        inputs=_from_mx(),
        compare=Compare({}),
    ),
]
