"""Valid batches of requests for the reorder family's specs and tests, and a plain-Python
reference of the reorder (loops over requests, tables and ads, independent of both kernels).

A batch: ``B`` requests of ``n_b`` ads each (``n_b`` may be 0), ``T`` tables; every ``(b, t,
ad)`` slot (broadcast: ``(b, t)``) has a length drawn in ``[0, max_len]``.  :func:`make_batch`
returns the arguments of all four ops built from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "Batch",
    "expected_lengths",
    "expected_rows",
    "make_batch",
    "reorder_reference",
    "split_by_request",
]


@dataclass
class Batch:
    """One batch, as the ops take it (CPU tensors)."""

    batch_offsets: torch.Tensor  # [B + 1]
    num_ads: int
    tables: int
    broadcast: bool
    lengths: torch.Tensor  # [B][T][n_b] (broadcast [B][T])
    offsets: torch.Tensor  # complete cumsum of lengths
    reordered: torch.Tensor  # complete cumsum of the reordered lengths ([T][OB])
    values: torch.Tensor  # sum(lengths) values, or embedding rows [sum, D]
    total: int  # output size: sum of the reordered lengths
    max_batch_size: int = 0


def _complete(lengths: list[int], dtype: torch.dtype) -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=dtype)


def reorder_reference(bo: list[int], tables: int, broadcast: bool, ob: int) -> list[int]:
    """The table-major list of slot ids: ``out[t * OB + a]`` = the request-major slot that
    output slot ``(t, a)`` copies, ``-1`` for padding (``a >= NA``)."""
    num_ads = bo[-1]
    out = [-1] * (tables * ob)
    for b in range(len(bo) - 1):
        n_b = bo[b + 1] - bo[b]
        for t in range(tables):
            for i in range(n_b):
                src = tables * b + t if broadcast else tables * bo[b] + t * n_b + i
                out[t * ob + bo[b] + i] = src
    assert num_ads <= ob
    return out


def make_batch(
    nbs: list[int],
    tables: int,
    broadcast: bool = False,
    seed: int = 0,
    max_len: int = 3,
    offsets_dtype: torch.dtype = torch.int32,
    values_dtype: torch.dtype = torch.int64,
    dim: int = 0,
    max_batch_size: int = 0,
) -> Batch:
    """A batch of ``len(nbs)`` requests with ``nbs[b]`` ads each; ``dim > 0``: embedding rows
    of ``dim`` floats instead of indices; ``max_batch_size``: the reordered offsets padded to
    ``T * max_batch_size`` slots."""
    g = torch.Generator().manual_seed(seed)
    bo = [0]
    for n in nbs:
        bo.append(bo[-1] + n)
    num_ads, nb = bo[-1], len(nbs)
    slots = nb * tables if broadcast else num_ads * tables
    lengths = torch.randint(0, max_len + 1, (slots,), generator=g).tolist()
    ob = max_batch_size if max_batch_size > 0 else num_ads
    order = reorder_reference(bo, tables, broadcast, ob)
    reordered = [0 if s < 0 else lengths[s] for s in order]
    total = sum(reordered)
    n_values = sum(lengths)
    if dim > 0:
        values = torch.randn(n_values, dim, generator=g).to(values_dtype)
    else:
        values = torch.randint(-50, 1000, (n_values,), generator=g).to(values_dtype)
    return Batch(
        batch_offsets=torch.tensor(bo, dtype=torch.int32),
        num_ads=num_ads,
        tables=tables,
        broadcast=broadcast,
        lengths=torch.tensor(lengths, dtype=offsets_dtype),
        offsets=_complete(lengths, offsets_dtype),
        reordered=_complete(reordered, offsets_dtype),
        values=values,
        total=total,
        max_batch_size=max_batch_size,
    )


def expected_rows(batch: Batch) -> torch.Tensor:
    """The reordered values by the reference's slot order (rows of ``values``)."""
    bo = batch.batch_offsets.tolist()
    ob = batch.max_batch_size if batch.max_batch_size > 0 else batch.num_ads
    order = reorder_reference(bo, batch.tables, batch.broadcast, ob)
    c = batch.offsets.tolist()
    rows = [batch.values[c[s] : c[s + 1]] for s in order if s >= 0]
    return torch.cat([*rows, batch.values[:0]])


def expected_lengths(batch: Batch) -> torch.Tensor:
    """The reordered lengths (zeros for padding)."""
    bo = batch.batch_offsets.tolist()
    ob = batch.max_batch_size if batch.max_batch_size > 0 else batch.num_ads
    lengths = batch.lengths.tolist()
    order = reorder_reference(bo, batch.tables, batch.broadcast, ob)
    return torch.tensor([0 if s < 0 else lengths[s] for s in order], dtype=batch.lengths.dtype)


def split_by_request(batch: Batch) -> list[torch.Tensor]:
    """``values`` cut into one tensor per request (cat_reorder_batched_ad_indices' list)."""
    c = batch.offsets.tolist()
    bo = batch.batch_offsets.tolist()
    t = batch.tables
    firsts = [c[t * b] if batch.broadcast else c[t * bo[b]] for b in range(len(bo))]
    return [batch.values[firsts[b] : firsts[b + 1]] for b in range(len(bo) - 1)]
