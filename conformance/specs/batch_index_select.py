"""Specs for ``fbgemm::batch_index_select_dim0`` and ``fbgemm::group_index_select_dim0``, forward
and backward, against upstream's CPU kernels (which register ``AutogradCPU``: its gradients are
the oracle for ours on npu).

``batch_index_select_dim0``: 0 to 5 tables of 1 to 6 rows and 1 to 5 columns (all tables of one
width half the time: the row-gather path; mixed widths: the element path), 1 to 6 indices per
table with repeats, int32 / int64 indices, inputs of float32 / float16 / bfloat16 / float64 /
int32 / int64 (upstream's CPU kernel gathers any dtype), contiguous or a strided view (every
other element: the 16-byte alignment upstream's CPU kernel demands still holds), with and without
``permute_output_dim_0_1``.  Edge cases: no tables; one table of one row; a table with no indices
(upstream refuses).  ``group_index_select_dim0``: 1 to 4 members of rank 1 to 3 (0 rows or a
0-wide trailing dim included), one row width or mixed, mixed dtypes and index dtypes, different
index counts per member, transposed members.

Tolerances: forward outputs are copies (exact); gradients sum repeated rows (``SUMS``).  Budgets:
the kernels' launch counts plus the data checks' fixed cost when validating.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, OpSpec, TensorView
from conformance.specs.index_select import EXACT, FLOATS, INDEX_DTYPES, SUMS
from conformance.strategies import values as fill_values
from fbgemm_npu.native._checks import validation_enabled

F = torch.ops.fbgemm
DTYPES = (*FLOATS, torch.float64, torch.int32, torch.int64)
CHECKS = 9  # data checks: 3 reductions + one _assert_async round (6)


def _seed(draw: st.DrawFn) -> int:
    return draw(st.integers(0, 2**31 - 1))


def _fill(dtype: torch.dtype) -> str:
    return "small_ints" if dtype.is_floating_point else "signed"


@st.composite
def batch_inputs(draw: st.DrawFn, dtypes: tuple = DTYPES) -> dict:
    n_t = draw(st.integers(0, 5))
    permute = draw(st.booleans())
    rows = [draw(st.integers(1, 6)) for _ in range(n_t)]
    if draw(st.booleans()):
        cols = [draw(st.integers(1, 5))] * n_t
    else:
        cols = [draw(st.integers(1, 5)) for _ in range(n_t)]
    n_common = draw(st.integers(1, 6))
    counts = [n_common if permute else draw(st.integers(1, 6)) for _ in range(n_t)]
    gen = torch.Generator().manual_seed(_seed(draw))
    indices = [torch.randint(0, r, (n,), generator=gen) for r, n in zip(rows, counts, strict=True)]
    dtype = draw(st.sampled_from(dtypes))
    size = sum(r * c for r, c in zip(rows, cols, strict=True))
    flat = fill_values((size,), dtype, _fill(dtype), _seed(draw))
    inputs: Any = flat
    if draw(st.booleans()):
        inputs = TensorView(torch.stack([flat, flat], 1).reshape(-1), lambda x: x[::2],
                            "every other")  # fmt: skip
    idx = torch.cat(indices) if indices else torch.zeros(0, dtype=torch.int64)
    return {
        "inputs": inputs,
        "indices": idx.to(draw(st.sampled_from(INDEX_DTYPES))),
        "input_num_indices": counts,
        "input_rows": rows,
        "input_columns": cols,
        "permute_output_dim_0_1": permute,
    }


def _batch_budget(**kw: Any) -> Budget:
    if not kw["input_num_indices"]:
        return Budget(0, 0)
    cols = kw["input_columns"]
    same = len(set(cols)) == 1
    kernel = (3 if kw.get("permute_output_dim_0_1") else 5) if same else 11
    # a strided 1-D inputs is copied once to form rows (runs of gcd(cols) elements)
    kernel += int(isinstance(kw["inputs"], TensorView) and math.gcd(*cols) > 1)
    return Budget(kernel + (CHECKS if validation_enabled() else 0), 0)


def _batch_examples() -> tuple[dict, ...]:
    two = {"inputs": torch.arange(18.0), "input_rows": [3, 4], "input_columns": [2, 3]}
    return (
        {**two, "indices": torch.tensor([2, 0, 1, 3, 3]), "input_num_indices": [2, 3]},
        {
            **two,
            "indices": torch.tensor([2, 0, 1, 3]),
            "input_num_indices": [2, 2],
            "permute_output_dim_0_1": True,
        },  # fmt: skip
        {
            "inputs": torch.tensor([5.0]),
            "indices": torch.tensor([0, 0]),
            "input_num_indices": [2],
            "input_rows": [1],
            "input_columns": [1],
        },  # fmt: skip
        {
            "inputs": torch.zeros(0),
            "indices": torch.zeros(0, dtype=torch.int64),
            "input_num_indices": [],
            "input_rows": [],
            "input_columns": [],
        },  # fmt: skip
        # upstream refuses a table without indices (and unequal counts when permuted)
        {**two, "indices": torch.tensor([1, 2, 3]), "input_num_indices": [0, 3]},
        {
            **two,
            "indices": torch.tensor([1, 2, 3]),
            "input_num_indices": [1, 2],
            "permute_output_dim_0_1": True,
        },  # fmt: skip
    )


# ---- group_index_select_dim0 ---------------------------------------------------------------


def _member(draw: st.DrawFn, dtype: torch.dtype, rows: int, trailing: tuple) -> Any:
    t = fill_values((rows, *trailing), dtype, _fill(dtype), _seed(draw))
    if t.dim() >= 2 and draw(st.integers(0, 3)) == 0:
        return TensorView(t.transpose(0, 1).contiguous(), lambda x: x.transpose(0, 1),
                          "transposed")  # fmt: skip
    return t


# trailing shapes of one rank: upstream's CPU backward fails on members of different ranks
# ("output with shape [2] doesn't match the broadcast shape [2, 2]"); its CUDA op refuses them
SAME_RANK = (((3,), (1,), (5,)), ((2, 2), (1, 5), (2, 3)))


@st.composite
def group_inputs(draw: st.DrawFn, dtypes: tuple = DTYPES, members: tuple = (1, 4),
                 names: bool = False) -> dict:  # fmt: skip
    """``{"input_group": [...], "indices_group": [...]}``; with ``names`` the members are
    ``x0, x1, ...`` and ``i0, i1, ...`` instead (a fixed count, so gradients can be asked for)
    and share one rank."""
    g = draw(st.integers(*members))
    same_width = draw(st.booleans())
    trailing0 = draw(st.sampled_from(((), (3,), (2, 2), (0,))))
    # one dtype per example for gradients: upstream's CPU backward computes every member's
    # gradient in the first member's dtype (a float64 member behind a float32 one is rounded)
    mixed = draw(st.booleans()) and not names
    dtype0 = draw(st.sampled_from(dtypes))
    shapes = draw(st.sampled_from(SAME_RANK)) if names else ((), (3,), (2, 2), (1, 5))
    xs, idxs = [], []
    gen = torch.Generator().manual_seed(_seed(draw))
    for _ in range(g):
        trailing = trailing0 if same_width and not names else draw(st.sampled_from(shapes))
        rows = draw(st.integers(0, 6))
        dtype = draw(st.sampled_from(dtypes)) if mixed else dtype0
        xs.append(_member(draw, dtype, rows, trailing))
        n = draw(st.integers(0, 5)) if rows else 0
        i_dtype = draw(st.sampled_from(INDEX_DTYPES))
        idxs.append(torch.randint(0, max(rows, 1), (n,), generator=gen).to(i_dtype))
    if names:
        return {
            **{f"x{i}": x for i, x in enumerate(xs)},
            **{f"i{i}": t for i, t in enumerate(idxs)},
        }
    return {"input_group": xs, "indices_group": idxs}


def _group_budget(**kw: Any) -> Budget:
    xs = kw["input_group"] if "input_group" in kw else [v for k, v in kw.items() if k[0] == "x"]
    n_idx = len(kw["indices_group"]) if "indices_group" in kw else len(xs)
    xs = xs[:n_idx]
    validating = validation_enabled()
    if len(xs) == 1:  # one index_select; the check: aminmax + one _assert_async round
        return Budget(1 + (7 if validating else 0), 0)
    dtypes = [x.base.dtype if isinstance(x, TensorView) else x.dtype for x in xs]
    groups = set(dtypes)
    # per dtype: 13 launches at most (mixed widths), +1 for a cast when the index dtypes differ;
    # +1 per member not viewable as rows (a transposed one); checks: 3 per dtype + one round
    copies = sum(isinstance(x, TensorView) for x in xs)
    launches = 14 * len(groups) + copies + ((3 * len(groups) + 6) if validating else 0)
    return Budget(launches, 0)


def _group_named(n: int) -> Any:
    def call(**kw: Any) -> Any:
        return F.group_index_select_dim0([kw[f"x{i}"] for i in range(n)],
                                         [kw[f"i{i}"] for i in range(n)])  # fmt: skip

    return call


def _group_examples() -> tuple[dict, ...]:
    a = torch.arange(12.0).view(4, 3)
    b = torch.arange(20.0).view(5, 2, 2)
    return (
        {"input_group": [a, b], "indices_group": [torch.tensor([3, 0, 0]), torch.tensor([1, 4])]},
        {"input_group": [a], "indices_group": [torch.tensor([1, 1])]},
        {"input_group": [a, a[:0]], "indices_group": [torch.tensor([2]),
                                                      torch.zeros(0, dtype=torch.int64)]},
        # upstream returns one output per index tensor (fewer index tensors than inputs)
        {"input_group": [a, b], "indices_group": [torch.tensor([0, 3])]},
    )  # fmt: skip


def _kw(fn: Any) -> Any:
    return lambda **kw: fn(**kw)


SPECS = [
    OpSpec("batch_index_select_dim0", _kw(F.batch_index_select_dim0), batch_inputs(), EXACT,
           _batch_budget, examples=_batch_examples()),
    OpSpec("batch_index_select_dim0[grad]", _kw(F.batch_index_select_dim0),
           batch_inputs(dtypes=(torch.float32, torch.float64, torch.float16)), SUMS,
           _batch_budget, backward=True, grad_inputs=("inputs",)),
    OpSpec("group_index_select_dim0", _kw(F.group_index_select_dim0), group_inputs(), EXACT,
           _group_budget, examples=_group_examples()),
    OpSpec("group_index_select_dim0[grad]", _group_named(3),
           group_inputs(dtypes=(torch.float32, torch.float64), members=(3, 3), names=True),
           SUMS, _group_budget, backward=True, grad_inputs=("x0", "x1", "x2")),
]  # fmt: skip
