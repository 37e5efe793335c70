"""Spec for ``Fused8BitRowwiseQuantizedToFloatMixedDim``: upstream has no CPU kernel (CUDA only,
``quantize_fused_8bit_rowwise.cu``), so on CPU the spec's op runs the CUDA kernel's math through
upstream's CPU kernels -- each table's block ``input[:, D_offsets[t] : D_offsets[t + 1]]``
dequantized by ``Fused8BitRowwiseQuantizedToFloat`` (the same float32 FMA per byte), side by
side, in float32 or float16 -- and ours on npu; the harness compares them exactly.

Inputs: 0 to 30 rows, 0 to 6 tables of widths 0 to 40 (data bytes), each block quantized from
float rows (half the time) or random bytes with finite scale / bias (``dequantize.py``),
``output_dtype`` 0 or 1.  One example in ten is refused (``output_dtype`` 5, int64
``D_offsets``): the oracle raises, ours must too.  Not drawn: offsets that are not the tables'
bounds (a queued data check: tests/fbgemm/quantize_8bit/test_quantize_8bit_mixed_dim.py).
Budget: the op's entry, ``half`` for float16, ``no_tables`` for ``T = 0``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, OpSpec
from conformance.specs.fbgemm.quantize_8bit.dequantize import EXACT

F = torch.ops.fbgemm
OUTPUT = {0: torch.float32, 1: torch.float16}


def mixed_dim(input: torch.Tensor, D_offsets: torch.Tensor, output_dtype: int) -> torch.Tensor:
    """Ours on npu; on CPU the per-table reference of the module docstring."""
    if input.device.type != "cpu":
        return F.Fused8BitRowwiseQuantizedToFloatMixedDim(input, D_offsets, output_dtype)
    if output_dtype not in OUTPUT or D_offsets.dtype != torch.int32:
        raise RuntimeError("Fused8BitRowwiseQuantizedToFloatMixedDim: refused by upstream")
    bounds = D_offsets.tolist()
    parts = [
        F.Fused8BitRowwiseQuantizedToFloat(input[:, a:b].contiguous())
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    out = torch.cat(parts, 1) if parts else torch.zeros(input.shape[0], input.shape[1])
    return out.to(OUTPUT[output_dtype])


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, object]:
    rows = draw(st.integers(0, 30))
    widths = draw(st.lists(st.integers(0, 40), max_size=6))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    blocks = []
    for w in widths:
        if draw(st.booleans()):
            x = torch.randn(rows, w, generator=g) * 10 ** draw(st.integers(-3, 4))
            blocks.append(F.FloatToFused8BitRowwiseQuantized(x))
            continue
        q = torch.randint(0, 256, (rows, w), dtype=torch.uint8, generator=g)
        scale = torch.rand(rows, 1, generator=g) * 10 ** draw(st.integers(-8, 3))
        bias = torch.randn(rows, 1, generator=g) * 10 ** draw(st.integers(-3, 6))
        blocks.append(torch.cat([q, torch.cat([scale, bias], 1).view(torch.uint8)], 1))
    q = torch.cat(blocks, 1) if blocks else torch.zeros(rows, 0, dtype=torch.uint8)
    sizes = torch.tensor([w + 8 for w in widths], dtype=torch.int64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)]).to(torch.int32)
    output_dtype = draw(st.sampled_from((0, 1)))
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        if draw(st.booleans()):
            output_dtype = 5
        else:
            offsets = offsets.long()
    return {"input": q, "D_offsets": offsets, "output_dtype": output_dtype}


def _budget(input: torch.Tensor, D_offsets: torch.Tensor, output_dtype: int) -> BudgetUse:
    if D_offsets.numel() == 1:
        return BudgetUse(path="no_tables")
    return BudgetUse(path="half" if output_dtype == 1 else None)


SPECS = [
    OpSpec(
        name="Fused8BitRowwiseQuantizedToFloatMixedDim",
        op=mixed_dim,
        inputs=_inputs(),
        compare=EXACT,
        budget=_budget,
        examples=(
            {
                "input": torch.zeros(2, 5, dtype=torch.uint8),
                "D_offsets": torch.zeros(1, dtype=torch.int32),
                "output_dtype": 0,
            },
        ),
    )
]
