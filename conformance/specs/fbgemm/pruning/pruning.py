"""Specs for the IntNBit TBE's row-pruning ops: ``pruned_hashmap_insert`` (the table after the
insert), ``pruned_hashmap_lookup`` and ``pruned_array_lookup`` (every index).

Inputs: 1 to 4 tables (one in three unpruned: capacity 0 / no remapping), B in 1..4, rows in
1..150, a load factor of 0.5 or 0.75 (capacities ``round_up(rows / load, 32)`` as upstream's
``set_index_remappings``), 30 % of the rows pruned (-1); raw keys in ``[-2, rows - 2)`` (negative
keys too), int32 / int64 indices x int32 / int64 tables.  Lookups: queries in ``[-5, rows + 5)``
(hits, misses, pruned rows).  Not drawn: a full table (upstream probes for ever on a miss or a
new key; ours answers -1 / refuses: tests/fbgemm/pruning/), offsets that do not cover the
indices (upstream leaves outputs unwritten; ours refuses).  Oracle: upstream, exact.  Budget:
the op's entry; paths by the dtypes: ``int64`` (int64 indices and table), the hash lookup's
``int32_table``, the array lookup's ``one_cast``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec

F = torch.ops.fbgemm
INDEX = (torch.int32, torch.int64)


def _round_up(x: int) -> int:
    return (x + 31) // 32 * 32


def _layout(draw: st.DrawFn) -> dict[str, object]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    T, B = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    load = draw(st.sampled_from((0.5, 0.75)))
    rows = [int(torch.randint(1, 150, (1,), generator=g)) for _ in range(T)]
    pruned = [t % 3 != 1 for t in range(T)]
    return {"g": g, "T": T, "B": B, "rows": rows, "pruned": pruned, "load": load}


def _bags(
    g: torch.Generator, rows: list[int], B: int, lo: int, hi: int
) -> tuple[torch.Tensor, ...]:
    lengths = torch.randint(0, 6, (len(rows) * B,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    table = torch.arange(len(rows)).repeat_interleave(B).repeat_interleave(lengths)
    span = torch.tensor(rows)[table] + (hi - lo)
    return (torch.rand(table.numel(), generator=g) * span).long() + lo, offsets


def _insert_inputs(lay: dict, idx: torch.dtype, ht: torch.dtype) -> dict[str, torch.Tensor]:
    g, rows, B = lay["g"], lay["rows"], lay["B"]
    caps = [
        _round_up(int(r / lay["load"])) if p else 0
        for r, p in zip(rows, lay["pruned"], strict=True)
    ]
    keys, offsets = _bags(g, rows, B, -2, -2)  # keys in [-2, rows - 2): at most rows distinct
    dense = torch.randint(0, 1000, (keys.numel(),), generator=g)
    dense[torch.rand(keys.numel(), generator=g) < 0.3] = -1
    return {
        "indices": keys.to(idx),
        "dense_indices": dense.to(idx),
        "offsets": offsets.to(idx),
        "hash_table": torch.full((sum(caps), 2), -1, dtype=ht),
        "hash_table_offsets": torch.tensor([0, *torch.tensor(caps).cumsum(0).tolist()]),
    }


@st.composite
def _insert(draw: st.DrawFn) -> dict[str, torch.Tensor]:
    lay = _layout(draw)
    return _insert_inputs(lay, draw(st.sampled_from(INDEX)), draw(st.sampled_from(INDEX)))


@st.composite
def _hash_lookup(draw: st.DrawFn) -> dict[str, torch.Tensor]:
    lay = _layout(draw)
    idx = draw(st.sampled_from(INDEX))
    ins = _insert_inputs(lay, idx, draw(st.sampled_from(INDEX)))
    table = ins["hash_table"]
    F.pruned_hashmap_insert(
        ins["indices"], ins["dense_indices"], ins["offsets"], table, ins["hash_table_offsets"]
    )
    q, qo = _bags(lay["g"], lay["rows"], lay["B"], -5, 5)
    return {
        "indices": q.to(idx),
        "offsets": qo.to(idx),
        "hash_table": table,
        "hash_table_offsets": ins["hash_table_offsets"],
    }


@st.composite
def _array_lookup(draw: st.DrawFn) -> dict[str, torch.Tensor]:
    lay = _layout(draw)
    g, rows = lay["g"], lay["rows"]
    idx, remap_dtype = draw(st.sampled_from(INDEX)), draw(st.sampled_from(INDEX))
    lens = [r if p else 0 for r, p in zip(rows, lay["pruned"], strict=True)]
    remap = torch.randint(-1, 500, (sum(lens),), generator=g)
    q, qo = _bags(g, rows, lay["B"], 0, 0)  # in [0, rows): upstream reads past a table otherwise
    return {
        "indices": q.to(idx),
        "offsets": qo.to(idx),
        "index_remappings": remap.to(remap_dtype),
        "index_remappings_offsets": torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()]),
    }


def _insert_op(**kw: torch.Tensor) -> torch.Tensor:
    F.pruned_hashmap_insert(**kw)
    return kw["hash_table"]  # the op's result is the table it wrote


def _path(**kw: torch.Tensor) -> BudgetUse:
    dtypes = (kw["indices"].dtype, kw["hash_table"].dtype)
    paths = {(torch.int32, torch.int32): "int32_table", (torch.int64, torch.int64): "int64"}
    return BudgetUse(path=paths.get(dtypes))


def _array_path(**kw: torch.Tensor) -> BudgetUse:
    casts = (kw["indices"].dtype == torch.int32) + (
        kw["index_remappings"].dtype != kw["indices"].dtype
    )
    return BudgetUse(path={2: None, 1: "one_cast", 0: "int64"}[int(casts)])


def _insert_path(**kw: torch.Tensor) -> BudgetUse:
    wide = kw["indices"].dtype == torch.int64 and kw["hash_table"].dtype == torch.int64
    return BudgetUse(path="int64" if wide else None)


SPECS = [
    OpSpec(
        name="pruned_hashmap_insert",
        op=_insert_op,
        inputs=_insert(),
        compare=Compare({}),
        budget=_insert_path,
    ),
    OpSpec(
        name="pruned_hashmap_lookup",
        op=lambda **kw: F.pruned_hashmap_lookup(**kw),
        inputs=_hash_lookup(),
        compare=Compare({}),
        budget=_path,
    ),
    OpSpec(
        name="pruned_array_lookup",
        op=lambda **kw: F.pruned_array_lookup(**kw),
        inputs=_array_lookup(),
        compare=Compare({}),
        budget=_array_path,
    ),
]
