"""Spec for ``fbgemm::group_index_select_dim0``, forward and backward, against upstream's CPU
kernel (which registers ``AutogradCPU``: its gradients are the oracle for ours on npu).

Inputs: 1 to 4 members of rank 1 to 3 (0 rows or a 0-wide trailing dim included), one row width
or mixed, one dtype and one index dtype per group (a mix is refused, as upstream's CUDA kernel
does: tests/fbgemm/index_select/test_index_select_errors.py), different index counts per member,
transposed members.
Edge cases: one member, an empty member, fewer index tensors than members (upstream returns one
output per index tensor).

Tolerances: forward outputs are copies (exact); gradients sum repeated rows (``SUMS``).  Budget:
the op's ``BUDGETS`` entry; the members select the path.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, OpSpec, TensorView
from conformance.specs.fbgemm.index_select.batch import DTYPES, fill
from conformance.specs.fbgemm.index_select.common import (
    EXACT,
    INDEX_DTYPES,
    SUMS,
    by_name,
    seed,
)
from conformance.strategies import values as fill_values

F = torch.ops.fbgemm
GIS = "fbgemm::group_index_select_dim0"


def _member(draw: st.DrawFn, dtype: torch.dtype, rows: int, trailing: tuple) -> Any:
    t = fill_values((rows, *trailing), dtype, fill(dtype), seed(draw))
    if t.dim() >= 2 and draw(st.integers(0, 3)) == 0:
        return TensorView(t.transpose(0, 1).contiguous(), lambda x: x.transpose(0, 1), "transposed")
    return t


# trailing shapes of one rank: upstream's CPU backward fails on members of different ranks
# ("output with shape [2] doesn't match the broadcast shape [2, 2]"); its CUDA op refuses them
SAME_RANK = (((3,), (1,), (5,)), ((2, 2), (1, 5), (2, 3)))


@st.composite
def group_inputs(
    draw: st.DrawFn, dtypes: tuple = DTYPES, members: tuple = (1, 4), names: bool = False
) -> dict:
    """``{"input_group": [...], "indices_group": [...]}``; with ``names`` the members are
    ``x0, x1, ...`` and ``i0, i1, ...`` instead (a fixed count, so gradients can be asked for)
    and share one rank."""
    g = draw(st.integers(*members))
    same_width = draw(st.booleans())
    trailing0 = draw(st.sampled_from(((), (3,), (2, 2), (0,))))
    # one dtype and one index dtype per group (ours refuses a mix, as upstream's CUDA kernel)
    dtype0 = draw(st.sampled_from(dtypes))
    i_dtype = draw(st.sampled_from(INDEX_DTYPES))
    shapes = draw(st.sampled_from(SAME_RANK)) if names else ((), (3,), (2, 2), (1, 5))
    xs, idxs = [], []
    gen = torch.Generator().manual_seed(seed(draw))
    for _ in range(g):
        trailing = trailing0 if same_width and not names else draw(st.sampled_from(shapes))
        rows = draw(st.integers(0, 6))
        xs.append(_member(draw, dtype0, rows, trailing))
        n = draw(st.integers(0, 5)) if rows else 0
        idxs.append(torch.randint(0, max(rows, 1), (n,), generator=gen).to(i_dtype))
    if names:
        return {
            **{f"x{i}": x for i, x in enumerate(xs)},
            **{f"i{i}": t for i, t in enumerate(idxs)},
        }
    return {"input_group": xs, "indices_group": idxs}


def _group_budget(**kw: Any) -> BudgetUse:
    """The members read (one per index tensor), of one dtype.  Every member viewable as rows:
    the width selects the path; a member copied (transposed): the ``transposed_members``
    ceiling."""
    xs = kw["input_group"] if "input_group" in kw else [v for k, v in kw.items() if k[0] == "x"]
    n_idx = len(kw["indices_group"]) if "indices_group" in kw else len(xs)
    xs = xs[:n_idx]
    if len(xs) == 1:
        return BudgetUse(op=GIS, path="one_member")
    if any(isinstance(x, TensorView) for x in xs):
        return BudgetUse(op=GIS, path="transposed_members")
    widths = {math.prod(x.shape[1:]) for x in xs}
    # zero-wide members take the element path, as mixed widths do
    one_width = len(widths) == 1 and widths != {0}
    return BudgetUse(op=GIS, path="one_width" if one_width else None)


def _group_named(n: int) -> Any:
    def call(**kw: Any) -> Any:
        return F.group_index_select_dim0(
            [kw[f"x{i}"] for i in range(n)], [kw[f"i{i}"] for i in range(n)]
        )

    return call


def _group_examples() -> tuple[dict, ...]:
    a = torch.arange(12.0).view(4, 3)
    b = torch.arange(20.0).view(5, 2, 2)
    return (
        {"input_group": [a, b], "indices_group": [torch.tensor([3, 0, 0]), torch.tensor([1, 4])]},
        {"input_group": [a], "indices_group": [torch.tensor([1, 1])]},
        {
            "input_group": [a, a[:0]],
            "indices_group": [torch.tensor([2]), torch.zeros(0, dtype=torch.int64)],
        },
        # upstream returns one output per index tensor (fewer index tensors than inputs)
        {"input_group": [a, b], "indices_group": [torch.tensor([0, 3])]},
    )


SPECS = [
    OpSpec(
        "group_index_select_dim0",
        by_name(F.group_index_select_dim0),
        group_inputs(),
        EXACT,
        _group_budget,
        examples=_group_examples(),
    ),
    OpSpec(
        "group_index_select_dim0[grad]",
        _group_named(3),
        group_inputs(dtypes=(torch.float32, torch.float64), members=(3, 3), names=True),
        SUMS,
        _group_budget,
        backward=True,
        grad_inputs=("x0", "x1", "x2"),
    ),
]
