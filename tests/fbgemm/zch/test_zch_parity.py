"""The zch family on npu against upstream's CPU kernels (fbgemm-gpu-cpu): ``murmur_hash3`` (and
an independent Python-int reference of MurmurHash3 where upstream's int64 conversion raises),
the read-only ``zero_collision_hash`` over every argument path (chunks, opt-in, fallback off,
int32 / int64 ids and identities, non-contiguous inputs), and ``create_zch_buffer`` (upstream's
composite, run for ``device='npu'``)."""

from __future__ import annotations

import random

import pytest
import torch

from fbgemm_npu.testing.zch_references import murmur_reference

F = torch.ops.fbgemm
NPU = "npu"
XS = [0, 1, -1, 7, 2**63 - 1, -(2**63), 123456789012345, -987654321]
_RNG = random.Random(0)
XS += [_RNG.randint(-(2**63), 2**63 - 1) for _ in range(40)]
YS = [(0, 0), (3, 7), (-5, 2**40), (2**62, -1)]


@pytest.mark.parametrize("y_seed", YS, ids=str)
def test_murmur_hash3_equals_upstream_and_reference(y_seed: tuple[int, int]) -> None:
    y, seed = y_seed
    compared = 0
    for x in XS:
        got = F.murmur_hash3(torch.tensor([x]).to(NPU), y, seed)
        assert got.device.type == NPU and got.dtype == torch.int64 and got.dim() == 0
        assert int(got.cpu()) == murmur_reference(x, y, seed), x
        try:
            want = F.murmur_hash3(torch.tensor([x]), y, seed)
        except RuntimeError as exc:  # upstream cannot store a hash >= 2**63 in its int64
            assert "overflow" in str(exc)
            assert int(got.cpu()) < 0
            continue
        compared += 1
        assert int(got.cpu()) == int(want)
    assert compared >= 10


def test_murmur_hash3_of_a_strided_element() -> None:
    t = torch.tensor([5, 99, 6]).to(NPU)[2:]
    assert int(F.murmur_hash3(t, 0, 0).cpu()) == int(F.murmur_hash3(torch.tensor([6]), 0, 0))


def _table(rows: int, cols: int, dtype: torch.dtype, pool: torch.Tensor, g: torch.Generator):
    """A buffer as create_zch_buffer makes it, about half its slots holding ids of ``pool``."""
    table = torch.full((rows, cols), -1, dtype=dtype)
    filled = torch.rand(rows, generator=g) < 0.5
    picks = pool[torch.randint(0, pool.numel(), (rows,), generator=g)]
    if dtype == torch.int32:
        picks = torch.fmod(picks, 2**31 - 1)
    table[filled, 0] = picks[filled].to(dtype)
    return table


CASES = {
    # name: (ids dtype, identities dtype, rows, kwargs)
    "int64": (torch.int64, torch.int64, 16, {}),
    "int32 ids and identities": (torch.int32, torch.int32, 16, {}),
    "int64 ids, int32 identities": (torch.int64, torch.int32, 16, {}),
    "no fallback": (torch.int64, torch.int64, 16, {"disable_fallback": True}),
    "opt in": (torch.int64, torch.int64, 16, {"opt_in_prob": 100, "num_reserved_slots": 3}),
    "opt in, no fallback": (
        torch.int64,
        torch.int64,
        20,
        {"opt_in_prob": 40, "num_reserved_slots": 5, "disable_fallback": True},
    ),
    "chunks": (torch.int64, torch.int64, 24, {"chunks": (0, 8, 16)}),
    "chunks, opt in": (
        torch.int32,
        torch.int32,
        24,
        {"chunks": (0, 8, 16), "opt_in_prob": 100, "num_reserved_slots": 2},
    ),
    "offsets without local sizes": (torch.int64, torch.int64, 16, {"offsets_only": True}),
    "no probes": (torch.int64, torch.int64, 16, {"max_probe": 0}),
    "many probes": (torch.int64, torch.int64, 8, {"max_probe": 30}),
    "two columns": (torch.int64, torch.int64, 16, {"cols": 2}),
    "strided ids": (torch.int64, torch.int64, 16, {"strided": True}),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_zero_collision_hash_equals_upstream(name: str, seed: int) -> None:
    id_dtype, table_dtype, rows, kw = CASES[name]
    kw = dict(kw)
    g = torch.Generator().manual_seed(seed)
    pool = torch.randint(-(2**40), 2**40, (12,), generator=g)
    pool = torch.cat([pool, torch.tensor([-1, 0, 2**31 - 1, 2**31 + 5, -(2**31) - 3])])
    if id_dtype == torch.int32:
        pool = torch.fmod(pool, 2**31 - 1)
    table = _table(rows, kw.pop("cols", 1), table_dtype, pool, g)
    n = 200
    ids = pool[torch.randint(0, pool.numel(), (n,), generator=g)].to(id_dtype)
    args = {"max_probe": kw.pop("max_probe", 4), "circular_probe": True, "readonly": True}
    chunks = kw.pop("chunks", None)
    if chunks is not None:  # ids of chunk c probe rows [start_c, start_c + size)
        size = rows // len(chunks)
        which = torch.randint(0, len(chunks), (n,), generator=g)
        args["local_sizes"] = torch.full((n,), size, dtype=torch.int64)
        args["offsets"] = torch.tensor(chunks)[which]
    if kw.pop("offsets_only", False):
        args["offsets"] = torch.randint(0, 5, (n,), generator=g)
    strided = kw.pop("strided", False)
    args.update(kw)
    want, want_evict = F.zero_collision_hash(ids, table.clone(), **args)
    placed = {k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    dev_ids = ids.to(NPU)
    if strided:
        dev_ids = torch.stack([dev_ids, dev_ids], 1).to(NPU)[:, 1]
        assert not dev_ids.is_contiguous()
    dev_table = table.to(NPU)
    got, evict = F.zero_collision_hash(dev_ids, dev_table, **placed)
    assert want_evict is None and evict is None
    assert got.dtype == torch.int64 and got.device.type == NPU
    assert torch.equal(got.cpu(), want)
    assert torch.equal(dev_table.cpu(), table)  # read-only, as upstream's CPU kernel
    if args["max_probe"] > 0 and not kw.get("opt_in_prob") and chunks is None:
        identity = ids.long() if table_dtype == id_dtype else torch.fmod(ids, 2**31 - 1)
        found = (table[want.clamp(min=0), 0].long() == identity) & (want >= 0)
        assert found.any()  # the draw exercises hits, not only fallbacks


def test_zero_collision_hash_of_no_ids_is_empty() -> None:
    table = torch.full((4, 1), -1).to(NPU)
    empty = torch.zeros(0, dtype=torch.int64)
    got, evict = F.zero_collision_hash(empty.to(NPU), table, 4, readonly=True)
    want, _ = F.zero_collision_hash(empty, table.cpu(), 4, readonly=True)
    assert got.shape == want.shape == (0,) and got.dtype == want.dtype and evict is None


@pytest.mark.parametrize("support_evict", [False, True])
@pytest.mark.parametrize("long_type", [False, True])
@pytest.mark.parametrize("size", [0, 5])
def test_create_zch_buffer_on_npu_equals_upstream(
    size: int, support_evict: bool, long_type: bool
) -> None:
    want = F.create_zch_buffer(size, support_evict, None, long_type)
    got = F.create_zch_buffer(size, support_evict, torch.device(NPU), long_type)
    for w, o in zip(want, got, strict=True):
        if w is None:
            assert o is None
            continue
        assert o.device.type == NPU and o.dtype == w.dtype and torch.equal(o.cpu(), w)


def test_huge_max_probe_equals_upstream_capped() -> None:
    """Probing is circular: past the block's slots they repeat, so ours probes min(max_probe,
    block) slots (memory N x that) and equals upstream, which would loop 2**40 times per id."""
    g = torch.Generator().manual_seed(5)
    pool = torch.randint(-(2**40), 2**40, (6,), generator=g)
    table = _table(7, 1, torch.int64, pool, g)
    ids = pool[torch.randint(0, 6, (50,), generator=g)]
    want, _ = F.zero_collision_hash(ids, table, 7, True, readonly=True)
    got, _ = F.zero_collision_hash(ids.to(NPU), table.to(NPU), 2**40, True, readonly=True)
    assert torch.equal(got.cpu(), want)
