"""The tensor program of the three block ops: ``fbgemm::block_bucketize_sparse_features`` and
its ``_inference`` and ``_2d_weights`` forms (the math and dtypes are in :mod:`.bucketize`;
launches and syncs: ``BUDGETS`` in ``budgets.py``, docs/ops.md).

Row and feature of each element (segment ids, :mod:`._order`), per-feature parameters gathered
per element, the bucket and new index (elementwise, :mod:`._utils`; the boundary search of
variable blocks, :mod:`._search`), a stable sort of float bucket keys (the output order), an
int32 ``index_add`` for the counts, gathers for the outputs.  No host sync, no AI-CPU route below
``2**31`` indices (docs/hardware.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native._triton import use_triton
from fbgemm_npu.native.fbgemm.bucketize import _order
from fbgemm_npu.native.fbgemm.bucketize import _search as us
from fbgemm_npu.native.fbgemm.bucketize import _utils as ub
from fbgemm_npu.native.fbgemm.bucketize._checks import (
    check_block,
    counts_allocation,
    validate_block,
)

__all__ = ["TRITON_MAX_BUCKETS", "block_bucketize"]

Opt = torch.Tensor | None
# my_size the fused Triton kernels serve: their one-hot tile is BLOCK_L x next_pow2(my_size)
TRITON_MAX_BUCKETS = 1024


def block_bucketize(
    op: str,
    weight_dtypes: Sequence[torch.dtype],
    lengths: torch.Tensor,
    indices: torch.Tensor,
    bucketize_pos: bool,
    sequence: bool,
    block_sizes: torch.Tensor,
    my_size: int,
    weights: Opt,
    weights_dim: int | None,
    batch_size_per_feature: Opt,
    block_bucketize_pos: list[torch.Tensor] | None,
    return_bucket_mapping: bool,
    keep_orig_idx: bool,
    total_num_blocks: Opt,
    keep_orig_idx_per_feature: Opt,
) -> tuple[torch.Tensor | None, ...]:
    """The three block ops: metadata checks, one data check, then the tensor program.

    Returns ``(new_lengths, new_indices, new_weights, new_pos, unbucketize_permute,
    bucket_mapping)``; ``weight_dtypes``: the op's weight dtypes (upstream's dispatch).
    """
    pos = list(block_bucketize_pos or [])
    n, n_idx, n_feat = check_block(
        op,
        lengths,
        indices,
        block_sizes,
        my_size,
        weights,
        weights_dim,
        weight_dtypes,
        batch_size_per_feature,
        pos,
        total_num_blocks,
        keep_orig_idx_per_feature,
    )
    p_size, dtype = int(my_size), indices.dtype
    lengths_, x, blocks = lengths.reshape(-1), indices.reshape(-1), block_sizes.reshape(-1)
    if n == 0 and n_idx:  # no row to hold an index: known from the shapes
        raise ValueError(
            f"{op}: argument 'lengths' must be non-negative and sum to indices.numel() = "
            f"{n_idx}, got no rows"
        )

    total = None if total_num_blocks is None else total_num_blocks.reshape(-1)
    batch = None if batch_size_per_feature is None else batch_size_per_feature.reshape(-1)
    keep_orig_idx_per_feature = (
        None if keep_orig_idx_per_feature is None else keep_orig_idx_per_feature.reshape(-1)
    )
    # sizes below 2**31: 3 launches (variable blocks 5), the checks in the kernels (_triton_block)
    sizes = max(n * p_size, n_idx, sum(t.numel() for t in pos))
    fits = n > 0 and p_size <= TRITON_MAX_BUCKETS and sizes < 2**31
    if use_triton(op, x.device, supported=fits):
        from fbgemm_npu.native.fbgemm.bucketize._triton_block import block_bucketize_triton

        return block_bucketize_triton(
            op,
            lengths_,
            x,
            blocks,
            p_size,
            weights,
            weights_dim,
            batch,
            total,
            pos,
            keep_orig_idx_per_feature,
            keep_orig_idx and keep_orig_idx_per_feature is None,
            (sequence, bucketize_pos, return_bucket_mapping),
            (indices.shape, None if weights is None else weights.shape),
            counts_allocation(op, n, p_size),
        )
    local_blocks = None
    if total is not None and not pos:
        local_blocks = torch.floor_divide(total, p_size)
    bounds = us.prepare_boundaries(pos, dtype, n_idx) if pos else None
    table = None if bounds is None else bounds.table
    clamped = validate_block(op, lengths_, n_idx, blocks, p_size, batch, total, local_blocks, table)
    with counts_allocation(op, n, p_size):
        zeros = _order.zero_counts(n * p_size, n_idx, x.device)

    incl, row = _order.element_rows(lengths_, n_idx)
    feature = _order.element_features(row, n, n_feat, batch)
    keep_all = keep_orig_idx and keep_orig_idx_per_feature is None
    if bounds is not None:
        # x < 0 for the unsigned divisions by a per-feature divisor
        neg = None if total is None else torch.lt(x, 0)
        cols = [blocks, bounds.last, bounds.count]
        if total is not None:
            g = total.clamp(min=1)
            cols += [g, *ub.pow2_divmod(g)]
        cols = ub.gather_columns(cols, feature)
        bucket, new = us.variable_buckets(x, neg, bounds, feature, cols, p_size, keep_all)
    elif total is not None:
        assert local_blocks is not None
        lb1 = local_blocks.clamp(min=1)  # a divisor even where the data check fails
        top = torch.iinfo(dtype).max // p_size
        cols = [torch.mul(blocks, lb1).clamp_(0, top), lb1]
        bucket, new = ub.uniform_buckets_total(x, ub.gather_columns(cols, feature), p_size)
    else:
        block = (blocks if clamped is None else clamped).index_select(0, feature)
        bucket, new = ub.uniform_buckets(x, block, p_size)
    if keep_all:
        new = x
    elif keep_orig_idx_per_feature is not None:
        keep = keep_orig_idx_per_feature.reshape(-1).index_select(0, feature)
        new = torch.where(keep, x, new)
    assert new is not None
    counts = _order.bucket_counts(zeros, bucket, row, n, lengths_.dtype)
    order = _order.stable_bucket_order(bucket, p_size)

    new_weights = None
    if weights is not None:
        if weights_dim is None:
            new_weights = weights.reshape(-1).index_select(0, order).view(weights.shape)
        else:
            new_weights = weights.reshape(n_idx, int(weights_dim)).index_select(0, order)
    new_pos = unbucketize = mapping = None
    if sequence or bucketize_pos:
        arange = arange_cached(n_idx, x.device, dtype)
        if bucketize_pos:
            new_pos = _order.row_positions(lengths_, incl, row, order, arange)
            new_pos = new_pos.view(indices.shape)
        if sequence:
            unbucketize = _order.inverse_permutation(order, arange)
    if return_bucket_mapping:
        mapping = bucket if bucket.dtype == dtype else bucket.to(dtype)
    new_indices = new.index_select(0, order).view(indices.shape)
    return counts, new_indices, new_weights, new_pos, unbucketize, mapping
