"""Bucketize sparse features: ``fbgemm::block_bucketize_sparse_features`` (+ ``_inference``,
``_2d_weights``) and ``fbgemm::bucketize_sparse_features`` on npu.

torchrec's row-wise sharding input dist: a KJT's ``lengths`` (``N = T * B`` rows, or
``sum(batch_size_per_feature)`` rows with VBE) and ``indices`` (``L`` values) are split into
``my_size = P`` buckets, one per rank.  For element ``i`` of row ``r`` of feature ``t`` with the
index read as unsigned ``u`` (upstream's ``uint32``/``uint64`` view: negative raw ids are huge):

* uniform blocks (``b = block_sizes[t]``, ``G = total_num_blocks[t]`` or ``P``, ``Lb = G // P``):
  ``u < b*G``: bucket ``u // (b*Lb)``, new index ``u % (b*Lb)``; else bucket ``(u % G) // Lb``,
  new index ``u // G``;
* variable blocks (``block_bucketize_pos[t]``, sorted boundaries): ``lb = upper_bound(pos[t], v)
  - 1`` with ``v = u`` (or ``(u % G) * pos[t][-1] // G`` when ``b == 0``); bucket ``lb`` if
  ``0 <= lb < P`` else ``u % P``; new index ``u // G`` if ``b == 0``, else ``u - pos[t][lb]``
  or ``u // P``;
* ``keep_orig_idx`` (or ``keep_orig_idx_per_feature[t]``, which overrides it): new index ``u``;
* cyclic (``bucketize_sparse_features``): bucket ``u % P``, new index ``u // P``.

Outputs are bucket-major: ``new_lengths[p * N + r]`` counts row ``r``'s elements in bucket ``p``,
and inside a (bucket, row) the elements keep their input order, as upstream's CPU kernel does (its
CUDA kernel does not, for ``sequence=False``).  ``new_pos`` holds each element's position in its
row, ``unbucketize_permute[i]`` the output position of input ``i``, ``bucket_mapping[i]`` its
bucket.  Program: row id per element (``repeat_interleave``), per-feature parameters gathered per
element, the bucket and new index (elementwise; unsigned division emulated in the index dtype, see
``_bucketize_utils``), a stable sort by bucket (the output order), an ``index_add`` for the
counts, gathers for the outputs.  No host sync: every output size is a shape product.

Dtypes (upstream's, CPU and CUDA alike): lengths, batch_size_per_feature int32/int64 (one dtype);
indices, block_sizes, total_num_blocks, block_bucketize_pos int32/int64 (one dtype);
keep_orig_idx_per_feature bool; 1-D weights float32/float64, 2-D weights float32, float16,
bfloat16, float64; ``bucketize_sparse_features``: lengths = indices dtype, weights float32.

Where we differ from upstream's CPU kernel, which trusts its input: non-contiguous inputs are read
by their strides (upstream CPU reads raw memory); data errors (negative lengths, lengths not
summing to ``indices.numel()``, VBE batch sizes not summing to ``lengths.numel()``,
``total_num_blocks`` not positive multiples of ``my_size``) raise instead of corrupting memory;
``return_bucket_mapping`` without ``sequence`` returns the real buckets (upstream CPU returns an
uninitialised tensor, CUDA ``None``); ``lengths.numel()`` not a multiple of ``T``, ``my_size < 1``,
too few ``block_bucketize_pos`` / ``keep_orig_idx_per_feature`` / ``total_num_blocks`` entries
raise (upstream reads out of bounds or divides by zero); an index below its feature's first
boundary goes to bucket ``u % P`` as on CUDA (upstream CPU writes to bucket -1, out of bounds);
with ``b == 0`` and more than ``P + 1`` boundaries, upstream CPU counts and places an element by
different rules (a corrupt output), ours places it where CUDA's second pass does.  Not emulated:
``block_sizes * G`` overflowing the index dtype and negative block sizes (upstream's results
there are artefacts of wrap-around); ``max_B`` is unused, as on upstream's CPU.

Launch counts (checked by ``tests/test_bucketize.py``) are in each kernel's docstring; the data
check costs 6 of them (``FBGEMM_NPU_VALIDATE=0`` removes it).  Upstream has no autograd formula for
these ops, so only ``PrivateUse1`` (and ``Meta`` for ``bucketize_sparse_features``, which upstream
lacks) is registered.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    check_dtype,
    check_on_device,
    check_same_device,
    check_same_dtype,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.fbgemm.bucketize import _utils as ub

__all__ = [
    "KERNELS",
    "block_bucketize_sparse_features_2d_weights_npu",
    "block_bucketize_sparse_features_inference_npu",
    "block_bucketize_sparse_features_npu",
    "bucketize_sparse_features_meta",
    "bucketize_sparse_features_npu",
]

BLOCK = "fbgemm::block_bucketize_sparse_features"
BLOCK_INFERENCE = "fbgemm::block_bucketize_sparse_features_inference"
BLOCK_2D = "fbgemm::block_bucketize_sparse_features_2d_weights"
CYCLIC = "fbgemm::bucketize_sparse_features"

INDEX_DTYPES = (torch.int32, torch.int64)
WEIGHT_DTYPES = {  # upstream's dispatch, identical on CPU and CUDA
    BLOCK: (torch.float32, torch.float64),
    BLOCK_INFERENCE: (torch.float32, torch.float64),
    BLOCK_2D: (torch.float32, torch.float16, torch.bfloat16, torch.float64),
    CYCLIC: (torch.float32,),
}

Opt = torch.Tensor | None


def _check_sizes(op: str, arg: str, t: Opt, size: int, what: str) -> None:
    if t is not None and t.numel() != size:
        raise ValueError(f"{op}: argument '{arg}' must have {what} = {size} elements, "
                         f"got {t.numel()}")  # fmt: skip


def _check_common(op: str, my_size: int, weights: Opt, **tensors: Opt) -> None:
    """Types, devices, index dtypes, weights dtype, ``my_size``: metadata only."""
    for arg, t in tensors.items():
        if t is not None:
            check_tensor(op, arg, t)
    if weights is not None:
        check_dtype(op, "weights", check_tensor(op, "weights", weights), WEIGHT_DTYPES[op])
    check_same_device(op, weights=weights, **tensors)
    check_dtype(op, "lengths", tensors["lengths"], INDEX_DTYPES)  # type: ignore[arg-type]
    check_dtype(op, "indices", tensors["indices"], INDEX_DTYPES)  # type: ignore[arg-type]
    if int(my_size) < 1:
        raise ValueError(f"{op}: argument 'my_size' must be at least 1, got {my_size}")


def _validate(op: str, lengths: torch.Tensor, num_indices: int, extra: list[tuple[
        torch.Tensor, str]]) -> None:  # fmt: skip
    """One device-side check: ``lengths >= 0`` summing to ``num_indices``, plus ``extra``
    (0-D bool, description) conditions.  Launches: 6, +1 per extra condition (plus its own);
    none when ``FBGEMM_NPU_VALIDATE=0``."""
    if not validation_enabled():
        return
    ok = torch.logical_and(torch.ge(lengths, 0).all(), torch.eq(lengths.sum(), num_indices))
    what = [f"argument 'lengths' must be non-negative and sum to indices.numel() = {num_indices}"]
    for cond, text in extra:
        ok = torch.logical_and(ok, cond)
        what.append(text)
    check_on_device(op, ok, "; ".join(what))


def _block_bucketize(
    op: str,
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
    """The three block ops: metadata checks, one data check, then the tensor program."""
    pos = list(block_bucketize_pos or [])
    _check_common(
        op, my_size, weights, lengths=lengths, indices=indices, block_sizes=block_sizes,
        batch_size_per_feature=batch_size_per_feature, total_num_blocks=total_num_blocks,
        keep_orig_idx_per_feature=keep_orig_idx_per_feature,
        **{f"block_bucketize_pos[{i}]": t for i, t in enumerate(pos)},
    )  # fmt: skip
    check_same_dtype(op, indices=indices, block_sizes=block_sizes,
                     total_num_blocks=total_num_blocks,
                     **{f"block_bucketize_pos[{i}]": t for i, t in enumerate(pos)})  # fmt: skip
    check_same_dtype(op, lengths=lengths, batch_size_per_feature=batch_size_per_feature)
    if keep_orig_idx_per_feature is not None:
        check_dtype(op, "keep_orig_idx_per_feature", keep_orig_idx_per_feature, (torch.bool,))
    p_size, dtype = int(my_size), indices.dtype
    lengths_, x, blocks = lengths.reshape(-1), indices.reshape(-1), block_sizes.reshape(-1)
    n, n_idx, n_feat = lengths_.numel(), x.numel(), blocks.numel()
    if batch_size_per_feature is None and (n % n_feat if n_feat else n):
        raise ValueError(f"{op}: argument 'lengths' has {n} elements, not a multiple of "
                         f"block_sizes.numel() = {n_feat}")  # fmt: skip
    _check_sizes(op, "batch_size_per_feature", batch_size_per_feature, n_feat,
                 "block_sizes.numel()")  # fmt: skip
    _check_sizes(op, "total_num_blocks", total_num_blocks, n_feat, "block_sizes.numel()")
    _check_sizes(op, "keep_orig_idx_per_feature", keep_orig_idx_per_feature, n_feat,
                 "block_sizes.numel()")  # fmt: skip
    if pos and len(pos) != n_feat:
        raise ValueError(f"{op}: argument 'block_bucketize_pos' must hold block_sizes.numel() "
                         f"= {n_feat} tensors, got {len(pos)}")  # fmt: skip
    for i, t in enumerate(pos):
        if t.numel() == 0:
            raise ValueError(f"{op}: argument 'block_bucketize_pos[{i}]' must not be empty")
    if weights is not None:
        width = 1 if weights_dim is None else int(weights_dim)
        if width < 0 or weights.numel() != n_idx * width:
            raise ValueError(f"{op}: argument 'weights' must have indices.numel() * weights_dim "
                             f"= {n_idx} * {width} elements, got {weights.numel()}")  # fmt: skip

    total = None if total_num_blocks is None else total_num_blocks.reshape(-1)
    extra: list[tuple[torch.Tensor, str]] = []
    check = validation_enabled()
    batch = batch_size_per_feature
    if batch is not None:
        batch = batch.reshape(-1)
    if batch is not None and check:
        ok = torch.logical_and(torch.ge(batch, 0).all(), torch.eq(batch.sum(), n))
        extra.append((ok, "argument 'batch_size_per_feature' must be non-negative and sum to "
                          f"lengths.numel() = {n}"))  # fmt: skip
    local_blocks = None
    if total is not None and not pos:
        local_blocks = torch.floor_divide(total, p_size)
    if local_blocks is not None and check:
        ok = torch.eq(torch.mul(local_blocks.clamp(min=1), p_size), total).all()
        extra.append((ok, f"argument 'total_num_blocks' must hold positive multiples of "
                          f"my_size = {p_size}"))  # fmt: skip
    elif total is not None and check:
        ok = torch.logical_or(torch.gt(total, 0), torch.ne(blocks, 0)).all()
        extra.append((ok, "argument 'total_num_blocks' must be positive where block_sizes is 0"))
    _validate(op, lengths_, n_idx, extra)

    seg = torch.repeat_interleave(lengths_, output_size=n_idx)  # row of each element
    if batch is None:
        feature = torch.floor_divide(seg, max(n // max(n_feat, 1), 1))
    else:
        feature = torch.repeat_interleave(batch, output_size=n).index_select(0, seg)
    # x < 0, for the unsigned divisions; a power-of-two my_size alone divides by shifting
    neg = None if total is None and ub.pow2_shift(p_size) else torch.lt(x, 0)
    keep_all = keep_orig_idx and keep_orig_idx_per_feature is None
    if pos:
        bounds = ub.prepare_boundaries(pos, dtype)
        cols = [blocks, bounds.start.to(dtype), bounds.last]
        if total is not None:
            g = total.clamp(min=1)
            cols += [g, *ub.pow2_divmod(g)]
        cols = ub.gather_columns(cols, feature)
        bucket, new = ub.variable_buckets(x, neg, bounds, feature, cols, p_size, keep_all)
    elif total is not None:
        assert local_blocks is not None
        cols = [torch.mul(blocks, total), torch.mul(blocks, local_blocks), total, local_blocks,
                *ub.pow2_divmod(total.clamp(min=1))]  # fmt: skip
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
    counts, order = ub.bucket_order(bucket, seg, n, p_size, lengths_.dtype)

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


def _check_cyclic(lengths: torch.Tensor, indices: torch.Tensor, my_size: int,
                  weights: Opt) -> None:  # fmt: skip
    _check_common(CYCLIC, my_size, weights, lengths=lengths, indices=indices)
    check_same_dtype(CYCLIC, lengths=lengths, indices=indices)  # upstream reads both as index_t
    if weights is not None and weights.numel() != indices.numel():
        raise ValueError(f"{CYCLIC}: argument 'weights' must have indices.numel() = "
                         f"{indices.numel()} elements, got {weights.numel()}")  # fmt: skip


Out5 = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None,
             torch.Tensor | None]  # fmt: skip


def block_bucketize_sparse_features_npu(
    lengths: torch.Tensor,
    indices: torch.Tensor,
    bucketize_pos: bool,
    sequence: bool,
    block_sizes: torch.Tensor,
    my_size: int,
    weights: torch.Tensor | None = None,
    batch_size_per_feature: torch.Tensor | None = None,
    max_B: int = -1,
    block_bucketize_pos: list[torch.Tensor] | None = None,
    keep_orig_idx: bool = False,
    total_num_blocks: torch.Tensor | None = None,
    keep_orig_idx_per_feature: torch.Tensor | None = None,
) -> Out5:
    """Block bucketize: ``(new_lengths, new_indices, new_weights, new_pos, unbucketize_permute)``.

    See the module docstring for the math and dtypes.  Launches of the kernel, uniform blocks:
    19 when ``my_size`` is a power of two (division by a shift), 21 otherwise (the unsigned
    view of negative ids: ``x < 0``, a shift, a carry); +1 with weights, +2 with sequence
    (arange, scatter), +4 with bucketize_pos (+3 once sequence made the arange), +2 with
    keep_orig_idx_per_feature, +1 with VBE, 34 with total_num_blocks (a per-feature unsigned
    divisor); variable blocks (block_bucketize_pos): 40 (+1 for int32 indices, +4 when
    ``my_size`` is not a power of two; 56 with total_num_blocks).  The data check adds 6 (+6 with
    VBE, +5 with total_num_blocks), none with ``FBGEMM_NPU_VALIDATE=0``; a non-contiguous
    multi-dimensional input adds its copy.  Syncs: 0.
    """
    out = _block_bucketize(
        BLOCK, lengths, indices, bucketize_pos, sequence, block_sizes, my_size, weights, None,
        batch_size_per_feature, block_bucketize_pos, False, keep_orig_idx, total_num_blocks,
        keep_orig_idx_per_feature,
    )  # fmt: skip
    return out[:5]


def block_bucketize_sparse_features_inference_npu(
    lengths: torch.Tensor,
    indices: torch.Tensor,
    bucketize_pos: bool,
    sequence: bool,
    block_sizes: torch.Tensor,
    my_size: int,
    weights: torch.Tensor | None = None,
    batch_size_per_feature: torch.Tensor | None = None,
    max_B: int = -1,
    block_bucketize_pos: list[torch.Tensor] | None = None,
    return_bucket_mapping: bool = False,
    keep_orig_idx: bool = False,
    total_num_blocks: torch.Tensor | None = None,
    keep_orig_idx_per_feature: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, ...]:
    """As :func:`block_bucketize_sparse_features_npu`, plus ``bucket_mapping`` (each input
    element's bucket) when ``return_bucket_mapping``.  Launches: as the training op, +0 for the
    mapping with int64 indices, +1 with int32.  Syncs: 0."""
    return _block_bucketize(
        BLOCK_INFERENCE, lengths, indices, bucketize_pos, sequence, block_sizes, my_size,
        weights, None, batch_size_per_feature, block_bucketize_pos, return_bucket_mapping,
        keep_orig_idx, total_num_blocks, keep_orig_idx_per_feature,
    )  # fmt: skip


def block_bucketize_sparse_features_2d_weights_npu(
    lengths: torch.Tensor,
    indices: torch.Tensor,
    bucketize_pos: bool,
    sequence: bool,
    block_sizes: torch.Tensor,
    my_size: int,
    weights: torch.Tensor,
    weights_dim: int = 1,
    batch_size_per_feature: torch.Tensor | None = None,
    max_B: int = -1,
    block_bucketize_pos: list[torch.Tensor] | None = None,
    keep_orig_idx: bool = False,
    total_num_blocks: torch.Tensor | None = None,
    keep_orig_idx_per_feature: torch.Tensor | None = None,
) -> Out5:
    """As :func:`block_bucketize_sparse_features_npu` with ``weights`` of ``weights_dim`` values
    per index (``weights.numel() == L * weights_dim``, read row-major as upstream does): the
    ``(L, weights_dim)`` rows move with their index.  Launches: as the training op with weights.
    Syncs: 0."""
    out = _block_bucketize(
        BLOCK_2D, lengths, indices, bucketize_pos, sequence, block_sizes, my_size, weights,
        weights_dim, batch_size_per_feature, block_bucketize_pos, False, keep_orig_idx,
        total_num_blocks, keep_orig_idx_per_feature,
    )  # fmt: skip
    return out[:5]  # type: ignore[return-value]


def bucketize_sparse_features_npu(
    lengths: torch.Tensor,
    indices: torch.Tensor,
    bucketize_pos: bool,
    my_size: int,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Cyclic bucketize: bucket ``u % my_size``, new index ``u // my_size`` (``u`` the unsigned
    index); outputs ``(new_lengths, new_indices, new_weights, new_pos)`` as for the block op.
    Launches: 11 when ``my_size`` is a power of two, 13 otherwise; +1 with weights, +4 with
    bucketize_pos; the data check adds 6.  Syncs: 0."""
    _check_cyclic(lengths, indices, my_size, weights)
    lengths_, x, p_size = lengths.reshape(-1), indices.reshape(-1), int(my_size)
    n, n_idx = lengths_.numel(), x.numel()
    _validate(CYCLIC, lengths_, n_idx, [])
    seg = torch.repeat_interleave(lengths_, output_size=n_idx)
    new, bucket = ub.udivmod(x, None, p_size)
    assert bucket is not None
    counts, order = ub.bucket_order(bucket, seg, n, p_size, lengths_.dtype)
    new_weights = new_pos = None
    if weights is not None:
        new_weights = weights.reshape(-1).index_select(0, order).view(weights.shape)
    if bucketize_pos:
        arange = torch.arange(n_idx, dtype=x.dtype, device=x.device)
        new_pos = ub.row_positions(seg, order, arange).view(indices.shape)
    return counts, new.index_select(0, order).view(indices.shape), new_weights, new_pos


def bucketize_sparse_features_meta(
    lengths: torch.Tensor,
    indices: torch.Tensor,
    bucketize_pos: bool,
    my_size: int,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Shapes and dtypes only (upstream has no Meta kernel for this op): every output size is
    known from the input shapes."""
    _check_cyclic(lengths, indices, my_size, weights)
    return (
        lengths.new_empty(lengths.numel() * my_size),
        torch.empty_like(indices),
        None if weights is None else torch.empty_like(weights),
        torch.empty_like(indices) if bucketize_pos else None,
    )


KERNELS = {
    BLOCK: {"PrivateUse1": block_bucketize_sparse_features_npu},
    BLOCK_INFERENCE: {"PrivateUse1": block_bucketize_sparse_features_inference_npu},
    BLOCK_2D: {"PrivateUse1": block_bucketize_sparse_features_2d_weights_npu},
    CYCLIC: {"PrivateUse1": bucketize_sparse_features_npu, "Meta": bucketize_sparse_features_meta},
}
