"""Small inputs of the index-select family's tests, on the host (move them with :func:`to_npu`),
and the references that judge the ops upstream's CPU build cannot.

One jagged batch (``VALUES`` rows in segments of ``LENGTHS``, selected by ``INDICES``), one keyed
batch (two keys of batch 3), three tables back to back (``TABLES``) and one
``jagged_unique_indices`` call: small enough that a test reads its expected result by eye.

References (plain loops over the math, on CPU tensors; conformance and the fuzz tests use them):
:func:`keyed_reference` and :func:`unique_reference` for the CUDA-only ops, read from upstream's
CUDA kernels; :func:`segment_sum_reference` for ``segment_sum_csr`` of half types (upstream sums
them sequentially in the half type, which drifts: the contract is the exact sum rounded once).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "HASH_SIZE_CUMSUM",
    "HASH_SIZE_OFFSETS",
    "INDICES",
    "INPUT_OFFSETS",
    "KEYED_LENGTHS",
    "KEYED_OFFSETS",
    "KEYED_VALUES",
    "LENGTHS",
    "OUTPUT_OFFSETS",
    "TABLES",
    "UNIQUE_INDICES",
    "UNIQUE_OFFSETS",
    "VALUES",
    "generator",
    "keyed_reference",
    "segment_sum_reference",
    "to_npu",
    "unique_reference",
]

VALUES = torch.arange(12.0).view(6, 2)
LENGTHS = torch.tensor([1, 2, 3])
INDICES = torch.tensor([2, 0, 2])
# inclusive offsets, as jagged_index_select_2d_forward_v2 takes them
INPUT_OFFSETS, OUTPUT_OFFSETS = LENGTHS.cumsum(0), LENGTHS[INDICES].cumsum(0)
KEYED_VALUES = torch.arange(1.0, 12.0)
KEYED_LENGTHS = torch.tensor([1, 2, 3, 0, 4, 1])
KEYED_OFFSETS = torch.tensor([0, 1, 3, 6, 6, 10, 11])
TABLES = torch.arange(18.0)  # (3, 2) and (4, 3) tables back to back
HASH_SIZE_CUMSUM = torch.tensor([0, 10, 15, 30])
HASH_SIZE_OFFSETS = torch.tensor([0, 1, 2, 3])
UNIQUE_OFFSETS = torch.tensor([0, 2, 3, 3, 6, 7, 9])
UNIQUE_INDICES = torch.tensor([3, 3, 9, 1, 1, 4, 2, 14, 0])


def generator(seed: int) -> torch.Generator:
    """A host generator seeded with ``seed``."""
    return torch.Generator().manual_seed(seed)


def to_npu(*args: Any) -> list[Any]:
    """Each argument on the npu device: tensors and lists of tensors moved, the rest as given."""

    def move(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return a.to("npu")
        if isinstance(a, list) and a and isinstance(a[0], torch.Tensor):
            return [t.to("npu") for t in a]
        return a

    return [move(a) for a in args]


def keyed_reference(
    values: torch.Tensor,
    lengths: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int,
    weights: torch.Tensor | None = None,
    selected_lengths_sum: int | None = None,
) -> list[torch.Tensor]:
    """``keyed_jagged_index_select_dim1`` by loops over (batch, selected sample): output segment
    ``n * K + j`` copies input segment ``n * batch_size + indices[j]`` (starting at ``offsets``
    of it).  A ``selected_lengths_sum`` other than the selected total is refused (upstream's CUDA
    kernel truncates to a smaller one and reads garbage past a larger one)."""
    num_batches = lengths.numel() // batch_size
    lens, offs = lengths.tolist(), offsets.tolist()
    src: list[int] = []
    out_lengths = []
    for n in range(num_batches):
        for j in indices.tolist():
            seg = n * batch_size + j
            out_lengths.append(lens[seg])
            src.extend(range(offs[seg], offs[seg] + lens[seg]))
    if selected_lengths_sum is not None and selected_lengths_sum != len(src):
        raise ValueError(
            f"selected_lengths_sum ({selected_lengths_sum}) is not the selected total ({len(src)})"
        )
    idx = torch.tensor(src, dtype=torch.int64)
    out = [values[idx], torch.tensor(out_lengths, dtype=lengths.dtype)]
    if weights is not None:
        out.append(weights[idx])
    return out


def unique_reference(
    hash_size_cumsum: torch.Tensor,
    hash_size_offsets: torch.Tensor,
    offsets: torch.Tensor,
    indices: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``jagged_unique_indices`` by loops, as upstream's CUDA kernel computes it:
    ``(output_lengths, output_offsets, unique_indices, reverse_index)``.  Linearize every index
    with its feature's ``hash_size_cumsum``, sort the distinct linear ids, map each index to its
    rank, delinearize each distinct id by its owner (the last feature whose first id is at most
    it), spread each group's count of distinct ids over the group's samples (the first ``count %
    samples`` get one more)."""
    hsc, hso = hash_size_cumsum.tolist(), hash_size_offsets.tolist()
    offs, ind = offsets.tolist(), indices.tolist()
    n_feat = len(hsc) - 1
    total_b = len(offs) - 1
    batch = total_b // n_feat if n_feat else 0
    linear = []
    for s in range(total_b):
        for i in range(offs[s], offs[s + 1]):
            linear.append(ind[i] + hsc[s // batch])
    keys = sorted(set(linear))
    rank = {k: j for j, k in enumerate(keys)}
    reverse = [rank[v] for v in linear]

    def owner(v: int) -> int:
        return max(t for t in range(n_feat) if hsc[t] <= v)

    uniq = [k - hsc[owner(k)] for k in keys]
    lengths = [0] * total_b
    for g in range(n_feat):
        lo, hi = hso[g], hso[g + 1]
        samples = list(range(lo * batch, hi * batch))
        # the last feature's group also owns the ids at or past hsc[T] (upstream's CUDA kernel)
        count = sum(1 for k in keys if hsc[lo] <= k and (hi == n_feat or k < hsc[hi]))
        for i, s in enumerate(samples):
            lengths[s] = count // len(samples) + (1 if i < count % len(samples) else 0)
    dtype = indices.dtype
    cum = [0]
    for n in lengths:
        cum.append(cum[-1] + n)
    return (
        torch.tensor(lengths, dtype=dtype),
        torch.tensor(cum, dtype=dtype),
        torch.tensor(uniq, dtype=dtype),
        torch.tensor(reverse, dtype=torch.int64),
    )


def segment_sum_reference(
    batch_size: int, csr_seg: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    """``out[s] = sum(values[csr[s] * bs : csr[s + 1] * bs])`` summed in float64 (floats) or
    int64 (integers), then cast to ``values``' dtype (int32 wraps, as upstream's sums do)."""
    bounds = [int(b) * max(batch_size, 0) for b in csr_seg.reshape(-1).tolist()]
    wide = torch.float64 if values.dtype.is_floating_point else torch.int64
    flat = values.reshape(-1).to(wide)
    pairs = zip(bounds[:-1], bounds[1:], strict=True)
    sums = [flat[a:b].sum() if b > a else flat.new_zeros(()) for a, b in pairs]
    out = torch.stack(sums) if sums else flat.new_zeros((0,))
    return out.to(values.dtype)
