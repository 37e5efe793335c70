"""Specs for the permute family judged by upstream's CPU kernels: ``permute_{1D,2D}_sparse_data``,
``permute_sparse_data``, ``permute_2D_sparse_preallocated_out``, ``permute_sparse_features``,
``permute_2D_sparse_data_input1D``, ``invert_permute``, ``expand_into_jagged_permute``.

Drawn inputs: ``inputs.py``.  Explicit examples add the torchrec shape (26 features x 64) and the
edge cases.  Inputs upstream's CPU kernels cannot judge (its CUDA-only forms, its CPU bugs,
gradients with repeats) are judged by the loop references (``references.py``) in
``cuda_forms.py``.  Data errors upstream does not detect (out-of-range permute, negative
lengths, sizes that disagree) make upstream read out of bounds, so they cannot be run here:
``tests/fbgemm/permute/test_permute_errors.py`` covers them.  Tolerances: none; every output is
a copy (``Tol(0, 0)``), gradients of a permutation too.  Budgets: the op's ``BUDGETS`` entry,
the path named by :func:`.inputs.sparse_budget` / :func:`.inputs.invert_budget`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.harness import OpSpec
from conformance.specs.fbgemm.permute.inputs import (
    CPU_WEIGHTS,
    EXACT,
    expand_budget,
    expand_inputs,
    invert_budget,
    invert_inputs,
    prealloc_inputs,
    sparse_budget,
    sparse_inputs,
    view_as,
)

F = torch.ops.fbgemm


def by_name(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda **kw: fn(**kw)


def _budget(op: str) -> Callable[..., Any]:
    return sparse_budget(f"fbgemm::{op}")


def _examples_2d() -> tuple[dict[str, Any], ...]:
    gen = torch.Generator().manual_seed(7)
    big = torch.randint(0, 40, (26, 64), generator=gen, dtype=torch.int32)  # torchrec-shaped
    n = int(big.sum())
    perm = torch.randperm(26, generator=gen).to(torch.int32)
    small = torch.tensor([[1, 2], [0, 3], [2, 0]])
    i32 = torch.int32
    return (
        {
            "permute": perm,
            "lengths": big,
            "values": torch.arange(n),
            "weights": torch.rand(n),
            "permuted_lengths_sum": n,
        },
        {"permute": perm, "lengths": big, "values": torch.arange(n, dtype=i32)},
        {
            "permute": torch.tensor([2, 0, 1], dtype=i32),
            "lengths": small.new_zeros(3, 0),
            "values": torch.arange(0),
            "weights": torch.rand(0),
        },  # empty batch, B = 0
        {
            "permute": torch.zeros(0, dtype=i32),
            "lengths": small,
            "values": torch.arange(8),
            "weights": torch.rand(8),
            "permuted_lengths_sum": 0,
        },  # no output feature
        {
            "permute": torch.tensor([0, 0, 2, 2, 2], dtype=i32),
            "lengths": small,
            "values": torch.arange(8.0),
            "weights": torch.rand(8, dtype=torch.float64),
        },  # repeats
        {
            "permute": torch.tensor([1], dtype=i32),
            "lengths": small,
            "values": torch.arange(12).to(torch.bfloat16),
        },  # drops, values tail
        {
            "permute": torch.tensor([1, 0, 2], dtype=i32),
            "lengths": small.new_zeros(3, 4),
            "values": torch.arange(5),
        },  # every row empty
        {
            "permute": torch.tensor([2, 0, 1], dtype=i32),
            "lengths": view_as(small, "transposed"),
            "values": view_as(torch.arange(8), "sliced"),
            "weights": view_as(torch.rand(8), "sliced"),
        },
        {
            "permute": torch.tensor([0, 1], dtype=i32),
            "lengths": torch.ones(2, dtype=torch.int64),
            "values": torch.arange(2),
        },  # 1-D lengths: upstream raises
    )


def _examples_1d() -> tuple[dict[str, Any], ...]:
    i32 = torch.int32
    lengths = torch.tensor([3, 0, 2, 1])
    return (
        {
            "permute": torch.tensor([3, 0, 0, 2], dtype=i32),
            "lengths": lengths,
            "values": torch.arange(6.0),
            "weights": torch.rand(6),
            "permuted_lengths_sum": 9,
        },
        {"permute": torch.zeros(0, dtype=i32), "lengths": lengths, "values": torch.arange(6)},
        {
            "permute": torch.tensor([1, 0], dtype=i32),
            "lengths": lengths.view(2, 2),
            "values": torch.arange(6),
        },  # 2-D lengths: read flat, as upstream does
        {
            "permute": view_as(torch.tensor([2, 1, 3], dtype=i32), "sliced"),
            "lengths": view_as(lengths, "sliced"),
            "values": torch.arange(9, dtype=i32),
        },
    )


_NOTE = (
    "upstream's CPU kernels as oracle; data errors upstream misses: "
    "tests/fbgemm/permute/test_permute_errors.py"
)
SPECS = [
    OpSpec(
        "permute_2D_sparse_data",
        by_name(F.permute_2D_sparse_data),
        sparse_inputs(),
        EXACT,
        _budget("permute_2D_sparse_data"),
        examples=_examples_2d(),
        notes=_NOTE,
    ),
    OpSpec(
        "permute_2D_sparse_preallocated_out",
        by_name(F.permute_2D_sparse_preallocated_out),
        prealloc_inputs(),
        EXACT,
        _budget("permute_2D_sparse_preallocated_out"),
        notes=_NOTE,
    ),
    OpSpec(
        "permute_sparse_data",
        by_name(F.permute_sparse_data),
        sparse_inputs(),
        EXACT,
        _budget("permute_sparse_data"),
        notes=_NOTE,
    ),
    OpSpec(
        "permute_1D_sparse_data",
        by_name(F.permute_1D_sparse_data),
        sparse_inputs(
            form="1d", weight_dtypes=CPU_WEIGHTS["1d"], perm_layouts=("contiguous", "sliced")
        ),
        EXACT,
        _budget("permute_1D_sparse_data"),
        examples=_examples_1d(),
        notes=_NOTE,
    ),
    OpSpec(
        "permute_2D_sparse_data_input1D",
        by_name(F.permute_2D_sparse_data_input1D),
        sparse_inputs(form="input1d"),
        EXACT,
        _budget("permute_2D_sparse_data_input1D"),
        notes=_NOTE,
    ),
    OpSpec(
        "permute_sparse_features",
        by_name(F.permute_sparse_features),
        sparse_inputs(form="psf"),
        EXACT,
        _budget("permute_sparse_features"),
        notes=_NOTE,
    ),
    OpSpec(
        "invert_permute",
        by_name(F.invert_permute),
        invert_inputs(),
        EXACT,
        invert_budget(),
        examples=(
            {"permute": torch.zeros(0, dtype=torch.int64)},
            {"permute": torch.tensor([[2, 0], [3, 1]], dtype=torch.int32)},
        ),
    ),
    OpSpec(
        "expand_into_jagged_permute",
        by_name(F.expand_into_jagged_permute),
        expand_inputs(),
        EXACT,
        expand_budget(),
    ),
    # Gradients: a bijective permute, values exactly as long as the lengths' sum (upstream's
    # backward needs both).
    OpSpec(
        "permute_2D_sparse_data[grad]",
        by_name(F.permute_2D_sparse_data),
        sparse_inputs(
            kinds=("permutation",),
            weight_dtypes=(torch.float32, torch.float64),
            tails=(0,),
            value_dtypes=(torch.float32, torch.float16),
            with_weights=(True,),
            invalid=False,
        ),
        EXACT,
        _budget("permute_2D_sparse_data"),
        backward=True,
        grad_inputs=("values", "weights"),
    ),
]
