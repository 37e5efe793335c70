"""Inputs shared by the jagged family's specs: jagged tensors of 1 to 3 jagged dims, their dense
forms, and which path of the op's budget (``fbgemm_npu/native/fbgemm/jagged/budgets.py``) a
drawn call takes.

Drawn jagged tensors (:func:`jagged_inputs`): B = 0..5 (empty batch included); row lengths 0..6
against max lengths 0..4 (zero-length rows and truncation in most examples); values 1-D (no
inner dim) or ``[N, D]`` with D = 0..3, every upstream dtype, contiguous / transposed / sliced /
expanded; offsets int32 or int64, sometimes a strided view; values longer than the last offset
(upstream ignores the tail); decreasing offsets for the read ops (upstream pads such rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, TensorView, Tol
from conformance.strategies import with_layout
from fbgemm_npu.testing.jagged_inputs import dims_path

F = torch.ops.fbgemm
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# Every output is a copy of input elements (or the padding value), every gradient a copy or a
# sum of one term: compared exactly.
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (*FLOATS, torch.float64)})
PADDINGS = (0.0, -1.0, 7.0, 2.5, -3.75, 1e5)
# Offsets every example below builds on: rows of length 2, 0 and 3.
OFFSETS = torch.tensor([0, 2, 2, 5])


def real(t: Any) -> Any:
    """The tensor a :class:`TensorView` stands for (for budgets and references)."""
    if isinstance(t, TensorView):
        return t.view(t.base)
    if isinstance(t, list):
        return [real(x) for x in t]
    return t


def rows_need_copy(t: Any) -> bool:
    """Whether a kernel that reads ``t`` as rows ``[-1, D]`` must copy it first: a non-empty
    tensor no view flattens so (a transposed one; a sliced one flattens as it is)."""
    t = real(t)
    if t.numel() == 0:
        return False
    try:
        t.view(-1, t.size(-1))
    except RuntimeError:
        return True
    return False


def dims_budget(offsets: Sequence[Any], *more: str) -> BudgetUse:
    """The budget path of a call with ``len(offsets)`` jagged dims, joined with ``more``."""
    return BudgetUse(path=dims_path(len(offsets), *more))


def int64_values(values: Any) -> tuple[str, ...]:
    """``("int64_values",)`` for int64 values, whose padding fill costs a launch more (a gather's
    ``int64_values`` budget paths), else ``()``."""
    return ("int64_values",) if getattr(real(values), "dtype", None) == torch.int64 else ()


def forward_and_backward(
    name: str,
    inputs: Callable[[Sequence[torch.dtype]], st.SearchStrategy[Any]],
    budget: Any,
    examples: tuple[Any, ...],
    grad: str | None,
    notes: str = "",
) -> list[OpSpec]:
    """The forward spec over every dtype, plus ``<name>.backward`` over float inputs."""
    op = getattr(F, name)
    specs = [OpSpec(name, op, inputs(DTYPES), EXACT, budget, examples=examples, notes=notes)]
    if grad is not None:
        specs.append(
            OpSpec(
                f"{name}.backward",
                op,
                inputs(FLOATS),
                EXACT,
                budget,
                backward=True,
                grad_inputs=(grad,),
            )
        )
    return specs


def _offsets_tensor(o: list[int], dtype: torch.dtype, strided: bool) -> torch.Tensor | TensorView:
    t = torch.tensor(o, dtype=dtype)
    if not strided:
        return t
    base = torch.stack([t, torch.full_like(t, -7)], dim=1).reshape(-1)  # junk between entries
    return TensorView(base, lambda x: x[::2], "strided offsets")


def _lists_of_offsets(draw: st.DrawFn, b: int, k: int) -> tuple[list[list[int]], int]:
    rows, offsets = b, []
    for _ in range(k):
        lens = draw(st.lists(st.integers(0, 6), min_size=rows, max_size=rows))
        o = [0]
        for n in lens:
            o.append(o[-1] + n)
        offsets.append(o)
        rows = o[-1]
    return offsets, rows


@st.composite
def jagged_inputs(
    draw: st.DrawFn,
    dims: Sequence[int] = (1, 2, 3),
    dtypes: Sequence[torch.dtype] = DTYPES,
    rank: str = "any",
    decreasing: bool = True,
    tail: bool = True,
) -> dict[str, Any]:
    """``values``, ``offsets`` (a list) and ``max_lengths`` of a jagged tensor (see docstring)."""
    k = draw(st.sampled_from(list(dims)))
    b = draw(st.integers(0, 5))
    max_lengths = [draw(st.integers(0, 4)) for _ in range(k)]
    offsets, rows = _lists_of_offsets(draw, b, k)
    if decreasing and len(offsets[-1]) > 3 and draw(st.integers(0, 3)) == 0:
        i = draw(st.integers(1, len(offsets[-1]) - 3))  # never the last entry (numel checks)
        last = offsets[-1]
        last[i], last[i + 1] = last[i + 1], last[i]
    n = rows + (draw(st.integers(0, 2)) if tail else 0)
    dtype = draw(st.sampled_from(list(dtypes)))
    fills = ["uniform", "small_ints"] if dtype.is_floating_point else ["signed", "lengths"]
    fill = draw(st.sampled_from(fills))
    layout = draw(st.sampled_from(["contiguous", "contiguous", "transposed", "sliced", "expanded"]))
    one_d = rank == "1" or (rank == "any" and draw(st.booleans()))
    shape = (n,) if one_d else (n, draw(st.integers(0, 3)))
    values = with_layout(shape, dtype, fill, draw(st.integers(0, 2**31 - 1)), layout)
    index_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    strided = draw(st.integers(0, 4)) == 0
    return {
        "values": values,
        "offsets": [_offsets_tensor(o, index_dtype, strided) for o in offsets],
        "max_lengths": max_lengths,
    }


@st.composite
def to_dense_inputs(
    draw: st.DrawFn,
    dims: Sequence[int] = (1, 2, 3),
    dtypes: Sequence[torch.dtype] = DTYPES,
    rank: str = "any",
) -> dict[str, Any]:
    """:func:`jagged_inputs` and, half the time, a ``padding_value``."""
    args = draw(jagged_inputs(dims, dtypes, rank))
    if draw(st.booleans()):
        args["padding_value"] = draw(st.sampled_from(PADDINGS))
    return args


@st.composite
def to_jagged_inputs(
    draw: st.DrawFn, with_total: bool | None = None, dtypes: Sequence[torch.dtype] = DTYPES
) -> dict[str, Any]:
    """``dense [B, L.., D]`` and offsets of a well-formed jagged tensor; ``total_L`` maybe."""
    args = draw(jagged_inputs((1, 2, 3), rank="2", decreasing=False, tail=False))
    offsets = args["offsets"]
    b = real(offsets[0]).numel() - 1
    d = draw(st.integers(0, 3))
    dtype = draw(st.sampled_from(list(dtypes)))
    # Upstream views [B, L_1..L_k, D] as [B, -1, D]: a transposed dense with k > 1 cannot be
    # viewed so and upstream raises; ours takes any layout (tests/fbgemm/jagged/).
    layouts = ["contiguous", "sliced"] + (["transposed"] if len(offsets) == 1 else [])
    layout = draw(st.sampled_from(layouts))
    shape = (b, *args["max_lengths"], d)
    fill = "small_ints" if dtype.is_floating_point else "signed"
    dense = with_layout(shape, dtype, fill, draw(st.integers(0, 2**31 - 1)), layout)
    out: dict[str, Any] = {"dense": dense, "x_offsets": offsets}
    give = draw(st.booleans()) if with_total is None else with_total
    if give:
        out["total_L"] = int(real(offsets[-1])[-1]) + draw(st.integers(0, 2))
    return out
