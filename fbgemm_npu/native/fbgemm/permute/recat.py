"""``fbgemm::recat_embedding_grad_output`` (and ``_mixed_D``, ``_mixed_D_batch``) on npu: the
gradient of a model-parallel embedding output, regrouped rank by rank.

``grad_output`` is ``(B_local, sum_r D_r)`` (``_mixed_D``, ``_mixed_D_batch``) or ``(B_local,
T_global, D)`` (``recat_embedding_grad_output``, ``D_r = n_r D`` for ``n_r`` features of rank
``r``); the output is flat, each rank's columns as one contiguous ``(B_local, D_r)`` block::

    out[B a_r + b D_r + d] = grad_output[b, a_r + d]        0 <= b < B_local, 0 <= d < D_r

with ``a_r = D_0 + ... + D_{r-1}`` (upstream's ``cudaMemcpy2DAsync`` per rank, its CPU loop, and
its ``recat_copy_async_kernel``, read in ``layout_transform_ops*.{cpp,cu}``).  With host sizes
(``_mixed_D``, the 3-D op) that is one ``split_with_sizes_copy`` along dim 1 into views of the
flat output, whatever the input's strides (upstream requires a contiguous input; ours reads any).
``_mixed_D_batch`` takes ``D_r`` and ``a_r`` as int64 device tensors: each input column ``c``
(of rank ``r(c)``, the segment ids of ``a``) goes to ``B a_r + b D_r + c - a_r``, one scatter.

Dtypes: float32 and float16, as upstream's CPU kernel (measured) and its CUDA kernels take.
Refused by name where upstream reads or writes out of bounds or leaves the output uninitialised:
negative sizes, sizes that do not sum to the input's width (or feature count), and for
``_mixed_D_batch`` ``cumsum_dim_sum_per_rank`` other than the exclusive scan of
``dim_sum_per_rank`` (a queued data check; the scatter's positions are clamped until it is read).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import (
    check_dtype,
    check_ndim,
    check_on_device,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids

__all__ = [
    "KERNELS",
    "recat_embedding_grad_output_fake",
    "recat_embedding_grad_output_mixed_D_batch_npu",
    "recat_embedding_grad_output_mixed_D_npu",
    "recat_embedding_grad_output_npu",
]

RECAT = "fbgemm::recat_embedding_grad_output"
RECAT_MIXED_D = "fbgemm::recat_embedding_grad_output_mixed_D"
RECAT_MIXED_D_BATCH = "fbgemm::recat_embedding_grad_output_mixed_D_batch"
# upstream's CPU and CUDA dispatch (fbgemm-gpu-cpu 1.8.0 refuses float64 and bfloat16, measured)
CPU_DTYPES = CUDA_DTYPES = (torch.float32, torch.float16)


def _check_sizes(op: str, name: str, sizes: Sequence[int], total: int, what: str) -> None:
    """Host sizes: non-negative, summing to ``total`` (upstream copies past its buffers else)."""
    negative = [s for s in sizes if s < 0]
    if negative:
        raise ValueError(f"{op}: argument '{name}' must be non-negative, got {list(sizes)}")
    if sum(sizes) != total:
        raise RuntimeError(
            f"{op}: argument '{name}' must sum to {what} ({total}), got {list(sizes)} (sum "
            f"{sum(sizes)})"
        )


def _split_copy(grad: torch.Tensor, sizes: Sequence[int], row: Sequence[int]) -> torch.Tensor:
    """``cat([grad.narrow(1, a_r, s_r).reshape(-1) for r])`` in one launch: a
    ``split_with_sizes_copy`` of dim 1 into contiguous views of the flat output (``row``: the
    shape of a block's trailing dims after dim 1)."""
    out = grad.new_empty((grad.numel(),))
    if grad.numel() == 0:
        return out
    b, width = grad.size(0), 1
    for s in row:
        width *= s
    views, pos = [], 0
    for s in sizes:
        views.append(out.narrow(0, pos, b * s * width).view(b, s, *row))
        pos += b * s * width
    torch.ops.aten.split_with_sizes_copy.out(grad, list(sizes), 1, out=views)
    return out


def recat_embedding_grad_output_mixed_D_npu(
    grad_output: torch.Tensor, dim_sum_per_rank: list[int]
) -> torch.Tensor:
    """``out = cat([grad_output[:, a_r : a_r + D_r].reshape(-1) for r])`` (module docstring):
    ``grad_output`` 2-D ``(B_local, sum(D_r))`` of float32 / float16, output 1-D of its
    numel.  Zero-width ranks give empty blocks; an empty batch gives an empty output whatever the
    sizes (upstream checks ``B * sum(D) == numel`` only).  Launches: one
    ``split_with_sizes_copy`` (none for an empty input).  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    op = RECAT_MIXED_D
    grad = check_dtype(op, "grad_output", check_tensor(op, "grad_output", grad_output), CPU_DTYPES)
    check_ndim(op, "grad_output", grad, (2,))
    if grad.size(0) == 0:  # upstream checks B * sum(D) == numel: nothing to hold for B = 0
        return grad.new_empty((0,))
    _check_sizes(op, "dim_sum_per_rank", dim_sum_per_rank, grad.size(1), "grad_output.size(1)")
    return _split_copy(grad, dim_sum_per_rank, ())


def recat_embedding_grad_output_npu(
    grad_output: torch.Tensor, num_features_per_rank: list[int]
) -> torch.Tensor:
    """``out = cat([grad_output[:, f_r : f_r + n_r, :].reshape(-1) for r])``: ``grad_output``
    3-D ``(B_local, T_global, D)`` of float32 / float16 (upstream: CUDA only), ``n_r`` features
    per rank summing to ``T_global``; output 1-D of its numel.  Launches: one
    ``split_with_sizes_copy`` (none for an empty input).  Launches and syncs: ``BUDGETS``.
    """
    op = RECAT
    grad = check_dtype(op, "grad_output", check_tensor(op, "grad_output", grad_output), CUDA_DTYPES)
    check_ndim(op, "grad_output", grad, (3,))
    sizes = num_features_per_rank
    _check_sizes(op, "num_features_per_rank", sizes, grad.size(1), "grad_output.size(1)")
    return _split_copy(grad, sizes, (grad.size(2),))


def recat_embedding_grad_output_mixed_D_batch_npu(
    grad_output: torch.Tensor, dim_sum_per_rank: torch.Tensor, cumsum_dim_sum_per_rank: torch.Tensor
) -> torch.Tensor:
    """:func:`recat_embedding_grad_output_mixed_D_npu` with the widths ``D`` and their exclusive
    scan ``a`` as 1-D int64 device tensors (upstream: CUDA only); ``grad_output`` 2-D float32 /
    float16.

    Math: column ``c`` belongs to rank ``r(c) = #{t >= 1 : a_t <= c}`` (int32 segment ids of
    ``a``), and ``grad_output[b, c]`` goes to ``(B - 1) a_r + c + b D_r``: a gather of the ranks'
    ``(a, D)`` rows, an ``add``, a ``mul`` and an ``add`` give the ``(B, S)`` positions, one
    ``index_put_`` writes them.  Checks (queued): ``D >= 0``, ``a_0 = 0``, ``a_{t+1} = a_t + D_t``
    and ``a_{T-1} + D_{T-1} = S``; the positions are clamped into the output until they are read.
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = RECAT_MIXED_D_BATCH
    grad = check_dtype(op, "grad_output", check_tensor(op, "grad_output", grad_output), CUDA_DTYPES)
    check_ndim(op, "grad_output", grad, (2,))
    names = ("dim_sum_per_rank", "cumsum_dim_sum_per_rank")
    dims, starts = (dim_sum_per_rank, cumsum_dim_sum_per_rank)
    for name, t in zip(names, (dims, starts), strict=True):
        check_dtype(op, name, check_tensor(op, name, t), (torch.int64,))
        check_ndim(op, name, t, (1,))
    check_same_device(op, grad_output=grad, dim_sum_per_rank=dims, cumsum_dim_sum_per_rank=starts)
    n_ranks = dims.numel()
    if starts.numel() != n_ranks:
        raise ValueError(
            f"{op}: argument 'cumsum_dim_sum_per_rank' must have len(dim_sum_per_rank) = "
            f"{n_ranks} entries, got {starts.numel()}"
        )
    b, width = grad.shape
    out = grad.new_empty((grad.numel(),))
    if grad.numel() == 0:  # nothing read nor written (upstream launches no thread), unchecked
        return out
    if n_ranks == 0:
        raise RuntimeError(
            f"{op}: argument 'dim_sum_per_rank' must sum to grad_output.size(1) ({width}), got "
            "no ranks"
        )
    validate = validation_enabled()
    if validate:
        # one bool per condition, reduced by one all(): a_{t+1} = a_t + D_t, D_t >= 0, a_0 = 0,
        # a_{T-1} + D_{T-1} = S
        ends = torch.add(starts, dims)
        ok = torch.empty(2 * n_ranks + 1, dtype=torch.bool, device=grad.device)
        torch.eq(starts[1:], ends[:-1], out=ok[: n_ranks - 1])
        torch.ge(dims, 0, out=ok[n_ranks - 1 : 2 * n_ranks - 1])
        torch.eq(starts[:1], 0, out=ok[2 * n_ranks - 1 : 2 * n_ranks])
        torch.eq(ends[-1:], width, out=ok[2 * n_ranks :])
        check_on_device(
            op,
            ok.all(),
            "argument 'dim_sum_per_rank' must be non-negative and sum to grad_output.size(1) "
            f"({width}), and 'cumsum_dim_sum_per_rank' must be its exclusive cumsum",
        )
    rank = segment_ids(starts, width)  # int32; the clamp inside keeps any data in range
    table = torch.stack((starts, dims), 1).index_select(0, rank)  # rank <= T - 1 always
    dest = torch.add(arange_cached(width, grad.device), table[:, 0], alpha=b - 1)
    rows = arange_cached(b, grad.device).view(b, 1)
    # (B, S); mul + add, both on the AI Core for int64 (docs/hardware.md), not addcmul
    dest = torch.mul(rows, table[:, 1]).add_(dest)
    if validate:
        dest.clamp_(0, out.numel() - 1)  # in the output until the queued check is read
    return out.index_put_((dest,), grad)


def recat_embedding_grad_output_fake(grad_output: torch.Tensor, *_: object) -> torch.Tensor:
    """Fake / Meta kernel of the three ops (upstream has none): a flat tensor of the input's
    numel and dtype."""
    return grad_output.new_empty((grad_output.numel(),))


KERNELS = {
    RECAT: {
        "PrivateUse1": recat_embedding_grad_output_npu,
        "Meta": recat_embedding_grad_output_fake,
    },
    RECAT_MIXED_D: {
        "PrivateUse1": recat_embedding_grad_output_mixed_D_npu,
        "Meta": recat_embedding_grad_output_fake,
    },
    RECAT_MIXED_D_BATCH: {
        "PrivateUse1": recat_embedding_grad_output_mixed_D_batch_npu,
        "Meta": recat_embedding_grad_output_fake,
    },
}
