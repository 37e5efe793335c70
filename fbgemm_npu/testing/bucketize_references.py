"""References for bucketize fuzz cases whose upstream CPU result is not the contract.

* :func:`inference_mapping`: ``block_bucketize_sparse_features_inference`` with
  ``return_bucket_mapping`` but not ``sequence``: upstream CPU leaves the mapping uninitialised;
  the contract (ours, and upstream's mapping whenever it fills one) is the mapping of a
  ``sequence=True`` run, with no ``unbucketize_permute``.
* :func:`block_bucketize` (and its ``_inference`` / ``_2d_weights`` wrappers): the block ops in
  plain Python integers, element by element, as upstream's kernels state them, for inputs where
  upstream CPU writes out of bounds: an index below its feature's first boundary
  (``block_bucketize_pos[t][0] > u``) goes to bucket ``u % my_size`` with new index
  ``u // my_size`` (upstream CUDA: its unsigned ``lb`` is huge), and with ``block_sizes[t] == 0``
  an element whose boundary search passes ``my_size`` is placed (and counted) by its original
  index, where CUDA's placing pass puts it.  Independent of the kernels: no tensor program.

For element ``i`` of row ``r`` (feature ``t``), ``u`` its index read unsigned, ``G`` =
``total_num_blocks[t]`` or ``my_size``, ``Lb = G // my_size``, ``b = block_sizes[t]``:
uniform blocks put it in bucket ``u // (b Lb)`` with index ``u % (b Lb)`` when ``u < b G``,
else in ``(u % G) // Lb`` with index ``u // G``; boundaries ``pos`` (unsigned, sorted) give
``lb = #{pos <= v} - 1`` with ``v = u`` or ``((u % G) * pos[-1] mod 2**bits) // G`` (``b == 0``).
"""

from __future__ import annotations

import bisect
from typing import Any

import torch

__all__ = [
    "block_bucketize",
    "block_bucketize_2d_weights",
    "block_bucketize_inference",
    "inference_mapping",
]


def inference_mapping(**kw: Any) -> tuple[torch.Tensor | None, ...]:
    """Upstream's inference op, the bucket mapping taken from a ``sequence=True`` run."""
    op = torch.ops.fbgemm.block_bucketize_sparse_features_inference
    if not kw.get("return_bucket_mapping") or kw.get("sequence"):
        return op(**kw)
    out = list(op(**{**kw, "sequence": True}))
    out[4] = None  # no unbucketize_permute without sequence
    return tuple(out)


def _flat(t: torch.Tensor | None) -> list[int] | None:
    return None if t is None else [int(v) for v in t.reshape(-1).tolist()]


def _signed(v: int, bits: int) -> int:
    v %= 1 << bits
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _bucket(u: int, t: int, kw: dict[str, Any], bits: int) -> tuple[int, int]:
    """(bucket, new index before keep_orig_idx) of the unsigned index ``u`` of feature ``t``."""
    p_size, b = int(kw["my_size"]), kw["_blocks"][t]
    g = kw["_total"][t] if kw["_total"] is not None else p_size
    pos = kw["_pos"]
    if pos:
        bounds = [v % (1 << bits) for v in pos[t]]
        v = u if b != 0 else ((u % g) * bounds[-1] % (1 << bits)) // g
        lb = bisect.bisect_right(bounds, v) - 1
        inside = 0 <= lb < p_size
        bucket = lb if inside else u % p_size
        if b == 0:
            return bucket, u // g
        return bucket, (u - bounds[lb] if inside else u // p_size)
    local = b * (g // p_size)
    if u < b * g:
        return u // local, u % local
    return (u % g) // (g // p_size), u // g


def block_bucketize(
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
    *,
    weights_dim: int | None = None,
    return_bucket_mapping: bool = False,
) -> tuple[torch.Tensor | None, ...]:
    """``(new_lengths, new_indices, new_weights, new_pos, unbucketize_permute, bucket_mapping)``
    of a block op call (see the module docstring)."""
    bits = torch.iinfo(indices.dtype).bits
    rows, x = _flat(lengths) or [], _flat(indices) or []
    n, n_feat, p_size = len(rows), block_sizes.numel(), int(my_size)
    kw = {
        "my_size": p_size,
        "_blocks": _flat(block_sizes),
        "_total": _flat(total_num_blocks),
        "_pos": [_flat(p) for p in block_bucketize_pos or []],
    }
    keep = [bool(keep_orig_idx)] * n_feat
    if keep_orig_idx_per_feature is not None:
        keep = [bool(v) for v in keep_orig_idx_per_feature.reshape(-1).tolist()]
    batch = _flat(batch_size_per_feature) or [n // max(n_feat, 1)] * n_feat
    feature_of_row = [t for t, size in enumerate(batch) for _ in range(size)]
    placed: list[list[tuple[int, int, int, int]]] = [[] for _ in range(p_size * n)]
    start = 0
    for r, length in enumerate(rows):
        t = feature_of_row[r]
        for i in range(start, start + length):
            u = x[i] % (1 << bits)
            bucket, new = _bucket(u, t, kw, bits)
            placed[bucket * n + r].append((i, u if keep[t] else new, i - start, bucket))
        start += length
    order = [item for cell in placed for item in cell]
    dtype, device = indices.dtype, indices.device
    new_indices = torch.tensor([_signed(v, bits) for _, v, _, _ in order], dtype=torch.int64)
    new_lengths = torch.tensor([len(cell) for cell in placed], dtype=lengths.dtype)
    src = torch.tensor([i for i, _, _, _ in order], dtype=torch.int64)
    new_weights = None
    if weights is not None:
        if weights_dim is not None:
            new_weights = weights.reshape(len(x), int(weights_dim)).index_select(0, src)
        else:
            new_weights = weights.reshape(-1).index_select(0, src).view(weights.shape)
    new_pos = unbucketize = mapping = None
    if bucketize_pos:
        new_pos = torch.tensor([q for _, _, q, _ in order], dtype=dtype).view(indices.shape)
    if sequence:
        unbucketize = torch.empty(len(x), dtype=dtype)
        unbucketize[src] = torch.arange(len(x), dtype=dtype)
    if return_bucket_mapping:
        mapping = torch.empty(len(x), dtype=dtype)
        mapping[src] = torch.tensor([bk for _, _, _, bk in order], dtype=dtype)
    out = [
        new_lengths,
        new_indices.to(dtype).view(indices.shape),
        new_weights,
        new_pos,
        unbucketize,
        mapping,
    ]
    return tuple(None if o is None else o.to(device) for o in out)


def block_bucketize_inference(**kw: Any) -> tuple[torch.Tensor | None, ...]:
    """:func:`block_bucketize` with the inference op's outputs (six, the mapping included)."""
    return block_bucketize(**kw)


def block_bucketize_2d_weights(**kw: Any) -> tuple[torch.Tensor | None, ...]:
    """:func:`block_bucketize` with the 2-D weights op's outputs (five; weights as rows)."""
    kw.setdefault("weights_dim", 1)
    return block_bucketize(**kw)[:5]


def block_bucketize_training(**kw: Any) -> tuple[torch.Tensor | None, ...]:
    """:func:`block_bucketize` with the training op's five outputs."""
    return block_bucketize(**kw)[:5]
