"""Hostile-input fuzz of the pruning family (fbgemm_npu/native/fbgemm/pruning/): the IntNBit TBE's
row-pruning remaps ``fbgemm::pruned_hashmap_insert``, ``fbgemm::pruned_hashmap_lookup`` and
``fbgemm::pruned_array_lookup``.

Valid input -- tables laid out as upstream's ``set_index_remappings`` lays them (capacities
``round_up(rows / load, 32)``, load factors up to 0.8 so every table keeps an empty slot and
upstream's probing ends; unpruned tables of capacity 0), int32 / int64 indices x int32 / int64
tables, B bags per table with empty bags, raw indices inside and outside the remapped rows
(misses), any memory layout -- equals upstream's CPU kernels: the whole table after an insert,
every remapped index after a lookup.  Invalid input -- offsets broken every way or of the
wrong length, B = 0, indices outside a remapping array, wrong dtypes and ranks, ``dense_indices``
of the wrong size, a full table, non-tensors, tensors on another device -- gets an error naming
the op and the argument.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import (
    bad_offsets,
    in_layout,
    lengths_to_offsets,
    not_a_tensor,
    other_dtype,
    seeded,
)

INSERT = "fbgemm::pruned_hashmap_insert"
HASH = "fbgemm::pruned_hashmap_lookup"
ARRAY = "fbgemm::pruned_array_lookup"
INDEX = (torch.int32, torch.int64)
LAYOUTS = ("contiguous", "strided", "expanded", "offset")
F = torch.ops.fbgemm


def _remaps(data: Any) -> list[torch.Tensor | None]:
    """Per table: raw row -> dense row or -1 (pruned), or None (an unpruned table)."""
    gen = seeded(data)
    out: list[torch.Tensor | None] = []
    for _ in range(data.draw(st.integers(1, 3), label="tables")):
        if data.draw(st.integers(0, 3), label="unpruned") == 0:
            out.append(None)
            continue
        rows = data.draw(st.integers(1, 40), label="rows")
        kept = torch.rand(rows, generator=gen) >= data.draw(st.sampled_from((0.0, 0.3, 0.9)))
        out.append(torch.where(kept, torch.cumsum(kept.long(), 0) - 1, -1))
    return out


def _rows(remap: list[torch.Tensor | None]) -> list[int]:
    return [5 if m is None else m.numel() for m in remap]


def _hash_layout(data: Any, remap: list, idx: torch.dtype, ht: torch.dtype) -> tuple:
    """The insert's arguments as set_index_remappings builds them (one bag per table)."""
    load = data.draw(st.sampled_from((0.3, 0.5, 0.8)), label="load factor")
    rows = _rows(remap)
    pairs = list(zip(remap, rows, strict=True))
    caps = [0 if m is None else -(-int(r / load) // 32) * 32 for m, r in pairs]
    hto = lengths_to_offsets(torch.tensor(caps))
    table = torch.full((sum(caps), 2), -1, dtype=ht)
    dense = torch.cat([torch.arange(r) if m is None else m for m, r in pairs])
    keys = torch.cat([torch.arange(r) for r in rows])
    return keys.to(idx), dense.to(idx), lengths_to_offsets(torch.tensor(rows), idx), table, hto


def _batch(data: Any, rows: list[int], dtype: torch.dtype, spread: int) -> tuple:
    """B (1 to 3) bags per table of 0 to 5 raw indices in ``[-spread, rows + spread)``."""
    gen = seeded(data)
    B = data.draw(st.integers(1, 3), label="B")
    lengths = torch.randint(0, 6, (len(rows) * B,), generator=gen)
    hi = torch.tensor(rows).repeat_interleave(B).repeat_interleave(lengths) + 2 * spread
    idx = (torch.rand(hi.numel(), generator=gen) * hi).long() - spread
    return idx.to(dtype), lengths_to_offsets(lengths, dtype), B


def _filled(data: Any, remap: list, idx: torch.dtype, ht: torch.dtype) -> tuple:
    """A hash table filled by upstream's CPU insert, and its table offsets."""
    keys, dense, offsets, table, hto = _hash_layout(data, remap, idx, ht)
    F.pruned_hashmap_insert(keys, dense, offsets, table, hto)
    return table, hto


def _array(remap: list) -> tuple[torch.Tensor, torch.Tensor]:
    sizes = [0 if m is None else m.numel() for m in remap]
    maps = [m for m in remap if m is not None]
    array = torch.cat(maps) if maps else torch.zeros(0, dtype=torch.int64)
    return array, lengths_to_offsets(torch.tensor(sizes))


@fuzz_test("pruning")
def test_fuzz_pruning_insert(data: Any) -> Case:
    """The insert into an empty table (the TBE's) or into one already filled (new values)."""
    remap = _remaps(data)
    idx = data.draw(st.sampled_from(INDEX), label="index dtype")
    ht = data.draw(st.sampled_from(INDEX), label="table dtype")
    keys, dense, offsets, table, hto = _hash_layout(data, remap, idx, ht)
    expect, label = "equal", f"insert {idx} {ht}"
    if data.draw(st.booleans(), label="prefilled"):
        F.pruned_hashmap_insert(keys, dense, offsets, table, hto)
        dense = torch.where(dense >= 0, (dense + 3) % 11, dense)
        # a key already in the table counts as taking an empty slot (insert.py: the stated
        # over-count that keeps upstream's probing from running for ever): a refusal naming
        # 'hash_table' where the empty slots are fewer than the keys, else upstream's table
        expect, label = "equal_or_error", "insert prefilled"
    keys, dense = in_layout(data, keys, LAYOUTS), in_layout(data, dense, LAYOUTS)
    table = in_layout(data, table, ("contiguous", "offset"))
    return Case(INSERT, (keys, dense, offsets, table, hto), expect=expect, names=("hash_table",),
                label=label)  # fmt: skip


@fuzz_test("pruning")
def test_fuzz_pruning_lookups(data: Any) -> Case:
    """Either lookup on valid bags: hits, misses (-1), pruned rows, unpruned tables."""
    remap = _remaps(data)
    idx = data.draw(st.sampled_from(INDEX), label="index dtype")
    which = data.draw(st.sampled_from(("hash", "array")), label="op")
    if which == "hash":
        table, hto = _filled(data, remap, idx, data.draw(st.sampled_from(INDEX), label="table"))
        q, qo, _ = _batch(data, _rows(remap), idx, data.draw(st.sampled_from((0, 60))))
        q = in_layout(data, q, LAYOUTS)
        return Case(HASH, (q, in_layout(data, qo, LAYOUTS), table, hto), label=f"hash {idx}")
    array, ro = _array(remap)
    array = array.to(data.draw(st.sampled_from(INDEX), label="array dtype"))
    q, qo, B = _batch(data, _rows(remap), idx, 0)
    q = in_layout(data, q, LAYOUTS)
    return Case(ARRAY, (q, in_layout(data, qo, LAYOUTS), array, ro), label=f"array {idx}")


def _usable(o: torch.Tensor, n: int, T: int, every: bool, inside: bool = False) -> bool:
    """Offsets the ops accept: ``T B + 1`` read, B > 0, from 0 to ``n`` (``inside``: the
    insert's, within ``[0, n]``: it skips the indices outside), the table bounds (``every``:
    all of them) non-decreasing."""
    if o.is_floating_point():
        return False
    v = o.to(torch.int64)
    B = (v.numel() - 1) // T
    if B <= 0:
        return False
    lo, hi = int(v[0]), int(v[T * B])
    if (lo < 0 or hi > n) if inside else (lo != 0 or hi != n):
        return False
    part = v[: T * B + 1] if every else v[: T * B + 1 : B]
    return bool((part[1:] >= part[:-1]).all())


@fuzz_test("pruning")
def test_fuzz_pruning_bad_offsets(data: Any) -> Case:
    """Offsets broken every way, too short, of another dtype than the indices."""
    remap = _remaps(data)
    idx = data.draw(st.sampled_from(INDEX), label="index dtype")
    which = data.draw(st.sampled_from(("hash", "array", "insert")), label="op")
    rows = _rows(remap)
    if which == "insert":
        q, _, qo, table, hto = _hash_layout(data, remap, idx, torch.int64)
        dense, B = q.clone(), 1
    else:
        q, qo, B = _batch(data, rows, idx, 0)
    how = data.draw(st.sampled_from(("broken", "short", "dtype")), label="how")
    if how == "dtype":
        qo = qo.to(torch.int64 if idx == torch.int32 else torch.int32)
    elif how == "short":
        qo = qo[: data.draw(st.integers(0, max(qo.numel() - 1, 0)))]
    else:
        how, qo = bad_offsets(data, qo, q.numel())
        if qo.dtype != q.dtype and not qo.is_floating_point():
            q = q.to(qo.dtype)
            if which == "insert":
                dense = dense.to(qo.dtype)
    T = len(remap)
    if which == "insert":
        args = (q, dense, qo, table, hto)
    elif which == "hash":
        args = (q, qo, *_filled(data, remap, q.dtype, torch.int64))
    else:
        args = (q, qo, *_array(remap))
    ok = how != "dtype" and _usable(qo, q.numel(), T, which != "array", which == "insert")
    op = {"insert": INSERT, "hash": HASH, "array": ARRAY}[which]
    if ok:  # still valid (e.g. only an inner offset of an array lookup broken)
        return Case(op, args, label=f"offsets valid {how}")
    return Case(op, args, expect="error", names=("offsets", "indices"), label=f"offsets {how}")


def _bad(data: Any, which: str) -> tuple[str, tuple, tuple[str, ...]]:
    """One argument of a valid call broken: (label, args, the names an error may give)."""
    remap = _remaps(data)
    rows = _rows(remap)
    q, qo, _ = _batch(data, rows, torch.int64, 0)
    if which == "insert":
        keys, dense, offsets, table, hto = _hash_layout(data, remap, torch.int64, torch.int64)
        args, names = [keys, dense, offsets, table, hto], INSERT_ARGS
    elif which == "hash":
        args, names = [q, qo, *_filled(data, remap, torch.int64, torch.int64)], HASH_ARGS
    else:
        args, names = [q, qo, *_array(remap)], ARRAY_ARGS
    how = data.draw(st.sampled_from(("object", "dtype", "rank", "device", "special")))
    k = data.draw(st.integers(0, len(args) - 1), label="argument")
    if how == "object":
        args[k] = not_a_tensor(data)
    elif how == "dtype":
        allowed = (torch.int64,) if names[k].endswith("offsets") and k >= 2 else INDEX
        args[k] = args[k].to(other_dtype(data, allowed))
    elif how == "rank":
        args[k] = args[k].reshape(1, -1) if args[k].dim() == 1 else args[k].reshape(-1)
    elif how == "device":
        args[k] = On(args[k], data.draw(st.sampled_from(("cpu", "npu:1")), label="device"))
    else:
        label, args, k = _special(data, which, args, rows)
        return label, tuple(args), (names[k],)
    if how == "rank" and names[k] in ("indices", "dense_indices", "index_remappings"):
        return f"rank {names[k]}", tuple(args), ()  # upstream reads them flat
    return f"{how} {names[k]}", tuple(args), (names[k],)


INSERT_ARGS = ("indices", "dense_indices", "offsets", "hash_table", "hash_table_offsets")
HASH_ARGS = ("indices", "offsets", "hash_table", "hash_table_offsets")
ARRAY_ARGS = ("indices", "offsets", "index_remappings", "index_remappings_offsets")


def _special(data: Any, which: str, args: list, rows: list[int]) -> tuple[str, list, int]:
    """The op's own conditions: no table (T = 0); insert: dense_indices' length, a full table;
    hash: a table of one column; array: an index outside a remapped table's rows."""
    if data.draw(st.booleans(), label="no table"):
        args[-1] = torch.zeros(1, dtype=torch.int64)
        return "no table", args, len(args) - 1
    if which == "insert":
        first = args[1][: rows[0]]  # table 0's dense rows; the others get no capacity
        kept = int((first != -1).sum())
        if kept >= 2 and data.draw(st.booleans(), label="full"):
            cap = data.draw(st.integers(1, kept - 1), label="capacity")
            args[3] = torch.full((cap, 2), -1, dtype=torch.int64)
            args[4] = torch.tensor([0, *([cap] * len(rows))])
            return "full table", args, 3
        args[1] = args[1][:-1] if args[1].numel() else torch.zeros(2, dtype=args[1].dtype)
        return "dense length", args, 1
    if which == "hash":
        args[2] = args[2][:, :1]
        return "one column", args, 2
    ro = args[3]
    t = next((t for t in range(len(rows)) if ro[t + 1] > ro[t]), None)
    if t is None or args[0].numel() == 0:  # nothing remapped: a negative table offset
        args[3] = ro.clone()
        args[3][0] = -1
        return "negative table offset", args, 3
    args[0] = args[0].clone()
    args[0][0] = data.draw(st.sampled_from((-1, -7, 10**6)))
    lengths = torch.zeros(len(rows), dtype=torch.int64)
    lengths[t] = args[0].numel()  # one bag per table, every index in the remapped table t
    args[1] = lengths_to_offsets(lengths)
    return "index outside", args, 0


@fuzz_test("pruning")
def test_fuzz_pruning_bad_arguments(data: Any) -> Case:
    """Non-tensors, wrong dtypes and ranks, another device, the ops' own conditions."""
    which = data.draw(st.sampled_from(("insert", "hash", "array")), label="op")
    label, args, names = _bad(data, which)
    op = {"insert": INSERT, "hash": HASH, "array": ARRAY}[which]
    if not names:
        return Case(op, args, expect="equal_or_error", names=("indices",), label=label)
    return Case(op, args, expect="error", names=names, label=label)
