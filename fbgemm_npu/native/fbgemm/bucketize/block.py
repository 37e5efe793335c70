"""The tensor program of the three block ops: ``fbgemm::block_bucketize_sparse_features`` and
its ``_inference`` and ``_2d_weights`` forms (the math and dtypes are in :mod:`.bucketize`;
launches and syncs: ``BUDGETS`` in ``budgets.py``, docs/ops.md).

Row id per element (``repeat_interleave``), per-feature parameters gathered per element, the
bucket and new index (elementwise, :mod:`._utils`), a stable sort by bucket (the output order),
an ``index_add`` for the counts, gathers for the outputs.  No host sync.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native.fbgemm.bucketize import _utils as ub
from fbgemm_npu.native.fbgemm.bucketize._checks import check_block, new_lengths, validate_block

__all__ = ["block_bucketize"]

Opt = torch.Tensor | None


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

    total = None if total_num_blocks is None else total_num_blocks.reshape(-1)
    batch = None if batch_size_per_feature is None else batch_size_per_feature.reshape(-1)
    local_blocks = None
    if total is not None and not pos:
        local_blocks = torch.floor_divide(total, p_size)
    bounds = ub.prepare_boundaries(pos, dtype) if pos else None
    keys = None if bounds is None else bounds.keys
    validate_block(op, lengths_, n_idx, blocks, p_size, batch, total, local_blocks, keys)
    counts = new_lengths(op, lengths_, p_size)

    seg = torch.repeat_interleave(lengths_, output_size=n_idx)  # row of each element
    if batch is None:
        feature = torch.floor_divide(seg, max(n // max(n_feat, 1), 1))
    else:
        feature = torch.repeat_interleave(batch, output_size=n).index_select(0, seg)
    # x < 0, for the unsigned divisions; a power-of-two my_size alone divides by shifting
    neg = None if total is None and ub.pow2_shift(p_size) else torch.lt(x, 0)
    keep_all = keep_orig_idx and keep_orig_idx_per_feature is None
    if bounds is not None:
        cols = [blocks, bounds.start.to(dtype), bounds.last]
        if total is not None:
            g = total.clamp(min=1)
            cols += [g, *ub.pow2_divmod(g)]
        cols = ub.gather_columns(cols, feature)
        bucket, new = ub.variable_buckets(x, neg, bounds, feature, cols, p_size, keep_all)
    elif total is not None:
        assert local_blocks is not None
        cols = [
            torch.mul(blocks, total),
            torch.mul(blocks, local_blocks),
            total,
            local_blocks,
            *ub.pow2_divmod(total.clamp(min=1)),
        ]
        bucket, new = ub.uniform_buckets_total(x, neg, ub.gather_columns(cols, feature))
    else:
        block = blocks.index_select(0, feature)
        bucket, new = ub.uniform_buckets(x, neg, block, p_size)
    if keep_all:
        new = x
    elif keep_orig_idx_per_feature is not None:
        keep = keep_orig_idx_per_feature.reshape(-1).index_select(0, feature)
        new = torch.where(keep, x, new)
    assert new is not None
    order = ub.bucket_order(counts, bucket, seg, n, p_size)

    arange = None
    if sequence or bucketize_pos:
        arange = torch.arange(n_idx, dtype=dtype, device=x.device)
    new_weights = None
    if weights is not None:
        if weights_dim is None:
            new_weights = weights.reshape(-1).index_select(0, order).view(weights.shape)
        else:
            new_weights = weights.reshape(n_idx, int(weights_dim)).index_select(0, order)
    new_pos = unbucketize = mapping = None
    if bucketize_pos:
        assert arange is not None
        new_pos = ub.row_positions(seg, order, arange).view(indices.shape)
    if sequence:
        assert arange is not None
        unbucketize = torch.empty_like(arange).scatter_(0, order, arange)
    if return_bucket_mapping:
        mapping = bucket if bucket.dtype == dtype else bucket.to(dtype)
    new_indices = new.index_select(0, order).view(indices.shape)
    return counts, new_indices, new_weights, new_pos, unbucketize, mapping
