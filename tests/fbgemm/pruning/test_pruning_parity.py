"""The pruning ops on npu against upstream's CPU kernels (fbgemm-gpu-cpu, the oracle): the
table after ``pruned_hashmap_insert`` bit-identical (insertion order included), every index of
``pruned_hashmap_lookup`` / ``pruned_array_lookup`` equal (hits, misses -> -1, unpruned tables
-> the index itself), int32 / int64 indices x int32 / int64 tables, the TBE's own layout
(``set_index_remappings``: capacities ``round_up(rows / load_factor, 32)``), long clusters."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
INDEX = (torch.int32, torch.int64)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _remappings(g: torch.Generator, T: int, pruned: float) -> list[torch.Tensor | None]:
    """Per table: raw row -> dense row, -1 pruned (upstream's index_remapping), or None."""
    out: list[torch.Tensor | None] = []
    for t in range(T):
        rows = int(torch.randint(1, 200, (1,), generator=g))
        if t == 1:
            out.append(None)  # an unpruned table: capacity 0, indices pass through
            continue
        kept = torch.rand(rows, generator=g) >= pruned
        dense = torch.cumsum(kept.long(), 0) - 1
        out.append(torch.where(kept, dense, -1))
    return out


def _hash_layout(
    remap: list[torch.Tensor | None], load: float, idx_dtype: torch.dtype, ht_dtype: torch.dtype
) -> tuple[torch.Tensor, ...]:
    """The insert's arguments as upstream's set_index_remappings builds them (B = 1)."""
    rows = [m.numel() if m is not None else 5 for m in remap]
    caps = [
        _round_up(int(r / load), 32) if m is not None else 0
        for m, r in zip(remap, rows, strict=True)
    ]
    hto = torch.tensor([0, *torch.tensor(caps).cumsum(0).tolist()])
    table = torch.full((sum(caps), 2), -1, dtype=ht_dtype)
    merged = [m if m is not None else torch.arange(r) for m, r in zip(remap, rows, strict=True)]
    dense = torch.cat(merged).to(idx_dtype)
    indices = torch.cat([torch.arange(r) for r in rows]).to(idx_dtype)
    offsets = torch.tensor([0, *torch.tensor(rows).cumsum(0).tolist()]).to(idx_dtype)
    return indices, dense, offsets, table, hto


def _batch(g: torch.Generator, rows: list[int], B: int, dtype: torch.dtype, spread: int = 0):
    """T * B bags of raw indices in [-spread, rows + spread) per table (misses when spread)."""
    lengths = torch.randint(0, 7, (len(rows) * B,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    table = torch.arange(len(rows)).repeat_interleave(B).repeat_interleave(lengths)
    hi = torch.tensor(rows)[table] + 2 * spread
    idx = (torch.rand(table.numel(), generator=g) * hi).long() - spread
    return idx.to(dtype), offsets.to(dtype)


def _on(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(NPU) for t in ts]


@pytest.mark.parametrize("idx_dtype", INDEX)
@pytest.mark.parametrize("ht_dtype", INDEX)
@pytest.mark.parametrize("load", [0.5, 0.8, 1.0])
def test_insert_then_lookup_equal_upstream(
    idx_dtype: torch.dtype, ht_dtype: torch.dtype, load: float
) -> None:
    g = torch.Generator().manual_seed(int(load * 10) + 7 * (idx_dtype == torch.int64))
    remap = _remappings(g, 3, pruned=0.3)
    indices, dense, offsets, table, hto = _hash_layout(remap, load, idx_dtype, ht_dtype)
    ours = table.clone().to(NPU)
    F.pruned_hashmap_insert(indices, dense, offsets, table, hto)
    F.pruned_hashmap_insert(*_on(indices, dense, offsets), ours, hto.to(NPU))
    assert torch.equal(ours.cpu(), table)  # every slot, so the insertion order too
    rows = [m.numel() if m is not None else 5 for m in remap]
    for B, spread in ((1, 0), (4, 0), (3, 50)):
        if load == 1.0 and spread:
            continue  # upstream probes for ever for a miss in a full table (ours: -1, below)
        q, qo = _batch(g, rows, B, idx_dtype, spread)
        want = F.pruned_hashmap_lookup(q, qo, table, hto)
        got = F.pruned_hashmap_lookup(*_on(q, qo), ours, hto.to(NPU))
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)


@pytest.mark.parametrize("idx_dtype", INDEX)
def test_insert_order_duplicates_prefilled_and_wide_keys(idx_dtype: torch.dtype) -> None:
    """Duplicate keys (the last value wins), -1 dense (skipped), a second insert into a filled
    table, negative keys and (int64) keys past 2**32: the table and lookups as upstream's."""
    g = torch.Generator().manual_seed(3)
    big = 2**40 if idx_dtype == torch.int64 else 2**30
    keys = torch.cat([torch.randint(-5, 40, (60,), generator=g), torch.tensor([big, -big, 7])])
    vals = torch.randint(-1, 9, (keys.numel(),), generator=g)
    offsets = torch.tensor([0, 20, 40, 63]).to(idx_dtype)  # T = 3, B = 1
    hto = torch.tensor([0, 64, 64, 160])
    table = torch.full((160, 2), -1, dtype=torch.int64)
    ours = table.clone().to(NPU)
    args = (keys.to(idx_dtype), vals.to(idx_dtype), offsets)
    for step in range(2):
        F.pruned_hashmap_insert(*args, table, hto)
        F.pruned_hashmap_insert(*_on(*args), ours, hto.to(NPU))
        assert torch.equal(ours.cpu(), table), step
        args = (args[0], (args[1] + 3) % 11 - 1, offsets)  # new values for the same keys
    q = torch.cat([keys, torch.randint(-50, 100, (40,), generator=g)]).to(idx_dtype)
    qo = torch.tensor([0, 30, 60, q.numel()]).to(idx_dtype)
    want = F.pruned_hashmap_lookup(q, qo, table, hto)
    assert torch.equal(F.pruned_hashmap_lookup(*_on(q, qo), ours, hto.to(NPU)).cpu(), want)


def test_long_cluster_and_hand_built_tables() -> None:
    """A table whose keys all hash near one slot (a long run), and a hand-built table with an
    empty slot inside a run (upstream stops there): every probe length as upstream's."""
    cap = 64
    table = torch.full((cap, 2), -1, dtype=torch.int32)
    table[5:50, 0] = torch.arange(1000, 1045, dtype=torch.int32)  # keys far from their homes
    table[5:50, 1] = torch.arange(45, dtype=torch.int32)
    table[20] = -1  # an empty slot inside the run
    hto = torch.tensor([0, cap])
    q = torch.cat([torch.arange(990, 1060), torch.tensor([-1, 0, 2**31 - 1])]).int()
    qo = torch.tensor([0, q.numel()], dtype=torch.int32)
    want = F.pruned_hashmap_lookup(q, qo, table, hto)
    got = F.pruned_hashmap_lookup(*_on(q, qo, table, hto))
    assert torch.equal(got.cpu(), want)


def test_full_table_miss_is_minus_one() -> None:
    """A full table (load factor 1) and a key it lacks: upstream probes for ever; ours -1, and
    every stored key is found (checked against the table itself, not upstream)."""
    keys = torch.arange(32, dtype=torch.int32) * 7
    table = torch.full((32, 2), -1, dtype=torch.int32)
    offsets = torch.tensor([0, 32], dtype=torch.int32)
    hto = torch.tensor([0, 32])
    F.pruned_hashmap_insert(keys, keys + 1, offsets, table, hto)
    assert (table[:, 0] != -1).all()
    q = torch.cat([keys, torch.tensor([5, 1000], dtype=torch.int32)])
    got = F.pruned_hashmap_lookup(*_on(q, torch.tensor([0, 34], dtype=torch.int32), table, hto))
    assert got.cpu().tolist() == (keys + 1).tolist() + [-1, -1]


@pytest.mark.parametrize("idx_dtype", INDEX)
@pytest.mark.parametrize("remap_dtype", INDEX)
def test_array_lookup_equal_upstream(idx_dtype: torch.dtype, remap_dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(11)
    remap = _remappings(g, 4, pruned=0.4)
    rows = [m.numel() if m is not None else 9 for m in remap]
    lens = [m.numel() if m is not None else 0 for m in remap]
    ro = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()])
    flat = torch.cat([m for m in remap if m is not None]).to(remap_dtype)
    for B in (1, 5):
        q, qo = _batch(g, rows, B, idx_dtype)
        want = F.pruned_array_lookup(q, qo, flat, ro)
        got = F.pruned_array_lookup(*_on(q, qo, flat, ro))
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)


def test_shapes_strides_and_empty() -> None:
    """2-D and non-contiguous indices (read in logical order, the indices' shape back), empty
    indices and an empty table (every table unpruned): as upstream on contiguous copies."""
    table = torch.full((32, 2), -1, dtype=torch.int64)
    hto = torch.tensor([0, 32, 32])
    F.pruned_hashmap_insert(
        torch.arange(10), torch.arange(10) * 2, torch.tensor([0, 10, 10]), table, hto
    )
    q = torch.arange(24).view(4, 6).t()  # non-contiguous, 2-D
    qo = torch.tensor([0, 12, 24])
    want = F.pruned_hashmap_lookup(q.contiguous(), qo, table, hto)
    got = F.pruned_hashmap_lookup(*_on(q, qo, table, hto))
    assert got.shape == want.shape and torch.equal(got.cpu(), want)
    remap = torch.arange(24) - 3
    ro = torch.tensor([0, 24, 24])
    want = F.pruned_array_lookup(q.contiguous(), qo, remap, ro)
    assert torch.equal(F.pruned_array_lookup(*_on(q, qo, remap, ro)).cpu(), want)
    e = torch.zeros(0, dtype=torch.int64)
    z = torch.zeros(3, dtype=torch.int64)
    assert F.pruned_hashmap_lookup(*_on(e, z, table, hto)).numel() == 0
    assert F.pruned_array_lookup(*_on(e, z, remap, ro)).numel() == 0
    none = torch.zeros(0, 2, dtype=torch.int64)
    want = F.pruned_hashmap_lookup(q.contiguous(), qo, none, torch.zeros(3, dtype=torch.int64))
    got = F.pruned_hashmap_lookup(*_on(q, qo, none, torch.zeros(3, dtype=torch.int64)))
    assert torch.equal(got.cpu(), want)
    fbgemm_npu.check()  # nothing was refused
