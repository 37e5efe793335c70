"""Spec of ``bucketize_sparse_features`` (cyclic: bucket ``u % my_size``, new index
``u // my_size`` of the unsigned index ``u``).

Oracle: upstream's CPU kernel.  Drawn inputs (``inputs.py``): 0..12 rows of lengths 0..40,
int32 / int64 (one dtype for lengths and indices, as upstream reads both as ``index_t``), indices
small, signed or extreme, my_size 1..8, float32 weights omitted or given, ``bucketize_pos``
both ways, non-contiguous (sliced) indices and weights; one example in ten has dtypes upstream
rejects.  Non-contiguous inputs are judged by upstream on contiguous copies (``block.py``'s
reference).  Tolerances: none, every output is exact.

Budgets: the op's ``BUDGETS`` entry; :func:`cyclic_budget` names the path of a call by its
options (weights, bucketize_pos, my_size not a power of two), ``my_size`` 1 and a copied input
go to the ceiling (``"every option"``).
"""

from __future__ import annotations

from typing import Any

import torch

from conformance.harness import BudgetUse, OpSpec
from conformance.specs.fbgemm.bucketize.block import (
    EXACT,
    fixed_upstream,
    keywords,
    needs_reference,
)
from conformance.specs.fbgemm.bucketize.examples import cyclic_examples
from conformance.specs.fbgemm.bucketize.inputs import copied, cyclic_inputs, real
from fbgemm_npu.native.fbgemm.bucketize._utils import pow2_shift
from fbgemm_npu.testing.bucketize_inputs import CYCLIC, NOT_POW2, path_name
from fbgemm_npu.testing.budgets import budget_of

F = torch.ops.fbgemm


def cyclic_budget(
    lengths: Any, indices: Any, bucketize_pos: bool, my_size: int, weights: Any = None
) -> BudgetUse:
    """The budget path of one call: the path its options name (a power-of-two ``my_size``
    costs what the measured 4 does, any other above 1 what 6 does; int64 lengths and indices as
    measured), else the ceiling (``my_size`` 1, int32, a copied input, options no path
    names)."""
    given = {
        "weights": weights is not None,
        "bucketize_pos": bucketize_pos,
        NOT_POW2: pow2_shift(my_size) is None,
    }
    path = path_name(name for name, on in given.items() if on)
    known = path is None or path in budget_of(CYCLIC).paths
    wide = real(lengths).dtype == torch.int64  # int32 counts need no widening: one less
    if known and my_size != 1 and wide and not copied(lengths, indices, weights):
        return BudgetUse(op=CYCLIC, path=path)
    return BudgetUse(op=CYCLIC, path=path_name((), every=True))


SPECS = [
    OpSpec(
        name="bucketize_sparse_features",
        op=keywords(F.bucketize_sparse_features),
        inputs=cyclic_inputs(),
        compare=EXACT,
        budget=cyclic_budget,
        reference=fixed_upstream(F.bucketize_sparse_features),
        use_reference=needs_reference,
        examples=cyclic_examples(),
    ),
]
