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
bucket.  Program: row and feature of each element (int32 segment ids, ``_order``), per-feature
parameters gathered per element, the bucket and new index (elementwise; unsigned division emulated
in the index dtype, see ``_utils``; the boundary search of variable blocks, ``_search``), a stable
sort of float bucket keys (the output order), an int32 ``index_add`` for the counts, gathers for
the outputs: no AI-CPU route on a 910B below ``2**31`` indices (docs/hardware.md).  No host
sync: every output size is a shape product.

Dtypes (upstream's, CPU and CUDA alike): lengths, batch_size_per_feature int32/int64 (one dtype);
indices, block_sizes, total_num_blocks, block_bucketize_pos int32/int64 (one dtype);
keep_orig_idx_per_feature bool; 1-D weights float32/float64, 2-D weights float32, float16,
bfloat16, float64; ``bucketize_sparse_features``: lengths = indices dtype, weights float32.

Where we differ from upstream's CPU kernel, which trusts its input: non-contiguous inputs are read
by their strides (upstream CPU reads raw memory); data errors (negative lengths, lengths not
summing to ``indices.numel()``, int64 lengths whose sum wraps, VBE batch sizes likewise against
``lengths.numel()``, ``total_num_blocks`` not positive multiples of ``my_size``, boundaries not
sorted) raise instead of corrupting memory; so do, with uniform blocks, negative block sizes and
``block_sizes * G`` past the index dtype (upstream's ``b * G`` is then a signed overflow);
``return_bucket_mapping`` without ``sequence`` returns the real buckets (upstream CPU returns an
uninitialised tensor, CUDA ``None``); no features (with rows: without, the outputs are empty),
no rows with indices (a ``ValueError`` from the shapes),
``lengths.numel()`` not a multiple of ``T``,
``my_size < 1`` or above the index dtype's max, a ``new_lengths`` too large to allocate, too few
``block_bucketize_pos`` / ``keep_orig_idx_per_feature`` / ``total_num_blocks`` entries raise
(upstream reads out of bounds, divides by zero or fails in its allocator); an index below its
feature's first boundary goes to bucket ``u % P`` as on CUDA (upstream CPU writes to bucket -1,
out of bounds); with ``b == 0`` and more than ``P + 1`` boundaries, upstream CPU counts and
places an element by different rules (a corrupt output), ours places it where CUDA's second pass
does.  ``max_B`` is unused, as on upstream's CPU.

Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md), held by the family's budget tests;
each kernel's docstring says what its options add, and the data check (:mod:`._checks`) is part of
the count (``FBGEMM_NPU_VALIDATE=0`` removes it).  The block ops share one tensor program
(:mod:`.block`).  Upstream has no autograd formula for these ops, so only ``PrivateUse1`` (and
``Meta`` for ``bucketize_sparse_features``, which upstream lacks) is registered.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_same_dtype
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.fbgemm.bucketize import _order
from fbgemm_npu.native.fbgemm.bucketize import _utils as ub
from fbgemm_npu.native.fbgemm.bucketize._checks import (
    check_common,
    counts_allocation,
    new_lengths,
    validate,
)
from fbgemm_npu.native.fbgemm.bucketize.block import block_bucketize

__all__ = [
    "KERNELS",
    "block_bucketize_sparse_features_2d_weights_npu",
    "block_bucketize_sparse_features_inference_npu",
    "block_bucketize_sparse_features_npu",
    "bucketize_sparse_features_meta",
    "bucketize_sparse_features_npu",
]

BLOCK_BUCKETIZE_SPARSE_FEATURES = "fbgemm::block_bucketize_sparse_features"
BLOCK_BUCKETIZE_SPARSE_FEATURES_INFERENCE = "fbgemm::block_bucketize_sparse_features_inference"
BLOCK_BUCKETIZE_SPARSE_FEATURES_2D_WEIGHTS = "fbgemm::block_bucketize_sparse_features_2d_weights"
BUCKETIZE_SPARSE_FEATURES = "fbgemm::bucketize_sparse_features"

WEIGHT_DTYPES = {  # upstream's dispatch, identical on CPU and CUDA
    BLOCK_BUCKETIZE_SPARSE_FEATURES: (torch.float32, torch.float64),
    BLOCK_BUCKETIZE_SPARSE_FEATURES_INFERENCE: (torch.float32, torch.float64),
    BLOCK_BUCKETIZE_SPARSE_FEATURES_2D_WEIGHTS: (
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.float64,
    ),
    BUCKETIZE_SPARSE_FEATURES: (torch.float32,),
}

Opt = torch.Tensor | None


def _check_cyclic(lengths: torch.Tensor, indices: torch.Tensor, my_size: int, weights: Opt) -> None:
    op = BUCKETIZE_SPARSE_FEATURES
    check_common(op, my_size, weights, WEIGHT_DTYPES[op], lengths=lengths, indices=indices)
    check_same_dtype(op, lengths=lengths, indices=indices)  # upstream reads both as index_t
    if weights is not None and weights.numel() != indices.numel():
        raise ValueError(
            f"{op}: argument 'weights' must have indices.numel() = {indices.numel()} elements, "
            f"got {weights.numel()}"
        )


Out5 = tuple[torch.Tensor, torch.Tensor, Opt, Opt, Opt]


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

    See the module docstring for the math and dtypes.  What the kernel launches, uniform blocks
    (19 with ``my_size`` a power of two, no AI-CPU route below ``2**31`` indices): the rows
    (``cumsum`` and segment ids), the feature (``row // B``) and block size of each element, the
    divmod by ``my_size`` and by the block (``floor_divide`` / ``remainder``; a power of two
    needs no view of negative ids, another ``my_size`` ``x < 0`` and two adds), two selects, the
    counts (an int32 ``index_add``, widened for int64 lengths) and the float-key sort, the
    gather of the new indices; weights add their gather, sequence an ``index_copy_`` (the
    inverse permutation), bucketize_pos the row starts (a subtraction, two gathers),
    keep_orig_idx_per_feature a gather and a select, VBE the features' row ends (a ``cumsum``, a
    compare and a sum), total_num_blocks the division by ``G`` split through ``my_size``;
    variable blocks (block_bucketize_pos) the boundary table (one pinned upload, a ``cat``, a
    gather, a flip) and its search (a gather of each element's row, a compare, a sum), costing
    more for int32 indices (the bucket mapping's cast), when ``my_size`` is not a power of two
    and with total_num_blocks (the per-feature unsigned divisor).  The data check grows with VBE
    and total_num_blocks (``FBGEMM_NPU_VALIDATE=0`` drops it); a non-contiguous multi-dimensional
    input adds its copy.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    out = block_bucketize(
        BLOCK_BUCKETIZE_SPARSE_FEATURES,
        WEIGHT_DTYPES[BLOCK_BUCKETIZE_SPARSE_FEATURES],
        lengths,
        indices,
        bucketize_pos,
        sequence,
        block_sizes,
        my_size,
        weights,
        None,
        batch_size_per_feature,
        block_bucketize_pos,
        False,
        keep_orig_idx,
        total_num_blocks,
        keep_orig_idx_per_feature,
    )
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
    element's bucket) when ``return_bucket_mapping``.  Launches: as the training op, plus a cast
    of the mapping where it is int64 and the indices int32 (otherwise the mapping is the bucket
    tensor itself).  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md)."""
    return block_bucketize(
        BLOCK_BUCKETIZE_SPARSE_FEATURES_INFERENCE,
        WEIGHT_DTYPES[BLOCK_BUCKETIZE_SPARSE_FEATURES_INFERENCE],
        lengths,
        indices,
        bucketize_pos,
        sequence,
        block_sizes,
        my_size,
        weights,
        None,
        batch_size_per_feature,
        block_bucketize_pos,
        return_bucket_mapping,
        keep_orig_idx,
        total_num_blocks,
        keep_orig_idx_per_feature,
    )


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
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md)."""
    out = block_bucketize(
        BLOCK_BUCKETIZE_SPARSE_FEATURES_2D_WEIGHTS,
        WEIGHT_DTYPES[BLOCK_BUCKETIZE_SPARSE_FEATURES_2D_WEIGHTS],
        lengths,
        indices,
        bucketize_pos,
        sequence,
        block_sizes,
        my_size,
        weights,
        weights_dim,
        batch_size_per_feature,
        block_bucketize_pos,
        False,
        keep_orig_idx,
        total_num_blocks,
        keep_orig_idx_per_feature,
    )
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
    Launches: an unsigned divmod (``floor_divide``, a mask and ``remainder`` when ``my_size`` is
    a power of two, the unsigned view of negative ids otherwise), the rows (segment ids), the
    counts (an int32 ``index_add``, widened for int64), the float-key sort and the gather;
    weights add their gather, bucketize_pos the row starts; the data check comes on top.  No
    AI-CPU route below ``2**31`` indices.  Launches and syncs: ``BUDGETS`` in ``budgets.py``
    (docs/ops.md)."""
    _check_cyclic(lengths, indices, my_size, weights)
    op = BUCKETIZE_SPARSE_FEATURES
    lengths_, x, p_size = lengths.reshape(-1), indices.reshape(-1), int(my_size)
    n, n_idx = lengths_.numel(), x.numel()
    if n == 0 and n_idx:  # no row to hold an index: known from the shapes
        raise ValueError(
            f"{op}: argument 'lengths' must be non-negative and sum to indices.numel() = "
            f"{n_idx}, got no rows"
        )
    validate(op, lengths_, n_idx, [])
    with counts_allocation(op, n, p_size):
        zeros = _order.zero_counts(n * p_size, n_idx, x.device)
    incl, row = _order.element_rows(lengths_, n_idx)
    new, bucket = ub.udivmod(x, None, p_size)
    assert bucket is not None
    counts = _order.bucket_counts(zeros, bucket, row, n, lengths_.dtype)
    order = _order.stable_bucket_order(bucket, p_size)
    new_weights = new_pos = None
    if weights is not None:
        new_weights = weights.reshape(-1).index_select(0, order).view(weights.shape)
    if bucketize_pos:
        arange = arange_cached(n_idx, x.device, x.dtype)
        new_pos = _order.row_positions(lengths_, incl, row, order, arange).view(indices.shape)
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
        new_lengths(BUCKETIZE_SPARSE_FEATURES, lengths, my_size),  # refuses sizes past int64
        torch.empty_like(indices),
        None if weights is None else torch.empty_like(weights),
        torch.empty_like(indices) if bucketize_pos else None,
    )


KERNELS = {
    BLOCK_BUCKETIZE_SPARSE_FEATURES: {"PrivateUse1": block_bucketize_sparse_features_npu},
    BLOCK_BUCKETIZE_SPARSE_FEATURES_INFERENCE: {
        "PrivateUse1": block_bucketize_sparse_features_inference_npu
    },
    BLOCK_BUCKETIZE_SPARSE_FEATURES_2D_WEIGHTS: {
        "PrivateUse1": block_bucketize_sparse_features_2d_weights_npu
    },
    BUCKETIZE_SPARSE_FEATURES: {
        "PrivateUse1": bucketize_sparse_features_npu,
        "Meta": bucketize_sparse_features_meta,
    },
}
