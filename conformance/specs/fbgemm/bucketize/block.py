"""Specs of ``block_bucketize_sparse_features`` (+ ``_inference``, ``_2d_weights``).

Oracle: upstream's CPU kernels.  Drawn inputs (``inputs.py``): 1..4 features x batch 0..5 (0:
empty batch) or variable batch sizes per feature (VBE, 0 included), lengths 0..6 with some long
rows (up to 40), int32 / int64 lengths and indices, indices small (some inside ``block_size *
my_size``, some past it), signed (negative raw ids: upstream reads them unsigned) or extreme (the
dtype's min / max, -1, 0); block sizes 0..12 (0 included); my_size 1..8 (powers of two and not);
weights omitted or given (1-D: float32 / float64; 2-D: float32, float16, bfloat16, float64 with
1..4 columns); ``bucketize_pos``, ``sequence``, ``keep_orig_idx``, ``return_bucket_mapping`` both
ways; ``keep_orig_idx_per_feature``, ``total_num_blocks``, ``block_bucketize_pos`` (sorted
boundaries from 0, empty list too) given and omitted; non-contiguous lengths (a transposed 2-D
view), indices, block sizes, weights, keep flags and total_num_blocks.  One example in ten is
invalid in a way upstream also rejects (a dtype it does not dispatch, dtypes that disagree,
lengths that do not sum to ``indices.numel()``, total_num_blocks not multiples of my_size): ours
must raise too.  Edge cases: ``examples.py``.

Where upstream's CPU kernel is no oracle, ``reference`` (upstream itself, on fixed-up inputs)
judges: non-contiguous inputs (upstream CPU reads raw memory, ignoring strides: the reference
runs it on contiguous copies) and ``return_bucket_mapping`` without ``sequence`` (upstream CPU
returns an uninitialised tensor: the reference takes the mapping from a ``sequence=True`` run).
Inputs upstream mishandles without raising (negative lengths, VBE sizes that disagree with
``lengths``, ``my_size < 1``, no features, boundaries above the smallest index) make it read or
write out of bounds or divide by zero, so they cannot run here:
``tests/fbgemm/bucketize/test_bucketize_errors.py`` checks ours raises on them.  Tolerances: none,
every output is exact (weights are copied).

Budgets: the op's ``BUDGETS`` entry (``fbgemm_npu/native/fbgemm/bucketize/budgets.py``).
:func:`block_budget` names the path of a call by the options it uses; a call no path names
exactly (several options, ``my_size`` 1, int64 lengths, a copied input, int32 indices or
``keep_orig_idx`` with variable blocks) is held to its form's ceiling (``"... + every option"``).
``tests/fbgemm/bucketize/test_bucketize_budgets.py`` checks both: exact on a named path, within
the ceiling otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.bucketize.examples import block_examples
from conformance.specs.fbgemm.bucketize.inputs import block_inputs, copied, real
from fbgemm_npu.native.fbgemm.bucketize._utils import pow2_shift
from fbgemm_npu.testing.bucketize_inputs import FORMS, NOT_POW2, path_name
from fbgemm_npu.testing.budgets import budget_of

F = torch.ops.fbgemm
EXACT = Compare(
    {
        d: Tol(rtol=0.0, atol=0.0)
        for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    }
)
BLOCK_OPS = (
    "block_bucketize_sparse_features",
    "block_bucketize_sparse_features_inference",
    "block_bucketize_sparse_features_2d_weights",
)


def _options(kw: dict[str, Any], weights_implied: bool) -> set[str]:
    """The options of a block call, as the budget paths name them."""
    given = {
        "weights": kw.get("weights") is not None and not weights_implied,
        "batch_size_per_feature": kw.get("batch_size_per_feature") is not None,
        "sequence": bool(kw["sequence"]),
        "bucketize_pos": bool(kw["bucketize_pos"]),
        "keep_orig_idx_per_feature": kw.get("keep_orig_idx_per_feature") is not None,
        NOT_POW2: pow2_shift(kw["my_size"]) is None,
        "total_num_blocks": kw.get("total_num_blocks") is not None,
        "block_bucketize_pos": bool(kw.get("block_bucketize_pos")),
    }
    return {name for name, on in given.items() if on}


def _named_path_applies(kw: dict[str, Any], variable: bool) -> bool:
    """Whether a named path counts this call exactly.  The paths are measured with ``my_size``
    8 or 6 (a power of two costs what 8 does, any other above 1 what 6 does; 1 differs), int32
    lengths (int64 ones widen the counts: one launch), int64 indices (int32 adds a cast with
    variable blocks), no copied input and no ``keep_orig_idx`` (with variable blocks it spares
    the new index)."""
    if kw["my_size"] == 1 or real(kw["lengths"]).dtype == torch.int64:
        return False
    weights = kw.get("weights")
    width = kw.get("weights_dim")
    shape = (-1,) if width is None else (real(kw["indices"]).numel(), width)
    if copied(
        kw["lengths"],
        kw["indices"],
        kw["block_sizes"],
        kw.get("total_num_blocks"),
        kw.get("keep_orig_idx_per_feature"),
    ) or copied(weights, shape=shape):
        return False
    if variable:
        keep_all = kw.get("keep_orig_idx") and kw.get("keep_orig_idx_per_feature") is None
        return real(kw["indices"]).dtype == torch.int64 and not keep_all
    return True


def block_budget(op: str) -> Callable[..., BudgetUse]:
    """The budget path of one call of block op ``op``: the path its options name where one is
    measured for them, else the ceiling of its form."""
    qualname = f"fbgemm::{op}"

    def use(**kw: Any) -> BudgetUse:
        options = _options(kw, weights_implied=op.endswith("_2d_weights"))
        path = path_name(options)
        known = path is None or path in budget_of(qualname).paths
        if known and _named_path_applies(kw, "block_bucketize_pos" in options):
            return BudgetUse(op=qualname, path=path)
        return BudgetUse(op=qualname, path=path_name(options & set(FORMS), every=True))

    return use


def _contiguous(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.contiguous()
    if isinstance(v, list):
        return [_contiguous(t) for t in v]
    return v


def needs_reference(**kw: Any) -> bool:
    """Upstream CPU reads raw memory of non-contiguous inputs and leaves ``bucket_mapping``
    uninitialised without ``sequence``: those cases are judged by :func:`fixed_upstream`."""
    flat = [v for val in kw.values() for v in (val if isinstance(val, list) else [val])]
    strided = any(isinstance(v, torch.Tensor) and not v.is_contiguous() for v in flat)
    return strided or bool(kw.get("return_bucket_mapping") and not kw.get("sequence"))


def fixed_upstream(op: Callable[..., Any]) -> Callable[..., Any]:
    """Upstream on contiguous copies; the bucket mapping from a ``sequence=True`` run."""

    def reference(**kw: Any) -> Any:
        kw = {k: _contiguous(v) for k, v in kw.items()}
        if kw.get("return_bucket_mapping") and not kw.get("sequence"):
            out = list(op(**{**kw, "sequence": True}))
            out[4] = None  # no unbucketize_permute without sequence
            return tuple(out)
        return op(**kw)

    return reference


def keywords(op: Callable[..., Any]) -> Callable[..., Any]:
    """``op`` called with the drawn inputs as keyword arguments."""
    return lambda **kw: op(**kw)


def _block_spec(name: str) -> OpSpec:
    op = getattr(F, name)
    return OpSpec(
        name=name,
        op=keywords(op),
        inputs=block_inputs(name),
        compare=EXACT,
        budget=block_budget(name),
        reference=fixed_upstream(op),
        use_reference=needs_reference,
        examples=block_examples(name),
        notes="non-contiguous inputs and the mapping without sequence: upstream on fixed inputs",
    )


SPECS = [_block_spec(name) for name in BLOCK_OPS]
