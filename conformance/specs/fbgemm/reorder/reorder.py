"""Specs for the reorder family: ``reorder_batched_ad_lengths``, ``reorder_batched_ad_indices``,
``reorder_batched_sequence_embeddings`` and ``cat_reorder_batched_ad_indices``.

Inputs (``inputs.make_batch``): 1 to 8 requests of 0 to 4 ads (at least one ad), 1 to 5
tables, lengths in [0, 4) (empty slots frequent), request-major or broadcast; offsets int32 /
int64, ``max_batch_size`` 0 or past NA; values of every dtype upstream's CPU kernels take
(indices: float32, float16, bfloat16, int32, int64; embeddings: the three float types, 1 to 4
wide).  One example in ten is a value dtype upstream rejects (float64, int16, bool): ours must
raise too.  Not drawn: inconsistent offsets and batch offsets, where upstream reads or writes
outside its buffers and ours raises at the check (tests/fbgemm/reorder/).  Oracle: upstream,
exact (a gather: no tolerance).  Budget: the op's entry, its ``broadcast_*`` /
``max_batch_size`` path where drawn.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.reorder.inputs import Batch, make_batch, split_by_request

F = torch.ops.fbgemm
INDEX_VALUES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
REFUSED = (torch.float64, torch.int16, torch.bool)
EXACT = Compare({d: Tol(0.0, 0.0) for d in FLOATS})  # a gather copies the values


@st.composite
def _batch(draw: st.DrawFn, broadcast: bool | None, dim: int = 0, padded: bool = False) -> Batch:
    nbs = draw(st.lists(st.integers(0, 4), min_size=1, max_size=8).filter(lambda v: sum(v) > 0))
    bcast = draw(st.booleans()) if broadcast is None else broadcast
    mbs = sum(nbs) + draw(st.integers(1, 3)) if padded and draw(st.booleans()) else 0
    refuse = draw(st.integers(0, 9)) == 9  # shrinks towards valid inputs
    kinds = REFUSED if refuse else FLOATS if dim else INDEX_VALUES
    return make_batch(
        nbs,
        draw(st.integers(1, 5)),
        bcast,
        seed=draw(st.integers(0, 2**16)),
        offsets_dtype=draw(st.sampled_from((torch.int32, torch.int64))),
        values_dtype=draw(st.sampled_from(kinds)),
        dim=draw(st.integers(1, 4)) if dim else 0,
        max_batch_size=mbs,
    )


@st.composite
def _lengths_inputs(draw: st.DrawFn) -> dict[str, object]:
    b = draw(_batch(None, padded=True))
    bo = b.batch_offsets.to(b.offsets.dtype)  # upstream takes int32 or int64 here
    return {
        "cat_ad_lengths": b.lengths.to(b.values.dtype),  # upstream copies float "lengths" too
        "batch_offsets": bo,
        "num_ads_in_batch": b.num_ads,
        "broadcast_lengths": b.broadcast,
        "max_batch_size": b.max_batch_size,
    }


def _lengths_budget(**kw: object) -> BudgetUse:
    if kw["broadcast_lengths"]:
        return BudgetUse(path="broadcast_lengths")
    return BudgetUse(path="max_batch_size" if kw["max_batch_size"] else None)


@st.composite
def _indices_inputs(draw: st.DrawFn) -> dict[str, object]:
    b = draw(_batch(None))
    return {
        "cat_ad_offsets": b.offsets,
        "cat_ad_indices": b.values,
        "reordered_cat_ad_offsets": b.reordered,
        "batch_offsets": b.batch_offsets,
        "num_ads_in_batch": b.num_ads,
        "broadcast_indices": b.broadcast,
        "num_indices_after_broadcast": b.total if b.broadcast else -1,
    }


@st.composite
def _sequence_inputs(draw: st.DrawFn) -> dict[str, object]:
    b = draw(_batch(False, dim=1))
    return {
        "cat_sequence_embeddings_offsets": b.offsets,
        "cat_sequence_embeddings": b.values,
        "reordered_cat_sequence_embeddings_offsets": b.reordered,
        "batch_offsets": b.batch_offsets.to(b.offsets.dtype),
        "num_items_in_batch": b.num_ads,
    }


@st.composite
def _cat_inputs(draw: st.DrawFn) -> dict[str, object]:
    b = draw(_batch(None, padded=True))
    return {
        "cat_ad_offsets": b.offsets,
        "cat_ad_indices": split_by_request(b),
        "reordered_cat_ad_offsets": b.reordered,
        "batch_offsets": b.batch_offsets,
        "num_ads_in_batch": b.num_ads,
        "broadcast_indices": b.broadcast,
        "total_num_indices": b.total,
        "pinned_memory": False,
        "max_batch_size": b.max_batch_size,
    }


def _broadcast_budget(**kw: object) -> BudgetUse:
    paths = [p for p in ("broadcast_indices", "max_batch_size") if kw.get(p)]
    return BudgetUse(path=" + ".join(paths) if paths else None)


def _edge_batches() -> tuple[Batch, ...]:
    return (
        make_batch([1], 1, seed=1),
        make_batch([0, 3, 0], 2, seed=2, max_len=0),  # every slot empty
        make_batch([2, 0, 1], 3, True, seed=3),
        make_batch([4, 4], 2, seed=4, offsets_dtype=torch.int64, max_batch_size=11),
    )


def _call(name: str):  # noqa: ANN202 - a keyword-forwarding lambda
    op = getattr(F, name)
    return lambda **kw: op(**kw)


SPECS = [
    OpSpec(
        name="reorder_batched_ad_lengths",
        op=_call("reorder_batched_ad_lengths"),
        inputs=_lengths_inputs(),
        compare=EXACT,
        budget=_lengths_budget,
        examples=tuple(
            {
                "cat_ad_lengths": b.lengths,
                "batch_offsets": b.batch_offsets,
                "num_ads_in_batch": b.num_ads,
                "broadcast_lengths": b.broadcast,
                "max_batch_size": b.max_batch_size,
            }
            for b in _edge_batches()
        ),
    ),
    OpSpec(
        name="reorder_batched_ad_indices",
        op=_call("reorder_batched_ad_indices"),
        inputs=_indices_inputs(),
        compare=EXACT,
        budget=_broadcast_budget,
        examples=tuple(
            {
                "cat_ad_offsets": b.offsets,
                "cat_ad_indices": b.values,
                "reordered_cat_ad_offsets": b.reordered,
                "batch_offsets": b.batch_offsets,
                "num_ads_in_batch": b.num_ads,
                "broadcast_indices": b.broadcast,
                "num_indices_after_broadcast": b.total if b.broadcast else -1,
            }
            for b in _edge_batches()[:3]
        ),
    ),
    OpSpec(
        name="reorder_batched_sequence_embeddings",
        op=_call("reorder_batched_sequence_embeddings"),
        inputs=_sequence_inputs(),
        compare=EXACT,
    ),
    OpSpec(
        name="cat_reorder_batched_ad_indices",
        op=_call("cat_reorder_batched_ad_indices"),
        inputs=_cat_inputs(),
        compare=EXACT,
        budget=_broadcast_budget,
        examples=tuple(
            {
                "cat_ad_offsets": b.offsets,
                "cat_ad_indices": split_by_request(b),
                "reordered_cat_ad_offsets": b.reordered,
                "batch_offsets": b.batch_offsets,
                "num_ads_in_batch": b.num_ads,
                "broadcast_indices": b.broadcast,
                "total_num_indices": b.total,
                "pinned_memory": False,
                "max_batch_size": b.max_batch_size,
            }
            for b in _edge_batches()
        ),
    ),
]
