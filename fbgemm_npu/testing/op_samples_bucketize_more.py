"""Inputs of the bucketize family's smaller ops (``populate_bucketized_permute``,
``get_source_mask``, ``get_unique_indices`` and ``_with_inverse``): random valid CPU inputs for the
tests and specs, and the opcheck samples merged into :mod:`fbgemm_npu.testing.op_samples`
(``BUILDERS``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def populate_inputs(
    seed: int,
    rows: int,
    my_size: int,
    dtype: torch.dtype = torch.int64,
    mapping_dtype: torch.dtype = torch.int64,
    consistent: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(lengths, bucketized_lengths, bucket_mapping)``: ``rows`` rows of 0-4 indices in buckets
    ``[0, my_size)``; ``bucketized_lengths`` counts them per (bucket, row) as
    ``block_bucketize_sparse_features`` does, or (``consistent=False``) is random."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 5, (rows,), generator=g)
    n = int(lengths.sum())
    mapping = torch.randint(0, my_size, (n,), generator=g)
    row = torch.repeat_interleave(torch.arange(rows), lengths)
    counts = torch.zeros(my_size * rows, dtype=torch.int64)
    counts.index_add_(0, mapping * rows + row, torch.ones(n, dtype=torch.int64))
    if not consistent:
        counts = torch.randint(0, 4, (my_size * rows,), generator=g)
    return lengths.to(dtype), counts.to(dtype), mapping.to(mapping_dtype)


def source_mask_inputs(
    seed: int, batch: int, dtype: torch.dtype = torch.int64
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(num_sources, num_targets, output_size)``: counts in ``[0, 5)``, zeros frequent."""
    g = torch.Generator().manual_seed(seed)
    ns = torch.randint(0, 5, (batch,), generator=g)
    nt = torch.randint(0, 5, (batch,), generator=g)
    ns[torch.rand(batch, generator=g) < 0.3] = 0
    nt[torch.rand(batch, generator=g) < 0.3] = 0
    return ns.to(dtype), nt.to(dtype), int((ns + nt).sum())


def unique_inputs(
    seed: int, n: int, max_indices: int, dtype: torch.dtype = torch.int64
) -> torch.Tensor:
    """``n`` linear indices in ``[0, max_indices]``, drawn from a few hot values so that
    duplicates are frequent, ``max_indices`` itself (the pruned marker) among them."""
    g = torch.Generator().manual_seed(seed)
    hot = torch.randint(0, max_indices + 1, (max(n // 3, 1),), generator=g)
    hot[0] = max_indices
    return hot[torch.randint(0, hot.numel(), (n,), generator=g)].to(dtype)


def _populate(d: str) -> list[Sample]:
    a = populate_inputs(0, 5, 3)
    b = populate_inputs(1, 4, 2, torch.int32, torch.int32, consistent=False)
    return [(tuple(t.to(d) for t in a), {}), (tuple(t.to(d) for t in b), {})]


def _source_mask(d: str) -> list[Sample]:
    ns, nt, size = source_mask_inputs(0, 6)
    ns32, nt32, size32 = source_mask_inputs(1, 3, torch.int32)
    return [((ns.to(d), nt.to(d), size), {}), ((ns32.to(d), nt32.to(d), size32), {})]


def _unique(d: str) -> list[Sample]:
    v = unique_inputs(0, 12, 40).to(d)
    return [
        ((v, 40, True), {}),
        ((unique_inputs(1, 9, 2**30, torch.int32).to(d), 2**30, False), {}),
    ]


def _unique_with_inverse(d: str) -> list[Sample]:
    v = unique_inputs(2, 10, 25).to(d)
    return [((v, 25, True, True), {}), ((v, 25, False), {"compute_inverse_indices": True})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::populate_bucketized_permute": _populate,
    "fbgemm::get_source_mask": _source_mask,
    "fbgemm::get_unique_indices": _unique,
    "fbgemm::get_unique_indices_with_inverse": _unique_with_inverse,
}
