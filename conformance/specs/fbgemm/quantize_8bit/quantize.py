"""Specs for the float-to-fused-8-bit ops: ``FloatToFused8BitRowwiseQuantized`` (+``Out``),
``HalfToFused8BitRowwiseQuantized``, ``FloatOrHalfToFused8BitRowwiseQuantized``.

Inputs: 2-D to 4-D rows (the last dim quantized), widths 0 to 70 (not only multiples of 4),
0 to 40 rows, values of mixed scale and offset per row (normal times a per-row scale up to
10**4, plus an offset up to 10**5), some rows constant; float32, float16 where the op takes it.
One example in ten is a rank or dtype upstream refuses (1-D, or bfloat16 for ``FloatOrHalf``):
ours must raise too.  Not drawn: NaN (upstream's vector min / max keep or drop it by lane), -0.0
next to +0.0 (the sign of the stored min follows upstream's lane order), other dtypes for
``FloatTo...`` / ``HalfTo...`` (upstream reads their memory as float32 / float16; ours refuses
them by name: tests/fbgemm/quantize_8bit/).  Oracle: upstream, exact (uint8).
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec

F = torch.ops.fbgemm


def rows(draw: st.DrawFn, dtype: torch.dtype) -> torch.Tensor:
    """Rows of mixed scale and offset (module docstring), on the host."""
    lead = draw(st.lists(st.integers(0, 40), min_size=1, max_size=3))
    if len(lead) > 1:
        lead = [min(n, 6) for n in lead]
    n = draw(st.integers(0, 70))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    scale = 10 ** torch.randint(-3, 5, (*lead, 1), generator=g).float()
    x = torch.randn(*lead, n, generator=g) * scale * torch.rand(*lead, 1, generator=g)
    x = x + torch.randn(*lead, 1, generator=g) * 10 ** draw(st.integers(0, 5))
    x[torch.rand(*lead, generator=g) < 0.1] = 3.0  # constant rows
    if dtype == torch.float16:  # in float16's range
        x = x.clamp(-6e4, 6e4)
    if x.numel() and draw(st.integers(0, 9)) == 0:  # an infinity, or a row of them
        x.view(-1, n)[0, : draw(st.integers(1, n))] = draw(st.sampled_from((1.0, -1.0))) * math.inf
    return x.to(dtype)


def _inputs(dtypes: tuple[torch.dtype, ...], bad: tuple[torch.dtype, ...]) -> st.SearchStrategy:
    @st.composite
    def draw_inputs(draw: st.DrawFn) -> dict[str, object]:
        x = rows(draw, draw(st.sampled_from(dtypes)))
        if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
            if bad and draw(st.booleans()):
                return {"t": x.to(draw(st.sampled_from(bad)))}
            return {"t": x.reshape(-1)}  # 1-D: upstream raises
        return {"t": x}

    return draw_inputs()


def _path(t: torch.Tensor) -> BudgetUse:
    if t.dim() >= 2 and t.shape[-1] == 0:
        return BudgetUse(path="empty_row")
    return BudgetUse(path="half" if t.dtype == torch.float16 else None)


def _half_path(t: torch.Tensor) -> BudgetUse:
    return BudgetUse(path="empty_row" if t.dim() >= 2 and t.shape[-1] == 0 else None)


_FLOAT_EXAMPLES = tuple(
    {"t": t}
    for t in (
        torch.zeros(0, 5),
        torch.zeros(3, 0),
        torch.ones(2, 7),
        torch.tensor([[3e38, -3e38, 0.0], [1e-30, -1e-30, 0.0]]),  # infinite / tiny ranges
        torch.tensor([[1e6, 1e6 + 0.0625, 1e6 + 1]]),
        torch.tensor([[float("inf")] * 3, [-float("inf")] * 3, [float("inf"), 1.0, -2.0]]),
        torch.ones(4),  # 1-D: upstream raises
    )
)

SPECS = [
    OpSpec(
        name="FloatToFused8BitRowwiseQuantized",
        op=lambda t: F.FloatToFused8BitRowwiseQuantized(t),
        inputs=_inputs((torch.float32,), ()),
        compare=Compare({}),
        budget=_path,
        examples=_FLOAT_EXAMPLES,
    ),
    OpSpec(
        name="HalfToFused8BitRowwiseQuantized",
        op=lambda t: F.HalfToFused8BitRowwiseQuantized(t),
        inputs=_inputs((torch.float16,), ()),
        compare=Compare({}),
        budget=_half_path,
        examples=tuple({"t": e["t"].half()} for e in _FLOAT_EXAMPLES[:3]),
    ),
    OpSpec(
        name="FloatOrHalfToFused8BitRowwiseQuantized",
        op=lambda t: F.FloatOrHalfToFused8BitRowwiseQuantized(t),
        inputs=_inputs((torch.float32, torch.float16), (torch.bfloat16, torch.float64)),
        compare=Compare({}),
        budget=_path,
        examples=({"t": torch.ones(2, 3, dtype=torch.bfloat16)},),  # upstream raises
    ),
    OpSpec(
        name="FloatToFused8BitRowwiseQuantizedOut",
        op=lambda t: F.FloatToFused8BitRowwiseQuantizedOut(
            torch.empty(0, dtype=torch.uint8, device=t.device), t
        ),
        inputs=_inputs((torch.float32,), ()),
        compare=Compare({}),
        budget=_path,
        examples=_FLOAT_EXAMPLES[:2],
    ),
]
