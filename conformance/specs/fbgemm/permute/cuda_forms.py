"""Permute family, the inputs upstream's CPU kernels cannot judge: a loop reference is the oracle.

Each spec's op runs the reference (``references.py``: plain Python loops over the segments;
float64 gradients through indexing) on CPU tensors and ours on npu tensors, so the
harness compares ours with the reference for values, shapes and dtypes alike:

* ``[cuda_forms]``: what upstream's CUDA kernels accept and its CPU kernels refuse or misread:
  2-D weights ``(N, C)`` (the CPU kernels read them flat, upstream's own tests call that a
  different convention), bfloat16 / int weights, float16 weights in the 1-D op, int64
  ``permute``, and for the 2-D ops a non-contiguous ``permute`` (upstream's CPU kernel reads the
  lengths through its raw data pointer: wrong lengths, or a failed huge allocation);
* ``invert_permute[transposed]``: upstream inverts a transposed 2-D permutation in memory order
  (``empty_like`` keeps the strides), so its logical result is not the inverse;
* ``expand_into_jagged_permute[non_contiguous]``: upstream's CPU kernel reads the offsets through
  their raw pointers and corrupts the heap (abort) on non-contiguous offsets;
* ``permute_2D_sparse_data[grad_repeats]``: gradients with repeated and dropped features, where
  upstream's backward (``invert_permute`` + a permute) reads out of bounds; ours is the adjoint of
  the gather (the repeats' gradients summed).

Tolerances: outputs are copies (exact); gradients with repeats are sums, see ``GRAD_SUMS``.
Budgets: the op's ``BUDGETS`` entry, the path named as in ``sparse.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from conformance.harness import Compare, OpSpec, Tol
from conformance.specs.fbgemm.permute.inputs import (
    CPU_WEIGHTS,
    CUDA_ONLY_WEIGHTS,
    EXACT,
    expand_budget,
    expand_inputs,
    invert_budget,
    invert_inputs,
    sparse_budget,
    sparse_inputs,
)
from conformance.specs.fbgemm.permute.references import (
    expand_reference,
    invert_reference,
    permute_1d_reference,
    permute_reference,
)

F = torch.ops.fbgemm

# Gradients with repeats are sums; the reference adds float64 gradients, ours in the output's
# dtype, and the harness casts the random grad_output to that dtype for ours only: one rounding
# per term (2**-24 float32, 2**-8 bfloat16) over at most 7 repeats.
GRAD_SUMS = Compare(
    {
        torch.float16: Tol(rtol=2e-2, atol=2e-2),
        torch.bfloat16: Tol(2e-2, 2e-2),
        torch.float32: Tol(rtol=1e-6, atol=1e-6),
        torch.float64: Tol(0.0, 0.0),
    }
)


def _reference_op(name: str, reference: Callable[..., Any]) -> Callable[..., Any]:
    """Ours on npu tensors; the reference on CPU tensors (upstream cannot judge these inputs)."""
    op = getattr(F, name)

    def call(**kw: Any) -> Any:
        on_cpu = kw["permute"].device.type == "cpu"
        return reference(**kw) if on_cpu else op(**kw)

    return call


def _psf_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> Any:
    return permute_reference(permute, lengths, indices, weights)


def _input1d_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    stride: int,
    weights: Any = None,
    permuted_lengths_sum: Any = None,
) -> Any:
    out = permute_reference(permute, lengths.view(-1, stride), values, weights)
    return out[0].view(-1), out[1], out[2]


SPECS = [
    OpSpec(
        "permute_2D_sparse_data[cuda_forms]",
        _reference_op("permute_2D_sparse_data", permute_reference),
        sparse_inputs(
            weight_dtypes=CUDA_ONLY_WEIGHTS + CPU_WEIGHTS["2d"],
            weights_2d=True,
            perm_layouts=("contiguous", "sliced"),
            perm_dtypes=(torch.int32, torch.int64),
            invalid=False,
        ),
        EXACT,
        sparse_budget("fbgemm::permute_2D_sparse_data"),
        reference=permute_reference,
    ),
    OpSpec(
        "permute_1D_sparse_data[cuda_forms]",
        _reference_op("permute_1D_sparse_data", permute_1d_reference),
        sparse_inputs(
            form="1d",
            weight_dtypes=CUDA_ONLY_WEIGHTS + (torch.float16,),
            weights_2d=True,
            perm_dtypes=(torch.int32, torch.int64),
            invalid=False,
        ),
        EXACT,
        sparse_budget("fbgemm::permute_1D_sparse_data"),
        reference=permute_1d_reference,
    ),
    OpSpec(
        "permute_2D_sparse_data_input1D[cuda_forms]",
        _reference_op("permute_2D_sparse_data_input1D", _input1d_reference),
        sparse_inputs(
            form="input1d",
            weight_dtypes=CUDA_ONLY_WEIGHTS,
            weights_2d=True,
            perm_layouts=("contiguous", "sliced"),
            invalid=False,
        ),
        EXACT,
        sparse_budget("fbgemm::permute_2D_sparse_data_input1D"),
        reference=_input1d_reference,
    ),
    OpSpec(
        "permute_sparse_features[cuda_forms]",
        _reference_op("permute_sparse_features", _psf_reference),
        sparse_inputs(
            form="psf",
            weight_dtypes=CUDA_ONLY_WEIGHTS,
            perm_layouts=("contiguous", "sliced"),
            invalid=False,
        ),
        EXACT,
        sparse_budget("fbgemm::permute_sparse_features"),
        reference=_psf_reference,
    ),
    OpSpec(
        "invert_permute[transposed]",
        _reference_op("invert_permute", invert_reference),
        invert_inputs(transposed=True),
        EXACT,
        invert_budget("fbgemm::invert_permute"),
        reference=invert_reference,
    ),
    OpSpec(
        "expand_into_jagged_permute[non_contiguous]",
        _reference_op("expand_into_jagged_permute", expand_reference),
        expand_inputs(contiguous=False),
        EXACT,
        expand_budget(),
        reference=expand_reference,
    ),
    OpSpec(
        "permute_2D_sparse_data[grad_repeats]",
        _reference_op("permute_2D_sparse_data", permute_reference),
        sparse_inputs(
            kinds=("repeats",),
            weight_dtypes=(torch.float32,),
            weights_2d=True,
            value_dtypes=(torch.float32, torch.bfloat16),
            with_weights=(True,),
            invalid=False,
        ),
        GRAD_SUMS,
        sparse_budget("fbgemm::permute_2D_sparse_data"),
        reference=permute_reference,
        backward=True,
        grad_inputs=("values", "weights"),
    ),
]
