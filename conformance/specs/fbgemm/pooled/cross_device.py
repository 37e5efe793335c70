"""Specs of the cross-device ops: ``merge_pooled_embeddings``, ``all_to_one_device``,
``sum_reduce_to_one``.

Oracle: upstream's CPU kernels, the same inputs on the CPU with a CPU target.  Drawn inputs: 1..4
tensors, each on ``npu:0`` or ``npu:1`` (placed there while the harness builds the npu side,
before the counted call: see :func:`_placed`), target ``npu:0`` or ``npu:1``; every dtype,
contiguous and non-contiguous.  merge: rank 2 or 3, ``cat_dim`` 0/1, a wrong ``uncat_dim_size``
(upstream CPU ignores it), mixed dtypes (the first wins), all-empty inputs.

Tolerances: none.  Moves copy values, and sum_reduce adds in the same order as upstream (only the
sign of a zero sum may differ, and equal compares equal).

Budgets: the op's ``BUDGETS`` entry, per input.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, TensorView, Tol
from conformance.strategies import values as fill_values
from conformance.strategies import with_layout

F = torch.ops.fbgemm
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
ALL_DTYPES = (*FLOATS, torch.float64, torch.int32, torch.int64)
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (*FLOATS, torch.float64)})
LAYOUTS = ("contiguous", "contiguous", "transposed", "sliced")


def _to_index(t: torch.Tensor, index: int) -> torch.Tensor:
    """``t`` on npu:index on the npu side of the harness; on upstream's side the CPU tensor."""
    return t if t.device.type == "cpu" else t.to(torch.device(t.device.type, index))


def _placed(t: torch.Tensor | TensorView, index: int) -> TensorView:
    """``t`` (in its layout) on npu:``index``: the move is part of building the input, so the
    counters see the op's own launches only."""
    if isinstance(t, TensorView):
        base, view, label = t.base, t.view, t.label
    else:
        base, view, label = t, (lambda b: b), "contiguous"
    return TensorView(base, lambda b: _to_index(view(b), index), f"{label} on npu:{index}")


def _device_of(like: torch.Tensor, index: int) -> torch.device:
    """npu:index on the npu side of the harness, the CPU on upstream's side."""
    return like.device if like.device.type == "cpu" else torch.device(like.device.type, index)


def _merge(tensors: list, target: int, uncat_dim_size: int, cat_dim: int) -> Any:
    return F.merge_pooled_embeddings(
        tensors, uncat_dim_size, _device_of(tensors[0], target), cat_dim
    )


def _all_to_one(tensors: list, target: int) -> Any:
    return F.all_to_one_device(tensors, _device_of(tensors[0], target))


def _sum_reduce(tensors: list, target: int) -> Any:
    return F.sum_reduce_to_one(tensors, _device_of(tensors[0], target))


@st.composite
def _cross_inputs(draw: st.DrawFn, kind: str) -> dict:
    n = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(ALL_DTYPES))
    dtypes = [dtype] * n
    if kind != "sum" and draw(st.integers(0, 3)) == 0:
        dtypes = [draw(st.sampled_from(FLOATS)) for _ in range(n)]  # mixed: the first wins
    rank = draw(st.sampled_from([2, 2, 3]))
    fixed = [draw(st.integers(0, 4)) for _ in range(rank)]
    cat_dim = draw(st.integers(0, 1))
    shapes = []
    for _ in range(n):
        shape = list(fixed)
        if kind != "sum":
            shape[cat_dim] = draw(st.integers(0, 5))
        shapes.append(tuple(shape))
    seeds = draw(st.lists(st.integers(0, 999), min_size=n, max_size=n))
    fill = {True: "small_ints", False: "signed"}
    layouts = [draw(st.sampled_from(LAYOUTS)) for _ in range(n)]  # non-contiguous inputs too
    tensors = [
        with_layout(s, d, fill[d.is_floating_point], k, lay)
        for s, d, k, lay in zip(shapes, dtypes, seeds, layouts, strict=True)
    ]
    devices = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    inputs = {
        "tensors": [_placed(t, d) for t, d in zip(tensors, devices, strict=True)],
        "target": draw(st.integers(0, 1)),
    }
    if kind == "merge":
        inputs["uncat_dim_size"] = fixed[1 - cat_dim] + draw(st.sampled_from([0, 0, 0, 2]))
        inputs["cat_dim"] = cat_dim
    return inputs


def _cross_budget(**inputs: Any) -> BudgetUse:
    return BudgetUse(units=len(inputs["tensors"]))


def _cross_examples(kind: str) -> tuple[dict, ...]:
    """Two devices with torchrec-sized pooled outputs; merge: all-empty inputs."""
    widths = (128, 128, 128) if kind == "sum" else (128, 256, 384)
    pooled = [fill_values((64, w), torch.float32, "uniform", k) for k, w in enumerate(widths, 1)]
    placed = [_placed(t, d) for t, d in zip(pooled, (0, 1, 1), strict=True)]
    out: list[dict] = [{"tensors": placed, "target": 0}]
    if kind == "merge":
        out[0].update(uncat_dim_size=64, cat_dim=1)
        empty = [torch.zeros(0, 0, dtype=torch.int64), torch.zeros(0, 0, dtype=torch.int32)]
        placed = [_placed(t, d) for t, d in zip(empty, (1, 0), strict=True)]
        out.append({"tensors": placed, "target": 1, "uncat_dim_size": 0, "cat_dim": 0})
    return tuple(out)


def _cross_spec(name: str, kind: str, op: Any) -> OpSpec:
    return OpSpec(
        name=name,
        op=op,
        inputs=_cross_inputs(kind),
        compare=EXACT,
        budget=_cross_budget,
        examples=_cross_examples(kind),
        notes="inputs are placed on npu:0 / npu:1 before the counted call",
    )


SPECS = [
    _cross_spec("merge_pooled_embeddings", "merge", _merge),
    _cross_spec("all_to_one_device", "all_to_one", _all_to_one),
    _cross_spec("sum_reduce_to_one", "sum", _sum_reduce),
]
