"""Spec for ``fbgemm::keyed_jagged_index_select_dim1`` (upstream: CUDA only, no CPU kernel).

The oracle is :func:`~fbgemm_npu.testing.index_select_inputs.keyed_reference`, plain Python
loops over the segments read from upstream's CUDA kernel; the spec's op runs it on CPU tensors
and ours on npu tensors.  Inputs: batch size 1
to 6, 0 to 4 keys, lengths with zero-length segments, int32 / int64 lengths, offsets and indices
(repeats and drops), values of every dtype (float64 and int8 included), sometimes strided, longer
than the lengths' sum; weights float32 / float16 or omitted; ``selected_lengths_sum`` omitted,
exact, or smaller (invalid: upstream's CUDA kernel truncates silently; the reference and ours
refuse it).  Gradients (``[grad]``): float values without weights,
sums over repeated samples (``SUMS``).  Budget: the op's ``BUDGETS`` entry; weights and the
length sum select the path and the syncs.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, OpSpec, TensorView
from conformance.specs.fbgemm.index_select.common import (
    EXACT,
    FLOATS,
    INDEX_DTYPES,
    SUMS,
    VALUE_DTYPES,
    seed,
)
from conformance.strategies import values as fill_values
from fbgemm_npu.testing.index_select_inputs import keyed_reference

F = torch.ops.fbgemm
__all__ = ["SPECS", "keyed_inputs", "keyed_reference"]


def _keyed_op(**kw: Any) -> Any:
    """Ours on npu tensors; the reference on CPU tensors (upstream has no CPU kernel)."""
    if kw["values"].device.type == "cpu":
        return keyed_reference(**kw)
    return F.keyed_jagged_index_select_dim1(**kw)


@st.composite
def keyed_inputs(
    draw: st.DrawFn,
    dtypes: tuple = (*VALUE_DTYPES, torch.float64, torch.int8),
    weights: tuple = (False, True),
    sizes: tuple = ("omitted", "exact", "smaller"),
) -> dict:
    batch_size = draw(st.integers(1, 6))
    num_batches = draw(st.integers(0, 4))
    gen = torch.Generator().manual_seed(seed(draw))
    l_dtype = draw(st.sampled_from(INDEX_DTYPES))
    lengths = torch.randint(
        0, draw(st.sampled_from((1, 3, 6))), (num_batches * batch_size,), generator=gen
    )
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    k = draw(st.integers(0, 6))
    indices = torch.randint(0, batch_size, (k,), generator=gen)
    dtype = draw(st.sampled_from(dtypes))
    n = int(lengths.sum()) + draw(st.sampled_from((0, 0, 3)))
    fill = "uniform" if dtype.is_floating_point else "signed"
    vals = fill_values((n,), dtype, fill, seed(draw))
    args: dict[str, Any] = {
        "values": vals
        if draw(st.booleans())
        else TensorView(torch.stack([vals, vals], 1).reshape(-1), lambda x: x[::2], "every other"),
        "lengths": lengths.to(l_dtype),
        "offsets": offsets.to(draw(st.sampled_from(INDEX_DTYPES))),
        "indices": indices.to(draw(st.sampled_from(INDEX_DTYPES))),
        "batch_size": batch_size,
    }
    if draw(st.sampled_from(weights)):
        w_dtype = draw(st.sampled_from((torch.float32, torch.float16)))
        args["weights"] = fill_values((n,), w_dtype, "uniform", seed(draw))
    total = int(sum(lengths[b * batch_size + j] for b in range(num_batches) for j in indices))
    size = draw(st.sampled_from(sizes))
    if size == "smaller" and total > 0:
        args["selected_lengths_sum"] = draw(st.integers(0, total - 1))
    elif size != "omitted":
        args["selected_lengths_sum"] = total
    return args


def _keyed_budget(**kw: Any) -> BudgetUse:
    sized = kw.get("selected_lengths_sum") is not None
    parts = [] if kw.get("weights") is not None else ["no_weights"]
    parts += [] if sized else ["no_selected_lengths_sum"]
    path = " + ".join(parts) or None
    return BudgetUse(op="fbgemm::keyed_jagged_index_select_dim1", path=path, sized=sized)


def _keyed_examples() -> tuple[dict, ...]:
    vals = torch.arange(1.0, 12.0)
    lengths = torch.tensor([1, 2, 3, 0, 4, 1])  # two keys, batch_size 3
    offsets = torch.tensor([0, 1, 3, 6, 6, 10, 11])
    base = {"values": vals, "lengths": lengths, "offsets": offsets, "batch_size": 3}
    return (
        {**base, "indices": torch.tensor([2, 0])},
        {**base, "indices": torch.tensor([1, 1, 1]), "weights": vals * 0.5},
        {**base, "indices": torch.tensor([2, 0]), "selected_lengths_sum": 5},
        {**base, "indices": torch.zeros(0, dtype=torch.int64)},
    )


_NOTE = "CUDA-only upstream: judged by keyed_reference (loops over the segments)"
SPECS = [
    OpSpec(
        "keyed_jagged_index_select_dim1",
        _keyed_op,
        keyed_inputs(),
        EXACT,
        _keyed_budget,
        examples=_keyed_examples(),
        notes=_NOTE,
    ),
    OpSpec(
        "keyed_jagged_index_select_dim1[grad]",
        _keyed_op,
        keyed_inputs(
            dtypes=FLOATS + (torch.float64,), weights=(False,), sizes=("omitted", "exact")
        ),
        SUMS,
        _keyed_budget,
        backward=True,
        grad_inputs=("values",),
        notes=_NOTE,
    ),
]
