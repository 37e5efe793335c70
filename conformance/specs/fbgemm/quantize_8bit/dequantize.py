"""Specs for the fused-8-bit-to-float ops: ``Fused8BitRowwiseQuantizedToFloat`` (+``Out``),
``...ToHalf``, ``...ToBfloat16``, ``...ToFloatOrHalf`` (every ``output_dtype``, scale and bias
last or first, float32 or float16 ones).

Inputs: 2-D to 4-D uint8 rows, 0 to 40 rows, data bytes 0 to 70 (random), scale and bias
finite float32 (float16 for the 2-byte layout) of mixed magnitudes: ``scale`` in
``[0, 10**3)`` times ``10**-8 .. 10**3``, ``bias`` normal times up to ``10**6`` -- often
``|bias| / scale`` beyond ``2**20``, where float64's add rounds before the float32 cast (the
double rounding that could differ from upstream's float32 FMA by 1 ulp, for about one value in
``2**29``: the comparison stays exact).  Half the time the rows are quantized float rows
instead (``FloatToFused8BitRowwiseQuantized``).  One example in ten is refused by upstream (not
uint8, 1-D, a row shorter than its scale and bias, ``quant_padding_float_type=False`` with the
scale and bias last, an ``output_dtype`` other than 0, 1, 5): ours must raise too.  Not drawn:
NaN / infinite scale or bias bytes; rows shorter than their scale and bias when there are no
rows (upstream returns a tensor of negative width, ``[0, -3]``; ours raises naming ``input``).
Oracle: upstream, exact.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.quantize_8bit.quantize import rows

F = torch.ops.fbgemm
EXACT = Compare({d: Tol(0.0, 0.0) for d in (torch.float32, torch.float16, torch.bfloat16)})


def fused(draw: st.DrawFn, w: int = 4) -> torch.Tensor:
    """Fused rows, scale and bias last (module docstring)."""
    if w == 4 and draw(st.booleans()):
        return F.FloatToFused8BitRowwiseQuantized(rows(draw, torch.float32))
    lead = draw(st.lists(st.integers(0, 40), min_size=1, max_size=3))
    if len(lead) > 1:
        lead = [min(n, 6) for n in lead]
    n = draw(st.integers(0, 70))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    q = torch.randint(0, 256, (*lead, n), dtype=torch.uint8, generator=g)
    scale = torch.rand(*lead, 1, generator=g) * 10 ** torch.randint(-8, 4, (*lead, 1), generator=g)
    bias = torch.randn(*lead, 1, generator=g) * 10 ** torch.randint(-3, 7, (*lead, 1), generator=g)
    sb = torch.cat([scale, bias], -1).to(torch.float32 if w == 4 else torch.float16)
    return torch.cat([q, sb.view(torch.uint8)], -1)


@st.composite
def _plain(draw: st.DrawFn) -> dict[str, object]:
    q = fused(draw)
    if draw(st.integers(0, 9)) == 9:
        bad = draw(st.sampled_from(("float", "1-D", "short")))
        if bad == "short" and q.numel() == 0:  # upstream: a tensor of negative width, no error
            bad = "1-D"
        if bad == "float":
            return {"input": q.float()}
        return {"input": q.reshape(-1) if bad == "1-D" else q[..., :5]}
    return {"input": q}


@st.composite
def _or_half(draw: st.DrawFn) -> dict[str, object]:
    last = draw(st.booleans())
    float_type = True if last else draw(st.booleans())
    w = 4 if float_type else 2
    q = fused(draw, w)
    if not last:  # scale and bias first
        q = torch.cat([q[..., q.shape[-1] - 2 * w :], q[..., : q.shape[-1] - 2 * w]], -1)
    output_dtype = draw(st.sampled_from((0, 1, 5)))
    if draw(st.integers(0, 9)) == 9:
        bad = draw(st.sampled_from(("dtype", "flags")))
        output_dtype, float_type = (2, float_type) if bad == "dtype" else (output_dtype, False)
        last = True if bad == "flags" else last
    return {
        "input": q,
        "output_dtype": output_dtype,
        "scale_bias_last": last,
        "quant_padding_float_type": float_type,
    }


def _or_half_path(
    input: torch.Tensor, output_dtype: int, scale_bias_last: bool, quant_padding_float_type: bool
) -> BudgetUse:
    return BudgetUse(path={1: "half", 5: "bfloat16"}.get(output_dtype))


_EXAMPLES = tuple(
    {"input": t}
    for t in (
        torch.zeros(0, 12, dtype=torch.uint8),
        torch.zeros(3, 8, dtype=torch.uint8),  # no data bytes
        torch.zeros(2, 3, dtype=torch.uint8),  # shorter than scale and bias: upstream raises
        torch.zeros(2, 12),  # float32: upstream raises
    )
)


MAIN = BudgetUse()


def _spec(name: str, call: Callable[..., torch.Tensor], budget: BudgetUse = MAIN) -> OpSpec:
    return OpSpec(
        name=name, op=call, inputs=_plain(), compare=EXACT, budget=budget, examples=_EXAMPLES
    )


SPECS = [
    _spec(
        "Fused8BitRowwiseQuantizedToFloat", lambda input: F.Fused8BitRowwiseQuantizedToFloat(input)
    ),
    _spec(
        "Fused8BitRowwiseQuantizedToHalf", lambda input: F.Fused8BitRowwiseQuantizedToHalf(input)
    ),
    _spec(
        "Fused8BitRowwiseQuantizedToBfloat16",
        lambda input: F.Fused8BitRowwiseQuantizedToBfloat16(input),
    ),
    _spec(
        "Fused8BitRowwiseQuantizedToFloatOut",
        lambda input: F.Fused8BitRowwiseQuantizedToFloatOut(
            torch.empty(0, device=input.device), input
        ),
    ),
    OpSpec(
        name="Fused8BitRowwiseQuantizedToFloatOrHalf",
        op=lambda **kw: F.Fused8BitRowwiseQuantizedToFloatOrHalf(**kw),
        inputs=_or_half(),
        compare=EXACT,
        budget=_or_half_path,
        examples=(
            {
                "input": torch.zeros(2, 4, dtype=torch.uint8),
                "output_dtype": 1,
                "scale_bias_last": False,
                "quant_padding_float_type": False,
            },
        ),
    ),
]
