"""Variable batch size per feature and rank (VBE): the per-bag metadata of the TBE forward
(:mod:`.forward`) and of ``generate_vbe_metadata`` (:mod:`.metadata`), without ``searchsorted``
(a 910B runs it on its AI CPU, docs/hardware.md).

Bags are ordered feature by feature and, within a feature, rank by rank: block ``(t, r)`` holds
bags ``S[t, r] .. S[t, r + 1]`` with ``S[t, r] = B_offsets[t] + B_offsets_rank_per_feature[t,
r]`` (``S[t, R] = B_offsets[t + 1]``).  Bag ``k`` of block ``(t, r)`` writes its ``D_t`` output
elements from ``output_offsets_feature_rank[r * T + t] + (k - S[t, r]) * D_t``.

**Block ids.**  :func:`block_ids` counts, for every bag ``k``, the bounds ``S`` (flattened
``[T, R + 1]``, so the end of feature ``t`` and the start of ``t + 1`` are both there) at or
below ``k`` other than the first, with :func:`segment_ids` (an int32 ``index_add`` + ``cumsum``).
For ``k`` in the non-empty block ``(t, r)`` that count is ``id = (R + 1) t + r``: every bound of
the features before ``t`` (``R + 1`` each), and ``S[t, 0..r]`` -- empty blocks change nothing,
since the block a bag lies in is the last one starting at or before it.  The bag past the last
one (``k = total_B``, the bag of the indices past ``offsets[-1]``) counts all of them: ``T (R +
1) - 1``.  So a real bag has ``r = id mod (R + 1) < R`` and ``t = id // (R + 1)``, and
``(id + 1) // (R + 1)`` is ``t`` for a real bag and ``T`` past the end -- the dummy feature the
forward gives those indices.

**Block tables** (:func:`block_tables`, per ``T``, ``R`` and dims: cached with the plan), one
entry per id: the feature ``(id + 1) // (R + 1)``, the ``output_offsets_feature_rank`` entry
``r T + t`` (``r`` clamped to ``R - 1`` for the unused ids ``r = R``), and ``D_t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.native.fbgemm.tbe._utils import arange_cached, segment_ids, tracing

__all__ = [
    "BlockTables",
    "VbeBlocks",
    "block_ids",
    "block_tables",
    "row_output_offsets",
    "scatter_member_starts",
    "vbe_blocks",
    "vbe_row_output_offsets",
]


@dataclass(frozen=True)
class BlockTables:
    """Per block id (``T (R + 1)`` entries, see the module docstring), all int64."""

    out_entry: torch.Tensor  # its entry of output_offsets_feature_rank: r * T + t
    dim: torch.Tensor  # D_t
    feature: torch.Tensor | None  # the feature of a bag with this id (T for the bag past the end)


@dataclass
class VbeBlocks:
    """The blocks of one VBE call: their bounds, each bag's id, each bag's feature."""

    bounds: torch.Tensor  # [T (R + 1)] S[t, r], the offsets' dtype
    ids: torch.Tensor  # [total_B + 1] int32 block id of each bag (the last: past the end)
    tables: BlockTables
    feature: torch.Tensor | None  # [total_B + 1] int64 feature of each bag (T past the end)


def block_ids(
    B_offsets: torch.Tensor, B_offsets_rank_per_feature: torch.Tensor, total_B: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bounds [T (R + 1)], ids [total_B + 1])`` of the module docstring.  Launches: the add
    of the bounds, :func:`segment_ids` (3; a ``searchsorted`` when traced)."""
    bounds = (B_offsets[:-1, None] + B_offsets_rank_per_feature).reshape(-1)
    if tracing(bounds):  # a trace keeps the searchsorted (not budgeted, see .traced)
        k = torch.arange(total_B + 1, device=bounds.device, dtype=bounds.dtype)
        return bounds, torch.searchsorted(bounds[1:], k, right=True)
    return bounds, segment_ids(bounds, total_B + 1)


def block_tables(
    T: int, R: int, dims: torch.Tensor, cache: dict | None = None, with_feature: bool = True
) -> BlockTables:
    """The per-id tables (module docstring) for ``T`` features of ``dims`` (``[T]`` int64) and
    ``R`` ranks; data-independent, so ``cache`` (a dict kept with the layout) holds them per
    ``R``.  Launches when built: 4 small arithmetic ops (the feature table 2 more)."""
    key = ("blocks", R)
    hit = None if cache is None else cache.get(key)
    if hit is not None:
        return hit
    dev = dims.device
    r = arange_cached(R + 1, dev)
    t = arange_cached(T, dev)
    # the unused ids r = R read a valid entry (r clamped to R - 1)
    out_entry = (r.clamp(max=max(R - 1, 0)) * T)[None, :] + t[:, None]
    feature = (t[:, None] + torch.eq(r, R)[None, :]).reshape(-1) if with_feature else None
    tables = BlockTables(
        out_entry=out_entry.reshape(-1),
        dim=dims[:, None].expand(T, R + 1).reshape(-1),
        feature=feature,
    )
    if cache is not None:
        cache[key] = tables
    return tables


def vbe_blocks(
    B_offsets: torch.Tensor,
    B_offsets_rank_per_feature: torch.Tensor,
    dims: torch.Tensor,
    total_B: int,
    cache: dict | None = None,
    with_feature: bool = True,
) -> VbeBlocks:
    """:func:`block_ids`, :func:`block_tables` and, ``with_feature``, each bag's feature (one
    gather)."""
    T = B_offsets.numel() - 1
    R = B_offsets_rank_per_feature.size(1) - 1
    bounds, ids = block_ids(B_offsets, B_offsets_rank_per_feature, total_B)
    tables = block_tables(T, R, dims, cache, with_feature)
    feature = None
    if with_feature:
        assert tables.feature is not None
        feature = tables.feature.index_select(0, ids)
    return VbeBlocks(bounds, ids, tables, feature)


def row_output_offsets(
    blocks: VbeBlocks, output_offsets_feature_rank: torch.Tensor, total_B: int
) -> torch.Tensor:
    """``[total_B]`` int64: where each bag's output starts (module docstring).  Launches: the
    block bases (a gather, a cast, an addcmul), then two gathers and an addcmul per bag."""
    tab = blocks.tables
    start = blocks.bounds if blocks.bounds.dtype == torch.int64 else blocks.bounds.to(torch.int64)
    base = torch.addcmul(
        output_offsets_feature_rank.index_select(0, tab.out_entry), start, tab.dim, value=-1
    )
    ids = blocks.ids[:total_B]
    k = arange_cached(total_B, base.device)
    return torch.addcmul(base.index_select(0, ids), k, tab.dim.index_select(0, ids))


def scatter_member_starts(
    cls: Any, starts: torch.Tensor, blocks: VbeBlocks, output_size: int
) -> torch.Tensor:
    """The output starts of one class's bags, the other classes' bags sent to the trash tail at
    ``output_size`` (so the scatter needs no data-dependent selection).  Launches: a gather of
    the class's cached member mask, a ``where`` (and its scalar)."""
    assert blocks.feature is not None
    member = cls.member_mask.index_select(0, blocks.feature[: starts.numel()])
    return torch.where(member, starts, output_size)


def vbe_row_output_offsets(
    B_offsets: torch.Tensor,
    B_offsets_rank_per_feature: torch.Tensor,
    output_offsets_feature_rank: torch.Tensor,
    dims: torch.Tensor,
    total_B: int,
    cache: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(row_output_offsets [total_B] int64, ids [total_B + 1])``: each bag's output start and
    block id (``t = id // (R + 1)`` for the real bags), for callers without a forward plan.
    ``dims``: ``[T]`` int64.  Launches: :func:`block_ids` (4), the block tables unless ``cache``
    holds them (4), :func:`row_output_offsets` (6); nothing is read back to the host."""
    blocks = vbe_blocks(
        B_offsets, B_offsets_rank_per_feature, dims, total_B, cache, with_feature=False
    )
    return row_output_offsets(blocks, output_offsets_feature_rank, total_B), blocks.ids
