"""Spec of ``mxrec::hstu_paged`` (forward only: the op is inference, as in Rec SDK).

Inputs (``inputs.paged_case``): 1-3 sequences with caches of 0-12 rows in pages of 1-5 rows (32
one time in four) handed out shuffled from a shared pool, 0-4 new history rows and 0-3 targets
(or no ``num_target``), GQA (``N_k`` 1-2, ratio 1-2), D 1-8, float32 / float16 / bfloat16,
int32 / int64 metadata; mask_type 0 (group size 1-2 with targets), 2, 3 (a random 0/1 mask); a
bias, alpha and silu_scale one time in two.  One example in eight is invalid (mask_type 1, a
cache of other heads, a bias of the wrong shape): ours must raise, as the CPU call does.
Budget: the op's entry per query tile (``units`` = the tile count of the call), path
``targets`` when ``num_target`` is given.

Oracle: the float64 reference written from Rec SDK's paged golden (``reference.py``).
Tolerances ``|ours - ref| <= atol + rtol |ref|`` as for the other HSTU ops (float32 scores and
matmuls; half precision rounds the scores to the input dtype before ``@ v``, as the golden
does): float32 ``1e-4``, float16 ``1e-2``, bfloat16 ``6e-2``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.mxrec.hstu_paged.inputs import paged_case
from conformance.specs.mxrec.hstu_paged.reference import hstu_paged_reference
from fbgemm_npu.native.mxrec.hstu._attention import tile_rows

OP = "mxrec::hstu_paged"
TOL = {
    torch.float32: Tol(rtol=1e-4, atol=1e-4),
    torch.float16: Tol(rtol=1e-2, atol=1e-2),
    torch.bfloat16: Tol(rtol=6e-2, atol=6e-2),
}


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, object]:
    b = draw(st.integers(1, 3))
    cache = [draw(st.integers(0, 12)) for _ in range(b)]
    new = [draw(st.integers(0, 4)) for _ in range(b)]
    targets = [draw(st.integers(0, 3)) for _ in range(b)] if draw(st.booleans()) else None
    nk, ratio = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    dtype = draw(st.sampled_from(tuple(TOL)))
    kw = paged_case(
        cache, new, targets,
        page_size=32 if draw(st.integers(0, 3)) == 3 else draw(st.integers(1, 5)),
        heads=(nk * ratio, nk), dim=draw(st.integers(1, 8)), dtype=dtype,
        index_dtype=draw(st.sampled_from((torch.int32, torch.int64))),
        seed=draw(st.integers(0, 2**16)), spare_pages=draw(st.integers(0, 2)),
    )  # fmt: skip
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    shape = (b, nk * ratio, kw["max_seq_len"], kw["max_seq_len_k"])
    kw["mask_type"] = draw(st.sampled_from((0, 0, 2, 3)))
    if kw["mask_type"] == 3:
        kw["mask"] = (torch.rand(shape, generator=gen) > 0.3).to(dtype)  # type: ignore[arg-type]
    if targets is not None:
        kw["target_group_size"] = draw(st.integers(1, 2))
    if draw(st.booleans()):
        kw["attn_bias"] = torch.randn(shape, generator=gen).to(dtype)  # type: ignore[arg-type]
        kw["alpha"] = draw(st.sampled_from((1.0, 0.5, 2.0)))
        kw["silu_scale"] = draw(st.sampled_from((0.0, 0.25)))
    if draw(st.integers(0, 7)) == 7:
        kind = draw(st.sampled_from(("triu", "heads", "bias")))
        if kind == "triu":
            kw["mask_type"] = 1
        elif kind == "heads":
            cache_t = kw["kv_cache"]
            kw["kv_cache"] = torch.cat([cache_t, cache_t], 3)  # type: ignore[list-item]
        else:
            kw["attn_bias"] = torch.zeros(b, nk * ratio, 1, 1, dtype=dtype)
    return kw


def _op(**kw: object) -> torch.Tensor:
    return torch.ops.mxrec.hstu_paged(**kw)


def _budget(**kw: object) -> BudgetUse:
    q, off = kw["q"], kw["seq_offset"]
    sq, sk = int(kw["max_seq_len"]), int(kw["max_seq_len_k"])  # type: ignore[arg-type]
    rows = tile_rows(off.numel() - 1, q.size(1), sq, sk)  # type: ignore[union-attr]
    path = "targets" if kw.get("num_target") is not None else None
    return BudgetUse(op=OP, path=path, units=-(-sq // rows))


SPECS = [
    OpSpec(
        name="hstu_paged",
        op=_op,
        inputs=_inputs(),
        compare=Compare(TOL),
        budget=_budget,
        reference=hstu_paged_reference,
    ),
]
