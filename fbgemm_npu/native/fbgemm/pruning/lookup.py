"""``fbgemm::pruned_hashmap_lookup`` and ``fbgemm::pruned_array_lookup`` on npu: the IntNBit
TBE's row-pruning remaps (``IntNBitTableBatchedEmbeddingBagsCodegen``: raw index -> row of the
pruned table, -1 for a pruned row).

Upstream's CPU kernels (``embedding_forward_quantized_cpu_template.cpp``): table ``t`` owns the
indices ``offsets[t B] : offsets[(t + 1) B]`` (``T`` from the table offsets, ``B = (offsets.numel()
- 1) // T``) and

* the hash map: slots ``hash_table[s_t : s_{t+1}]`` (``s = hash_table_offsets``, capacity ``c_t
  = s_{t+1} - s_t``) of ``(key, value)`` rows, ``key = -1`` empty.  ``idx`` probes ``s_t + (h +
  p) mod c_t`` for ``p = 0, 1, ...`` with ``h = hash(idx) mod c_t`` (``_hash.py``) and stops at
  the first empty slot (result -1) or key ``== idx`` (result its value); ``c_t = 0``: ``idx``
  itself.
* the array: ``out = index_remappings[r_t + idx]`` (``r = index_remappings_offsets``) where
  ``r_{t+1} > r_t``, else ``idx``.

The hash lookup probes every index at once: a ``[N, P]`` gather of slot keys, the first probe
that is empty or a match by an ``amin`` over the probe axis, then one ``[N, 2]`` row gather.
``P`` must reach every answer: a key stored ``d`` slots after its home is found within ``d + 1``
probes, and a probe sequence that meets neither a match nor an empty slot within ``P = 1 +
max d`` (``max`` over the occupied slots of the table) holds no match at all, so upstream's
answer is -1 (or it never ends: a full table without the key; ours answers -1).  ``max d`` is
data: the one sync of the op reads it (with the data checks, :meth:`DataChecks.read_with`), after
a pass over the ``C`` slots (their keys hashed as the indices' dtype hashes).  The pass costs
``O(C)`` per call; a host-known bound (the TBE knows its table at load time) would remove it
and the sync (budgets.py).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    DataChecks,
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids
from fbgemm_npu.native.fbgemm.pruning._args import (
    batch_layout,
    check_table_offsets,
    index_tables,
    offsets_checks,
)
from fbgemm_npu.native.fbgemm.pruning._hash import home_slot, wrap_of

__all__ = ["KERNELS", "pruned_array_lookup_npu", "pruned_hashmap_lookup_npu"]

HASH_LOOKUP = "fbgemm::pruned_hashmap_lookup"
ARRAY_LOOKUP = "fbgemm::pruned_array_lookup"


def check_hash_table(op: str, hash_table: torch.Tensor, indices: torch.Tensor) -> None:
    """``hash_table``: an int32 / int64 ``[C, >= 2]`` tensor on the indices' device."""
    check_tensor(op, "hash_table", hash_table)
    check_same_device(op, indices=indices, hash_table=hash_table)
    check_dtype(op, "hash_table", hash_table, INDEX_DTYPES)
    check_ndim(op, "hash_table", hash_table, (2,))
    if hash_table.size(1) < 2:
        raise ValueError(
            f"{op}: argument 'hash_table' must have (key, value) rows of size 2, got shape "
            f"{tuple(hash_table.shape)}"
        )


def table_meta(offsets: torch.Tensor, with_wrap: bool) -> torch.Tensor:
    """``[T, 3]`` int64 rows ``(start, capacity, max(capacity, 1))``, and ``2**64 mod`` the last
    (``with_wrap``: only int64 keys read it) as a fourth column.  Launches: sub, clamp_min, stack
    (+5 ``wrap_of``)."""
    start = offsets[:-1]
    cap = offsets[1:] - start
    safe = cap.clamp_min(1)
    columns = [start, cap, safe, wrap_of(safe)] if with_wrap else [start, cap, safe]
    return torch.stack(columns, 1)


def _wrap(meta: torch.Tensor) -> torch.Tensor | None:
    return meta[:, 3] if meta.size(1) > 3 else None


def max_displacement(
    hash_table: torch.Tensor, offsets: torch.Tensor, meta: torch.Tensor, key_dtype: torch.dtype
) -> torch.Tensor:
    """0-d int64: the largest ``(slot - home) mod capacity`` over the occupied slots (-1: none),
    homes hashed as ``key_dtype`` indices.  Launches: segment ids (3), clamp, the meta gather,
    sub, the hash, sub, remainder, ne, ge, lt, and (2), where, amax."""
    C = hash_table.size(0)
    keys = hash_table[:, 0]
    tab = segment_ids(offsets, C).clamp_(0, meta.size(0) - 1)
    m = meta.index_select(0, tab)
    local = arange_cached(C, keys.device) - m[:, 0]
    home = home_slot(keys, key_dtype, m[:, 2], _wrap(m))
    disp = torch.remainder(local - home, m[:, 2])
    occupied = torch.ne(keys, -1).logical_and_(local >= 0).logical_and_(local < m[:, 1])
    return torch.where(occupied, disp, -1).amax()


def pruned_hashmap_lookup_npu(
    indices: torch.Tensor,
    offsets: torch.Tensor,
    hash_table: torch.Tensor,
    hash_table_offsets: torch.Tensor,
) -> torch.Tensor:
    """The dense row of every index (-1: pruned), the indices' dtype and shape.

    Math (module docstring): ``first = amin_p(p if key[s_p] in (-1, idx) else P)`` over the
    probes ``s_p = s_t + (h + p) mod c_t``, ``out = value[s_first]`` if ``first < P`` and
    ``key[s_first] = idx`` else -1; ``c_t = 0``: ``idx``.  int32 / int64 indices and offsets (one
    dtype), int32 / int64 table.  Launches: ``budgets.py`` (1 sync: ``P``)."""
    op = HASH_LOOKUP
    T, B = batch_layout(op, indices, offsets, hash_table_offsets, "hash_table_offsets")
    check_hash_table(op, hash_table, indices)
    ix = indices.detach().reshape(-1)
    n, C = ix.numel(), hash_table.size(0)
    checks = DataChecks(op)
    if validation_enabled():
        bounds = offsets_checks(checks, offsets, n, T, B, every=True)
        check_table_offsets(checks, "hash_table_offsets", hash_table_offsets, C)
    else:
        bounds = offsets[: T * B + 1 : B]
    if n == 0 or C == 0:  # no index, or every capacity 0 (the checks hold the offsets to C)
        checks.assert_on_device()
        return ix.clone().reshape(indices.shape)
    wide = ix.dtype == torch.int64
    meta = table_meta(hash_table_offsets, wide)
    d_max = max_displacement(hash_table, hash_table_offsets, meta, ix.dtype)
    # the 1 sync (and the checks with it); no occupied slot (-1): one probe, which is empty
    P = max(checks.read_with([d_max])[0] + 1, 1)
    im = meta.index_select(0, index_tables(bounds, n, T))
    home = home_slot(ix, ix.dtype, im[:, 2], _wrap(im))
    with allocation_of(op, f"the [{n}, {P}] probe table (P = 1 + the longest displacement)"):
        steps = arange_cached(P, ix.device)
        slots = torch.remainder(home[:, None] + steps, im[:, 2:3]).add_(im[:, 0:1])
        slots.clamp_(0, C - 1)  # in the table whatever the (checked) offsets
        keys = hash_table[:, 0].index_select(0, slots.view(-1)).view(n, P)
        hit = torch.eq(keys, -1).logical_or_(torch.eq(keys, ix[:, None]))
        first = torch.where(hit, steps, P).amin(1)
    chosen = torch.gather(slots, 1, first.clamp_max(P - 1)[:, None]).view(n)
    row = hash_table[:, :2].index_select(0, chosen)
    found = torch.lt(first, P).logical_and_(torch.ne(row[:, 0], -1))
    out = torch.where(found, row[:, 1].to(ix.dtype), -1)
    return torch.where(torch.eq(im[:, 1], 0), ix, out).reshape(indices.shape)


def pruned_hashmap_lookup_meta(
    indices: torch.Tensor,
    offsets: torch.Tensor,
    hash_table: torch.Tensor,
    hash_table_offsets: torch.Tensor,
) -> torch.Tensor:
    """Upstream has no Meta kernel: the output is the indices' shape and dtype (contiguous)."""
    return torch.empty(indices.shape, dtype=indices.dtype, device=indices.device)


def pruned_array_lookup_npu(
    indices: torch.Tensor,
    offsets: torch.Tensor,
    index_remappings: torch.Tensor,
    index_remappings_offsets: torch.Tensor,
) -> torch.Tensor:
    """``out = index_remappings[r_t + idx]`` where table ``t`` has a remapping (``r_{t+1} >
    r_t``), else ``idx``; the indices' dtype and shape, int32 / int64 indices and offsets (one
    dtype), int32 / int64 remappings (cast as upstream's ``static_cast``).  Indices outside
    ``[0, r_{t+1} - r_t)`` of a remapped table (upstream reads past the table) are refused by a
    queued check and clamped into the array.  Launches: ``budgets.py``; no sync."""
    op = ARRAY_LOOKUP
    name = "index_remappings_offsets"
    T, B = batch_layout(op, indices, offsets, index_remappings_offsets, name)
    check_tensor(op, "index_remappings", index_remappings)
    check_same_device(op, indices=indices, index_remappings=index_remappings)
    check_dtype(op, "index_remappings", index_remappings, INDEX_DTYPES)
    ix = indices.detach().reshape(-1)
    remap = index_remappings.detach().reshape(-1)
    n, R = ix.numel(), remap.numel()
    checks = DataChecks(op)
    on = validation_enabled()
    if on:
        bounds = offsets_checks(checks, offsets, n, T, B, every=False)
        check_table_offsets(checks, name, index_remappings_offsets, R)
    else:
        bounds = offsets[: T * B + 1 : B]
    if n == 0 or R == 0:  # no index, or no remapped table (the checks hold the offsets to R)
        checks.assert_on_device()
        return ix.clone().reshape(indices.shape)
    start = index_remappings_offsets[:-1]
    meta = torch.stack([start, index_remappings_offsets[1:] - start], 1)
    im = meta.index_select(0, index_tables(bounds, n, T))
    idx = ix.to(torch.int64)
    remapped = torch.gt(im[:, 1], 0)
    if on:
        inside = torch.ge(idx, 0).logical_and_(torch.lt(idx, im[:, 1]))
        checks.require(
            inside.logical_or_(remapped.logical_not()).all(),
            "argument 'indices' must lie in [0, rows) of its table's remapping",
        )
    pos = torch.add(idx, im[:, 0]).clamp_(0, R - 1)
    out = torch.where(remapped, remap.index_select(0, pos).to(ix.dtype), ix)
    checks.assert_on_device()
    return out.reshape(indices.shape)


KERNELS = {
    HASH_LOOKUP: {"PrivateUse1": pruned_hashmap_lookup_npu, "Meta": pruned_hashmap_lookup_meta},
    ARRAY_LOOKUP: {"PrivateUse1": pruned_array_lookup_npu},
}
