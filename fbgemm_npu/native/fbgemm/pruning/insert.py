"""``fbgemm::pruned_hashmap_insert`` on npu: fill the IntNBit TBE's pruning hash table in place.

Upstream's CPU kernel (``embedding_forward_quantized_cpu_template.cpp``) inserts, table by table
and in index order, every ``(idx, dense_idx)`` with ``dense_idx != -1`` into the table's slots
``hash_table[s_t : s_{t+1}]`` by linear probing from ``hash(idx) mod c_t``: the first empty slot
(key -1) takes ``(idx, dense_idx)``, a slot holding ``idx`` already gets the new value.  Which
slot a key lands in depends on every earlier insertion (sequential probing), so the table is
built where that order is cheap: on the host.  This is a one-time, model-load op (upstream's
``set_index_remappings`` itself runs it on CPU tensors before moving the table to the device).

The npu kernel: one device-to-host read of every argument (their int64 casts in one ``cat``: the
op's 1 sync), host checks, upstream's CPU kernel on the host copies (the oracle itself: its
insertion order exactly), then the ``[C, 2]`` table back by one pinned non-blocking upload and
an in-place ``copy_`` into ``hash_table[:, :2]``.

Refused with the op and argument named, where upstream reads out of bounds or never returns:
offsets that decrease or leave ``[0, indices.numel()]``, table offsets that decrease or leave
``[0, C]``, ``dense_indices`` of another size or dtype, int64 indices outside the table dtype's
range (upstream stores them wrapped: a key no lookup finds), and an insertion that may find its
table full (upstream probes for ever): every first insertion of a key is counted as taking an
empty slot, exact for a table filled from empty (``set_index_remappings``), and an over-count
(a refusal where upstream would overwrite a key it finds) for a nearly full table that already
holds some of the keys.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_same_device, check_tensor
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.fbgemm.pruning._args import batch_layout
from fbgemm_npu.native.fbgemm.pruning.lookup import check_hash_table

__all__ = ["KERNELS", "pruned_hashmap_insert_npu"]

INSERT = "fbgemm::pruned_hashmap_insert"


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"{INSERT}: {what}")


def _host_checks(
    ix: torch.Tensor,
    dense: torch.Tensor,
    off: torch.Tensor,
    hto: torch.Tensor,
    table: torch.Tensor,
    T: int,
    B: int,
) -> None:
    """The conditions of the module docstring, on the host copies (int64 CPU tensors)."""
    n, C = ix.numel(), table.size(0)
    off = off[: T * B + 1]
    _require(bool((off[1:] >= off[:-1]).all()), "argument 'offsets' must be non-decreasing")
    _require(int(off[0]) >= 0 and int(off[-1]) <= n, f"argument 'offsets' must lie in [0, {n}]")
    hto_name = "argument 'hash_table_offsets'"
    _require(bool((hto[1:] >= hto[:-1]).all()), f"{hto_name} must be non-decreasing")
    _require(int(hto[0]) >= 0 and int(hto[-1]) <= C, f"{hto_name} must lie in [0, {C}]")
    if table.dtype == torch.int32:
        fits = n == 0 or bool(((ix >= -(2**31)) & (ix < 2**31)).all())
        _require(fits, "argument 'indices' must fit the int32 hash_table (upstream wraps them)")
    cap = hto[1:] - hto[:-1]
    bounds = off[::B]
    # the items upstream inserts: table t's indices with dense != -1, in order, capacity > 0
    ti = torch.searchsorted(bounds[1:].contiguous(), torch.arange(n), right=True).clamp_(max=T - 1)
    inside = (torch.arange(n) >= bounds[0]) & (torch.arange(n) < bounds[-1])
    keep = inside & (dense != -1) & (cap[ti] > 0)
    ti, key = ti[keep], ix[keep]
    if key.numel() == 0:
        return
    keys = table[:, 0].to(torch.int64)
    ts = torch.searchsorted(hto[1:], torch.arange(C), right=True)
    in_table = (torch.arange(C) >= hto[0]) & (ts < T)
    empty0 = torch.bincount(ts[in_table & (keys == -1)], minlength=T)[:T]
    # every first insertion of a key (not -1) is counted as taking an empty slot, whether the
    # table holds the key already or not: exact for tables filled from empty (the TBE's), an
    # over-count (so a refusal, never a hang) for a key found among earlier contents
    _, iid = torch.unique(torch.stack([ti, key], 1), dim=0, return_inverse=True)
    m = key.numel()
    first = torch.full((m,), m).scatter_reduce_(0, iid, torch.arange(m), "amin")
    consume = (key != -1) & (first[iid] == torch.arange(m))
    before = torch.cumsum(consume.long(), 0) - consume.long()
    per_table = torch.bincount(ti, weights=consume.double(), minlength=T).long()
    before -= (torch.cumsum(per_table, 0) - per_table)[ti]  # consumed earlier in the same table
    stuck = ((key == -1) | consume) & (empty0[ti] - before <= 0)
    _require(
        not bool(stuck.any()),
        "argument 'hash_table' is full: an insertion may find no empty slot (upstream probes "
        "for ever); give the table more capacity (1 / load factor)",
    )


def pruned_hashmap_insert_npu(
    indices: torch.Tensor,
    dense_indices: torch.Tensor,
    offsets: torch.Tensor,
    hash_table: torch.Tensor,
    hash_table_offsets: torch.Tensor,
) -> None:
    """Insert ``(indices[i], dense_indices[i])`` into ``hash_table`` in place, as upstream's CPU
    kernel (module docstring).  int32 / int64 indices, dense indices and offsets (one dtype),
    int32 / int64 table.  Launches: ``budgets.py`` (1 sync: the host read)."""
    op = INSERT
    T, B = batch_layout(op, indices, offsets, hash_table_offsets, "hash_table_offsets")
    check_hash_table(op, hash_table, indices)
    check_tensor(op, "dense_indices", dense_indices)
    check_same_device(op, indices=indices, dense_indices=dense_indices)
    if dense_indices.dtype != indices.dtype:
        raise RuntimeError(
            f"{op}: argument 'dense_indices' ({dense_indices.dtype}) must have the dtype of "
            f"'indices' ({indices.dtype})"
        )
    n, C = indices.numel(), hash_table.size(0)
    if dense_indices.numel() != n:
        raise ValueError(
            f"{op}: argument 'dense_indices' must have the {n} elements of 'indices', got "
            f"{dense_indices.numel()}"
        )
    pieces = (indices, dense_indices, offsets, hash_table_offsets, hash_table[:, :2])
    flat = torch.cat([p.detach().reshape(-1).to(torch.int64) for p in pieces])
    host = flat.cpu()  # the 1 sync
    cut = [n, n, offsets.numel(), T + 1, 2 * C]
    ix, dense, off, hto, tab = torch.split(host, cut)
    table = tab.view(C, 2).to(hash_table.dtype)
    _host_checks(ix, dense, off, hto, table, T, B)
    dt = indices.dtype
    torch.ops.fbgemm.pruned_hashmap_insert(ix.to(dt), dense.to(dt), off.to(dt), table, hto)
    hash_table[:, :2].copy_(upload(table, hash_table.dtype, hash_table.device))


def pruned_hashmap_insert_meta(
    indices: torch.Tensor,
    dense_indices: torch.Tensor,
    offsets: torch.Tensor,
    hash_table: torch.Tensor,
    hash_table_offsets: torch.Tensor,
) -> None:
    """Upstream has no Meta kernel: the op only writes ``hash_table`` (no output)."""
    return None


KERNELS = {INSERT: {"PrivateUse1": pruned_hashmap_insert_npu, "Meta": pruned_hashmap_insert_meta}}
