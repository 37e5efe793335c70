"""Argument and data checks of the bucketize family (see :mod:`.bucketize` for what upstream
trusts and we refuse).

Metadata checks (types, devices, dtypes, sizes) read no data.  The data checks of one call (the
lengths non-negative and summing to ``indices.numel()``, plus the op's own conditions) are folded
into one ``torch._assert_async`` by :func:`validate`; ``FBGEMM_NPU_VALIDATE=0`` drops them.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_on_device,
    check_same_device,
    check_same_dtype,
    check_tensor,
    validation_enabled,
)

__all__ = ["check_block", "check_common", "check_sizes", "validate", "validate_block"]

Opt = torch.Tensor | None


def check_sizes(op: str, arg: str, t: Opt, size: int, what: str) -> None:
    """``t`` (when given) must have ``size`` elements; ``what`` says where ``size`` comes from."""
    if t is not None and t.numel() != size:
        raise ValueError(
            f"{op}: argument '{arg}' must have {what} = {size} elements, got {t.numel()}"
        )


def check_common(
    op: str,
    my_size: int,
    weights: Opt,
    weight_dtypes: Iterable[torch.dtype],
    **tensors: Opt,
) -> None:
    """Types, devices, index dtypes, weights dtype, ``my_size``: metadata only."""
    for arg, t in tensors.items():
        if t is not None:
            check_tensor(op, arg, t)
    if weights is not None:
        check_dtype(op, "weights", check_tensor(op, "weights", weights), weight_dtypes)
    check_same_device(op, weights=weights, **tensors)
    check_dtype(op, "lengths", tensors["lengths"], INDEX_DTYPES)  # type: ignore[arg-type]
    check_dtype(op, "indices", tensors["indices"], INDEX_DTYPES)  # type: ignore[arg-type]
    if int(my_size) < 1:
        raise ValueError(f"{op}: argument 'my_size' must be at least 1, got {my_size}")


def validate(
    op: str, lengths: torch.Tensor, num_indices: int, extra: list[tuple[torch.Tensor, str]]
) -> None:
    """One device-side check: ``lengths >= 0`` summing to ``num_indices``, plus ``extra``
    (0-D bool, description) conditions.  Launches: ``ge``, ``all``, ``sum``, ``eq``,
    ``logical_and`` and ``_assert_async``, plus a ``logical_and`` per extra condition (and the
    condition's own); none when ``FBGEMM_NPU_VALIDATE=0``."""
    if not validation_enabled():
        return
    ok = torch.logical_and(torch.ge(lengths, 0).all(), torch.eq(lengths.sum(), num_indices))
    what = [f"argument 'lengths' must be non-negative and sum to indices.numel() = {num_indices}"]
    for cond, text in extra:
        ok = torch.logical_and(ok, cond)
        what.append(text)
    check_on_device(op, ok, "; ".join(what))


def validate_block(
    op: str,
    lengths: torch.Tensor,
    num_indices: int,
    blocks: torch.Tensor,
    my_size: int,
    batch: Opt,
    total: Opt,
    local_blocks: Opt,
) -> None:
    """:func:`validate` of a block op call (flat ``lengths``, ``block_sizes``,
    ``batch_size_per_feature``, ``total_num_blocks`` and its ``total // my_size``): VBE batch
    sizes non-negative and summing to ``lengths.numel()``, ``total_num_blocks`` positive
    multiples of ``my_size`` (uniform blocks) or positive where ``block_sizes`` is 0."""
    extra: list[tuple[torch.Tensor, str]] = []
    check = validation_enabled()
    n = lengths.numel()
    if batch is not None and check:
        ok = torch.logical_and(torch.ge(batch, 0).all(), torch.eq(batch.sum(), n))
        what = (
            "argument 'batch_size_per_feature' must be non-negative and sum to "
            f"lengths.numel() = {n}"
        )
        extra.append((ok, what))
    if local_blocks is not None and check:
        ok = torch.eq(torch.mul(local_blocks.clamp(min=1), my_size), total).all()
        what = f"argument 'total_num_blocks' must hold positive multiples of my_size = {my_size}"
        extra.append((ok, what))
    elif total is not None and check:
        ok = torch.logical_or(torch.gt(total, 0), torch.ne(blocks, 0)).all()
        extra.append((ok, "argument 'total_num_blocks' must be positive where block_sizes is 0"))
    validate(op, lengths, num_indices, extra)


def check_block(
    op: str,
    lengths: torch.Tensor,
    indices: torch.Tensor,
    block_sizes: torch.Tensor,
    my_size: int,
    weights: Opt,
    weights_dim: int | None,
    weight_dtypes: Iterable[torch.dtype],
    batch_size_per_feature: Opt,
    pos: list[torch.Tensor],
    total_num_blocks: Opt,
    keep_orig_idx_per_feature: Opt,
) -> tuple[int, int, int]:
    """Metadata checks of the three block ops (no device work); returns the call's sizes: rows
    ``N = lengths.numel()``, indices ``L`` and features ``T = block_sizes.numel()``."""
    named_pos = {f"block_bucketize_pos[{i}]": t for i, t in enumerate(pos)}
    check_common(
        op,
        my_size,
        weights,
        weight_dtypes,
        lengths=lengths,
        indices=indices,
        block_sizes=block_sizes,
        batch_size_per_feature=batch_size_per_feature,
        total_num_blocks=total_num_blocks,
        keep_orig_idx_per_feature=keep_orig_idx_per_feature,
        **named_pos,
    )
    check_same_dtype(
        op, indices=indices, block_sizes=block_sizes, total_num_blocks=total_num_blocks, **named_pos
    )
    check_same_dtype(op, lengths=lengths, batch_size_per_feature=batch_size_per_feature)
    if keep_orig_idx_per_feature is not None:
        check_dtype(op, "keep_orig_idx_per_feature", keep_orig_idx_per_feature, (torch.bool,))
    n, n_idx, n_feat = lengths.numel(), indices.numel(), block_sizes.numel()
    if batch_size_per_feature is None and (n % n_feat if n_feat else n):
        raise ValueError(
            f"{op}: argument 'lengths' has {n} elements, not a multiple of "
            f"block_sizes.numel() = {n_feat}"
        )
    for arg, t in (
        ("batch_size_per_feature", batch_size_per_feature),
        ("total_num_blocks", total_num_blocks),
        ("keep_orig_idx_per_feature", keep_orig_idx_per_feature),
    ):
        check_sizes(op, arg, t, n_feat, "block_sizes.numel()")
    if pos and len(pos) != n_feat:
        raise ValueError(
            f"{op}: argument 'block_bucketize_pos' must hold block_sizes.numel() = {n_feat} "
            f"tensors, got {len(pos)}"
        )
    for i, t in enumerate(pos):
        if t.numel() == 0:
            raise ValueError(f"{op}: argument 'block_bucketize_pos[{i}]' must not be empty")
    if weights is not None:
        width = 1 if weights_dim is None else int(weights_dim)
        if width < 0 or weights.numel() != n_idx * width:
            raise ValueError(
                f"{op}: argument 'weights' must have indices.numel() * weights_dim = {n_idx} * "
                f"{width} elements, got {weights.numel()}"
            )
    return n, n_idx, n_feat
