"""Specs for the zch family: ``fbgemm::murmur_hash3`` and the read-only
``fbgemm::zero_collision_hash``.

``murmur_hash3``: one int64 in ``[-2**63, 2**63)`` (small ones and the extremes frequent), ``y``
and ``seed`` any int64.  Drawn only where upstream returns, i.e. the hash is below ``2**63``
(upstream's ``at::scalar_tensor`` raises on the rest; tests/fbgemm/zch/ checks ours there against
the Python-int reference).  One example in ten has a refused shape or dtype (two elements,
int32, 2-D): both raise.

``zero_collision_hash``: 0 to 300 ids drawn from a pool of 12 (int64 or int32; the -1 of an
empty slot included), identities ``[S, 1 or 2]`` (S in 4..40, about half the slots holding pool
ids, int32 or int64), ``max_probe`` 0..12, and each optional path: ``disable_fallback``,
``opt_in_prob`` with reserved slots, chunks (``local_sizes`` / ``offsets`` splitting the rows in
equal parts), ``offsets`` alone (ignored, as upstream).  Always ``readonly=True`` and
``circular_probe=True``: upstream's CPU kernel refuses the rest (tests/fbgemm/zch/ holds that
ours does too, naming the argument).  Oracle: upstream, exact (both outputs; the second is
None).  Budget: the path of the call.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec
from fbgemm_npu.testing.zch_references import murmur_reference

F = torch.ops.fbgemm
I64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _murmur_inputs(draw: st.DrawFn) -> dict[str, object]:
    y, seed = draw(st.one_of(st.just(0), I64)), draw(st.one_of(st.just(0), I64))
    small = st.integers(-1000, 1000)
    x = draw(
        st.one_of(small, I64, st.sampled_from([2**63 - 1, -(2**63)])).filter(
            lambda v: murmur_reference(v, y, seed) >= 0
        )
    )
    t = torch.tensor([x])
    if draw(st.integers(0, 9)) == 9:  # shrinks towards valid inputs
        t = draw(st.sampled_from([t.repeat(2), t.int(), t.view(1, 1)]))
    return {"input": t, "y": y, "seed": seed}


@st.composite
def _zch_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    id_dtype, table_dtype = draw(
        st.sampled_from(
            [(torch.int64, torch.int64), (torch.int32, torch.int32), (torch.int64, torch.int32)]
        )
    )
    pool = torch.cat([torch.randint(-(2**40), 2**40, (11,), generator=g), torch.tensor([-1])])
    if table_dtype == torch.int32:
        pool = torch.fmod(pool, 2**31 - 1)
    rows, n = draw(st.integers(4, 40)), draw(st.integers(0, 300))
    table = torch.full((rows, draw(st.integers(1, 2))), -1, dtype=table_dtype)
    filled = torch.rand(rows, generator=g) < 0.5
    table[filled, 0] = pool[torch.randint(0, 12, (rows,), generator=g)][filled].to(table_dtype)
    ids = pool[torch.randint(0, 12, (n,), generator=g)].to(id_dtype)
    kw: dict[str, Any] = {"max_probe": draw(st.integers(0, 12)), "circular_probe": True}
    kw.update(readonly=True, disable_fallback=draw(st.booleans()))
    parts = draw(st.sampled_from([1, 2, 4]))
    size = rows // parts
    reserved = draw(st.integers(0, 2)) if size > 2 else 0
    if reserved:
        kw.update(opt_in_prob=draw(st.integers(1, 100)), num_reserved_slots=reserved)
    if parts > 1:
        kw["local_sizes"] = torch.full((n,), size, dtype=torch.int64)
        kw["offsets"] = torch.randint(0, parts, (n,), generator=g) * size
    elif draw(st.integers(0, 4)) == 0:
        kw["offsets"] = torch.randint(0, 3, (n,), generator=g)
    return {"input": ids, "identities": table, **kw}


def _zch_budget(**inputs: Any) -> BudgetUse:
    if "local_sizes" in inputs:
        return BudgetUse(path="chunked")
    if inputs["max_probe"] <= 0:
        return BudgetUse(path="no_probe")
    if "opt_in_prob" in inputs:
        return BudgetUse(path="opt_in")
    if inputs["identities"].dtype != inputs["input"].dtype:
        return BudgetUse(path="int32_identities")
    return BudgetUse(path="int32" if inputs["input"].dtype == torch.int32 else None)


SPECS = [
    OpSpec(
        name="murmur_hash3",
        op=lambda input, y, seed: F.murmur_hash3(input, y, seed),  # noqa: A006
        inputs=_murmur_inputs(),
        compare=Compare({}),
        budget=lambda **_: BudgetUse(),
        examples=(
            {"input": torch.tensor([3]), "y": 0, "seed": 0},
            {"input": torch.tensor([-1]), "y": 0, "seed": 0},
            {"input": torch.tensor([3, 4]), "y": 0, "seed": 0},  # both raise
        ),
    ),
    OpSpec(
        name="zero_collision_hash",
        op=lambda **kw: F.zero_collision_hash(**kw),
        inputs=_zch_inputs(),
        compare=Compare({}),
        budget=lambda **kw: _zch_budget(**kw),
    ),
]
