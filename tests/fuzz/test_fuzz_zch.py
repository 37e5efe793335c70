"""Hostile-input fuzz of the zch family (fbgemm_npu/native/fbgemm/zch/).

``murmur_hash3``: any int64 in any layout, any ``y`` / ``seed``, against the Python-int
reference (upstream's CPU kernel raises for hashes of 2**63 or more); anything else a clear
error naming ``input``.  ``zero_collision_hash``: valid read-only calls in every layout (ids
and identities strided, expanded, transposed, offset), every argument path, against upstream's
CPU kernel (identities compared after the call: never written); hostile ones (write mode, bad
dtypes and ranks, objects, other devices, bad chunks, huge ``max_probe``) a clear error naming
the argument, or upstream's result.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import in_layout, not_a_tensor, other_dtype, seeded

MURMUR = "fbgemm::murmur_hash3"
ZCH = "fbgemm::zero_collision_hash"
I64 = st.integers(-(2**63), 2**63 - 1)
RO = {"circular_probe": True, "readonly": True}


@fuzz_test("zch")
def test_fuzz_murmur_hash3(data: Any) -> Case:
    """One int64 (any layout) and any y / seed; or a shape or dtype upstream refuses."""
    x = torch.tensor([data.draw(st.one_of(st.integers(-5, 5), I64), label="x")])
    y, seed = data.draw(I64, label="y"), data.draw(I64, label="seed")
    how = data.draw(st.sampled_from(("valid", "valid", "shape", "dtype")))
    if how == "valid":
        t = in_layout(data, x)
        oracle = "fbgemm_npu.testing.zch_references:murmur_hash3_reference"
        return Case(MURMUR, (t, y, seed), oracle=oracle, label="valid")
    if how == "shape":
        t = data.draw(st.sampled_from([x.repeat(3), x.view(()), x.view(1, 1), x[:0]]))
        return Case(MURMUR, (t, y, seed), expect="error", names=("input",), label=how)
    # not drawn: a non-tensor input (None, a number, a list) carries no dispatch key, so the
    # call reaches upstream's CompositeImplicitAutograd kernel and its words (a TORCH_CHECK on
    # is_cpu), never a kernel of ours; rule 1 leaves that kernel upstream's
    dtype = other_dtype(data, (torch.int64,))
    return Case(MURMUR, (x.to(dtype), y, seed), expect="error", names=("input",), label=how)


def _zch_inputs(data: Any) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    gen = seeded(data)
    id_dtype, table_dtype = data.draw(
        st.sampled_from(
            [(torch.int64, torch.int64), (torch.int32, torch.int32), (torch.int64, torch.int32)]
        ),
        label="dtypes",
    )
    near = data.draw(st.booleans(), label="ids near 2**31")
    low, high = (2**31 - 20, 2**31 + 20) if near and id_dtype == torch.int64 else (-(2**30), 2**30)
    pool = torch.cat([torch.randint(low, high, (9,), generator=gen), torch.tensor([-1, 0])])
    rows, n = data.draw(st.integers(3, 24), label="rows"), data.draw(st.integers(0, 60), label="n")
    table = torch.full((rows, data.draw(st.integers(1, 2), label="cols")), -1)
    filled = torch.rand(rows, generator=gen) < 0.5
    values = pool[torch.randint(0, pool.numel(), (rows,), generator=gen)]
    if table_dtype == torch.int32:
        values = torch.fmod(values, 2**31 - 1)
    table[filled, 0] = values[filled]
    ids = pool[torch.randint(0, pool.numel(), (n,), generator=gen)]
    kw: dict[str, Any] = {**RO, "disable_fallback": data.draw(st.booleans(), label="no fallback")}
    parts = data.draw(st.sampled_from((1, 1, 3)), label="chunks")
    size = rows // parts
    if size > 2 and data.draw(st.booleans(), label="opt in"):
        kw |= {"opt_in_prob": data.draw(st.integers(1, 100)), "num_reserved_slots": 2}
    if parts > 1:
        kw["local_sizes"] = torch.full((n,), size)
        kw["offsets"] = torch.randint(0, parts, (n,), generator=gen) * size
    return ids.to(id_dtype), table.to(table_dtype), kw


@fuzz_test("zch")
def test_fuzz_zero_collision_hash_valid(data: Any) -> Case:
    """Read-only lookups in every layout and argument path, and max_probe up to 2**40."""
    ids, table, kw = _zch_inputs(data)
    ids, table = in_layout(data, ids), in_layout(data, table)
    probe = data.draw(st.sampled_from((0, 1, 4, 9, 40, 2**40)), label="max_probe")
    if probe > 40:  # upstream would loop 2**40 times per id: the capped call is the oracle
        oracle = "fbgemm_npu.testing.zch_references:zero_collision_hash_capped"
        return Case(ZCH, (ids, table, probe), kw, oracle=oracle, label="huge probe")
    return Case(ZCH, (ids, table, probe), kw, label="valid")


@fuzz_test("zch")
def test_fuzz_zero_collision_hash_invalid(data: Any) -> Case:
    """Write mode, dtypes, ranks, objects, devices and bad chunks: a clear error."""
    ids, table, kw = _zch_inputs(data)
    ids = torch.cat([ids, ids.new_tensor([5])])  # one id at least: upstream returns early else
    for name in ("local_sizes", "offsets"):
        if name in kw:
            kw[name] = torch.cat([kw[name], kw[name].new_zeros(1) + (name == "local_sizes")])
    how = data.draw(
        st.sampled_from(
            (
                "write",
                "ids dtype",
                "table dtype",
                "ids rank",
                "table rank",
                "object",
                "device",
                "chunk dtype",
                "chunk count",
                "bad chunk",
                "no rows",
            )
        ),
        label="how",
    )
    names: tuple[str, ...]
    if how == "write":
        arg = data.draw(st.sampled_from(("readonly", "exp_hours", "metadata", "eviction")))
        value = {"readonly": False, "exp_hours": 1, "metadata": table.int(), "eviction": 3}[arg]
        kw["eviction_threshold" if arg == "eviction" else arg] = value
        names = (arg,)
    elif how == "ids dtype":
        ids = ids.to(other_dtype(data, (torch.int32, torch.int64)))
        names = ("input",)
    elif how == "table dtype":
        table = table.to(other_dtype(data, (torch.int32, torch.int64)))
        names = ("identities",)
    elif how == "ids rank":
        ids, names = ids.view(-1, 1), ("input",)
    elif how == "table rank":
        table, names = table[:, 0], ("identities",)
    elif how == "object":
        which = data.draw(st.sampled_from(("input", "identities")))
        names = (which,)
        ids, table = (not_a_tensor(data), table) if which == "input" else (ids, not_a_tensor(data))
    elif how == "device":
        table, names = On(table, data.draw(st.sampled_from(("cpu", "npu:1")))), ("identities",)
    elif how == "chunk dtype":
        n = ids.numel()
        kw |= {"local_sizes": torch.ones(n, dtype=torch.int32), "offsets": torch.zeros(n)}
        names = ("local_sizes",)
    elif how == "chunk count":
        wrong = ids.numel() + 1
        kw |= {"local_sizes": torch.ones(wrong).long(), "offsets": torch.zeros(wrong).long()}
        names = ("local_sizes",)
    elif how == "bad chunk":
        n = ids.numel()
        sizes = torch.full((n,), table.size(0))
        kw |= {"local_sizes": sizes, "offsets": torch.full((n,), data.draw(st.integers(1, 5)))}
        names = ("offsets", "local_sizes")
    else:
        table, names = table[:0], ("identities",)
        kw.pop("local_sizes", None)
    return Case(ZCH, (ids, table, 4), kw, expect="error", names=names, label=how)
