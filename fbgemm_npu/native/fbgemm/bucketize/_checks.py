"""Argument and data checks of the bucketize family (see :mod:`.bucketize` for what upstream
trusts and we refuse).

Metadata checks (types, devices, dtypes, sizes) read no data.  The data checks of one call (the
lengths non-negative and summing to ``indices.numel()``, plus the op's own conditions) are folded
into one queued data check by :func:`validate` (``native/_pending.py``);
``FBGEMM_NPU_VALIDATE=0`` drops them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_on_device,
    check_same_device,
    check_same_dtype,
    check_tensor,
    dtype_name,
    validation_enabled,
)

__all__ = [
    "check_block",
    "check_common",
    "check_sizes",
    "counts_allocation",
    "new_lengths",
    "validate",
    "counts_sum_to",
    "validate_block",
]

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
    indices = check_dtype(op, "indices", tensors["indices"], INDEX_DTYPES)  # type: ignore[arg-type]
    if int(my_size) < 1:
        raise ValueError(f"{op}: argument 'my_size' must be at least 1, got {my_size}")
    top = torch.iinfo(indices.dtype).max
    if int(my_size) > top:  # a bucket id is an index (bucket_mapping, the division by my_size)
        raise ValueError(
            f"{op}: argument 'my_size' must be at most {top} with "
            f"{dtype_name(indices.dtype)} indices, got {my_size}"
        )


def _counts_what(op: str, rows: int, p_size: int) -> str:
    """What ``new_lengths`` of ``rows * p_size`` counts is, for the errors naming ``my_size``;
    a ``ValueError`` when the size passes int64."""
    what = f"new_lengths of lengths.numel() * my_size = {rows} * {p_size} elements"
    if rows * p_size > torch.iinfo(torch.int64).max:
        raise ValueError(f"{op}: argument 'my_size' = {p_size} is too large: {what}")
    return what


def new_lengths(op: str, lengths: torch.Tensor, my_size: int) -> torch.Tensor:
    """The zeroed ``new_lengths`` output (``lengths.numel() * my_size`` counts, ``lengths``'
    dtype and device); a size that overflows or cannot be allocated is an error naming
    ``my_size`` instead of the allocator's.  One launch (the fill)."""
    rows, p_size = lengths.numel(), int(my_size)
    what = _counts_what(op, rows, p_size)
    with counts_allocation(op, rows, p_size, what):
        return torch.zeros(rows * p_size, dtype=lengths.dtype, device=lengths.device)


@contextlib.contextmanager
def counts_allocation(op: str, rows: int, my_size: int, what: str | None = None) -> Iterator[None]:
    """Checks ``rows * my_size`` counts against int64 (a ``ValueError`` naming ``my_size``), then
    re-raises a failure to allocate them inside the block as a ``RuntimeError`` naming
    ``my_size``.  No launch."""
    what = what or _counts_what(op, rows, my_size)
    try:
        yield
    except RuntimeError as error:  # out of device (or host) memory
        raise RuntimeError(
            f"{op}: argument 'my_size' = {my_size}: {what} cannot be allocated ({error})"
        ) from error


def counts_sum_to(t: torch.Tensor, total: int) -> list[torch.Tensor]:
    """Bool conditions: every element of ``t`` in ``[0, total]``, and their sum ``total``
    (``clamp``, ``eq``, ``sum``, ``eq``).  The bound makes the sum exact: int64 counts at
    ``2**63 - 1`` sum to a wrapped value (``[2**63 - 1, 2**63 - 1, 2]`` to 0)."""
    return [torch.eq(t.clamp(0, total), t), torch.eq(t.sum(), total)]


def validate(
    op: str, lengths: torch.Tensor, num_indices: int, extra: list[tuple[list[torch.Tensor], str]]
) -> None:
    """One device-side check: ``lengths`` non-negative summing to ``num_indices``, plus
    ``extra`` (bool tensors of any shape, description) conditions, all joined by one ``cat``
    and one ``all``.  Launches: ``clamp``, ``eq``, ``sum``, ``eq``, ``cat``, ``all`` (then
    queued), plus the extra conditions' own; none when ``FBGEMM_NPU_VALIDATE=0``."""
    if not validation_enabled():
        return
    conds = counts_sum_to(lengths, num_indices)
    what = [f"argument 'lengths' must be non-negative and sum to indices.numel() = {num_indices}"]
    for more, text in extra:
        conds.extend(more)
        what.append(text)
    ok = torch.cat([c.reshape(-1) for c in conds]).all()
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
    table: Opt,
) -> Opt:
    """:func:`validate` of a block op call (flat ``lengths``, ``block_sizes``,
    ``batch_size_per_feature``, ``total_num_blocks`` and its ``total // my_size``, the boundary
    table of :func:`._search.prepare_boundaries` with variable blocks): VBE batch sizes
    non-negative and summing to ``lengths.numel()``; uniform blocks (``table`` None): block sizes
    ``b`` with ``0 <= b * G <= max`` of the index dtype (``G``: ``total_num_blocks`` or
    ``my_size``; past it upstream's ``b * G`` is a signed overflow) and ``total_num_blocks``
    positive multiples of ``my_size``; variable blocks: each feature's boundaries sorted (as
    unsigned: upstream's binary search; the table's rows are sign-flipped and padded with their
    last boundary) and ``total_num_blocks`` positive where ``block_sizes`` is 0.

    Returns, for uniform blocks without ``total_num_blocks`` while validating, the block sizes
    clamped to ``[0, max // my_size]`` that the check compares: the kernel divides by them, so a
    call whose check fails (queued, not yet read) still gets buckets in ``[0, my_size)``.
    ``None`` otherwise."""
    if not validation_enabled():
        return None
    extra: list[tuple[list[torch.Tensor], str]] = []
    n = lengths.numel()
    clamped = None
    if batch is not None:
        what = "argument 'batch_size_per_feature' must be non-negative and sum to lengths.numel()"
        extra.append((counts_sum_to(batch, n), f"{what} = {n}"))
    top = torch.iinfo(blocks.dtype).max
    if table is None and local_blocks is None:
        clamped = blocks.clamp(0, top // my_size)
        what = f"argument 'block_sizes' must be in [0, {top // my_size}] (b * my_size <= {top})"
        extra.append(([torch.eq(clamped, blocks)], what))
    elif table is None:
        assert local_blocks is not None and total is not None
        g = torch.mul(local_blocks.clamp(min=1), my_size)  # total where the next check passes
        what = f"argument 'total_num_blocks' must hold positive multiples of my_size = {my_size}"
        extra.append(([torch.eq(g, total)], what))
        # b * G overflows exactly where (b * G) // G != b (wrapped product); b < 0 fails too
        ok = torch.eq(torch.floor_divide(torch.mul(blocks.clamp(min=0), g), g), blocks)
        what = f"argument 'block_sizes' must be non-negative with b * total_num_blocks <= {top}"
        extra.append(([ok], what))
    else:
        what = "argument 'block_bucketize_pos' must hold each feature's boundaries sorted"
        extra.append(([torch.ge(table[:, 2:], table[:, 1:-1])], what))
        if total is not None:
            ok = torch.logical_or(torch.gt(total, 0), torch.ne(blocks, 0))
            what = "argument 'total_num_blocks' must be positive where block_sizes is 0"
            extra.append(([ok], what))
    validate(op, lengths, num_indices, extra)
    return clamped


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
