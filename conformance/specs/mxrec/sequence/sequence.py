"""Specs of ``mxrec::multislice_concat`` and ``mxrec::reverse_sequence`` (forward, and the
backward through autograd).

No upstream CPU kernel exists (the CPU kernel is ours): values are checked against references
written from the formulas with Python slicing in float64 (``cat`` of column slices; each
valid prefix flipped row by row), the CPU side giving the error behaviour, shapes and dtypes.
Inputs: float16 / float32 / bfloat16 and int32 / int64 values, lengths 0 .. S, slices with
length -1, one invalid example in ten (a dtype, a length past S, a slice past the row).

Tolerances: both ops copy values, so every dtype is compared exactly (``Tol(0, 0)``); the
gradient of a permutation is a permutation of the gradient, exact but for the one rounding of
the float64 grad_output to the input's dtype (``GRAD``).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

M = torch.ops.mxrec
EXACT = {
    d: Tol(rtol=0.0, atol=0.0)
    for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64)
}
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# the backward's grad_output is drawn in float64 and rounded once to the input's dtype
GRAD = {
    torch.float32: Tol(rtol=1e-7, atol=0.0),
    torch.float16: Tol(rtol=1e-3, atol=0.0),
    torch.bfloat16: Tol(rtol=8e-3, atol=0.0),
    torch.float64: Tol(rtol=0.0, atol=0.0),
}


def multislice_reference(input, concat_num, concat_size, slice_begin, slice_length):
    """float64 (integers kept): output ``i`` = the ``cat`` of its slices' columns."""
    x = input.double() if input.is_floating_point() else input
    outs, j = [], 0
    for size in concat_size[:concat_num]:
        parts = []
        for _ in range(size):
            b, n = slice_begin[j], slice_length[j]
            parts.append(x[:, b:] if n == -1 else x[:, b : b + n])
            j += 1
        outs.append(torch.cat(parts, dim=1))
    return outs


def reverse_reference(input: torch.Tensor, seq_lengths: torch.Tensor) -> torch.Tensor:
    """float64: each batch's first ``L_b`` rows flipped, the rest copied (differentiable)."""
    x = input.double() if input.is_floating_point() else input
    rows = []
    for b, n in enumerate(seq_lengths.tolist()):
        rows.append(torch.cat([x[b, :n].flip(0), x[b, n:]]))
    return torch.stack(rows) if rows else x.clone()


@st.composite
def multislice_inputs(draw: st.DrawFn) -> dict[str, object]:
    b, d = draw(st.integers(0, 5)), draw(st.integers(1, 24))
    dtype = draw(st.sampled_from((*FLOATS, torch.int32, torch.int64)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = (torch.randn(b, d, generator=gen) * 100).to(dtype)
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    begins, lengths = [], []
    for _ in range(sum(sizes)):
        begin = draw(st.integers(0, d - 1))
        begins.append(begin)
        lengths.append(draw(st.sampled_from((-1, *range(1, d - begin + 1)))))
    if draw(st.integers(0, 9)) == 9:
        lengths[0] = d + 1 - begins[0]
    return {
        "input": x,
        "concat_num": len(sizes),
        "concat_size": sizes,
        "slice_begin": begins,
        "slice_length": lengths,
    }


@st.composite
def reverse_inputs(draw: st.DrawFn, requires_grad: bool = False) -> dict[str, object]:
    b, s, d = draw(st.integers(0, 4)), draw(st.integers(0, 9)), draw(st.integers(0, 6))
    kinds = FLOATS if requires_grad else (*FLOATS, torch.int64, torch.int32)
    dtype = draw(st.sampled_from(kinds))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = (torch.randn(b, s, d, generator=gen) * 100).to(dtype).requires_grad_(requires_grad)
    lens = torch.randint(0, s + 1, (b,), generator=gen)
    lens = lens.to(draw(st.sampled_from((torch.int32, torch.int64))))
    if not requires_grad and draw(st.integers(0, 9)) == 9:
        lens = lens.to(torch.int8) if draw(st.booleans()) else lens[:-1]
    return {"input": x, "seq_lengths": lens}


def _multislice_budget(concat_num: int, **_: object) -> BudgetUse:
    return BudgetUse(op="mxrec::multislice_concat", units=concat_num)


SPECS = [
    OpSpec(
        name="multislice_concat",
        op=lambda **kw: M.multislice_concat(**kw),
        inputs=multislice_inputs(),
        compare=Compare(EXACT),
        budget=_multislice_budget,
        reference=multislice_reference,
    ),
    OpSpec(
        name="reverse_sequence",
        op=lambda **kw: M.reverse_sequence(**kw),
        inputs=reverse_inputs(),
        compare=Compare(EXACT),
        budget=BudgetUse(op="mxrec::reverse_sequence"),
        reference=reverse_reference,
    ),
    OpSpec(
        name="reverse_sequence[grad]",
        op=lambda **kw: M.reverse_sequence(**kw),
        inputs=reverse_inputs(requires_grad=True),
        compare=Compare(GRAD),
        budget=BudgetUse(op="mxrec::reverse_sequence"),
        reference=reverse_reference,
        backward=True,
        grad_inputs=("input",),
    ),
]
