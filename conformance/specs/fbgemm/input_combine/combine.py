"""Specs for the input_combine ops against upstream's CPU kernels.

Inputs (``fbgemm_npu.testing.op_samples_input_combine.tables``): 1 to 6 tables of 0 (1 for the
padding ops, which need a bag start per table) to 5 bags of 0-3 indices each, int32 / int64
indices and offsets / lengths mixed, float32 weights on some tables, ``include_last_offsets``
random or (one example in three) all set with padded indices past some tables' last offsets
(upstream trims them), the padding ops' ``batch_size`` 0 to 3 past the largest table.  One
example in ten swaps a table's indices to float32 or its weights to float64: upstream raises,
ours must too.  Not drawn: a trimmed table whose last offset is 0 (upstream mishandles it:
``combine.py``; tests/fbgemm/input_combine/ hold ours to the math), and the inputs upstream writes
past its buffers for (refused by name: tests/fbgemm/input_combine/).  Oracle: upstream, exact
(indices and offsets are integers, weights are copied).  Budget: the op's entry, path ``no
weights`` when no table has weights (``include_last_offsets`` is moved to the device with every
input: the main path).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from fbgemm_npu.testing.op_samples_input_combine import tables

F = torch.ops.fbgemm
EXACT = Compare({torch.float32: Tol(rtol=0.0, atol=0.0)})


def _draw(draw: st.DrawFn, min_batch: int) -> dict[str, object]:
    seed = draw(st.integers(0, 2**16))
    a = tables(
        seed,
        n_tables=draw(st.integers(1, 6)),
        max_batch=draw(st.integers(min_batch, 5)),
        padded=min_batch == 0 and draw(st.integers(0, 2)) == 0,
        min_batch=min_batch,
    )
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        if draw(st.booleans()):
            a.indices[0] = a.indices[0].float()
        else:
            a.weights[-1] = torch.rand(a.indices[-1].numel(), dtype=torch.float64)
    return {
        "indices_list": a.indices,
        "offsets_list": a.offsets,
        "lengths_list": a.lengths,
        "per_sample_weights": a.weights,
        "include_last_offsets": a.include_last,
        "batch_size": a.batch_size + draw(st.integers(0, 3)),
    }


@st.composite
def _offsets_inputs(draw: st.DrawFn, padding: bool) -> dict[str, object]:
    d = _draw(draw, 1 if padding else 0)
    d.pop("lengths_list")
    if not padding:
        d.pop("batch_size")
    return d


@st.composite
def _lengths_inputs(draw: st.DrawFn, padding: bool) -> dict[str, object]:
    d = _draw(draw, 0)
    d.pop("offsets_list")
    d.pop("include_last_offsets")
    if not padding:
        d.pop("batch_size")
    return d


def _budget(per_sample_weights: list[torch.Tensor], **_: object) -> BudgetUse:
    weighted = any(w.numel() > 0 for w in per_sample_weights)
    return BudgetUse(path=None if weighted else "no weights")


def _examples() -> tuple[dict[str, object], ...]:
    i64, i32 = torch.int64, torch.int32
    idx = [torch.tensor([5, 6, 7], dtype=i64), torch.tensor([1], dtype=i32)]
    return (
        {  # one table, one bag start, no weights
            "indices_list": idx[:1],
            "offsets_list": [torch.tensor([0], dtype=i64)],
            "per_sample_weights": [torch.empty(0)],
            "include_last_offsets": torch.tensor([False]),
        },
        {  # padded: table 0 keeps 2 of its 3 indices
            "indices_list": idx,
            "offsets_list": [torch.tensor([0, 2], dtype=i64), torch.tensor([0, 1], dtype=i32)],
            "per_sample_weights": [torch.tensor([0.5, 1.5, 2.5]), torch.empty(0)],
            "include_last_offsets": torch.tensor([True, True]),
        },
    )


SPECS = [
    OpSpec(
        name="tbe_input_combine",
        op=lambda **kw: F.tbe_input_combine(**kw),
        inputs=_offsets_inputs(False),
        compare=EXACT,
        budget=_budget,
        examples=_examples(),
    ),
    OpSpec(
        name="padding_fused_tbe_input_combine",
        op=lambda **kw: F.padding_fused_tbe_input_combine(**kw),
        inputs=_offsets_inputs(True),
        compare=EXACT,
        budget=_budget,
    ),
    OpSpec(
        name="tbe_input_combine_with_length",
        op=lambda **kw: F.tbe_input_combine_with_length(**kw),
        inputs=_lengths_inputs(False),
        compare=EXACT,
        budget=_budget,
    ),
    OpSpec(
        name="padding_fused_tbe_input_combine_with_length",
        op=lambda **kw: F.padding_fused_tbe_input_combine_with_length(**kw),
        inputs=_lengths_inputs(True),
        compare=EXACT,
        budget=_budget,
    ),
]
