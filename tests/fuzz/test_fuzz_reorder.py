"""Hostile-input fuzz of the reorder family (fbgemm_npu/native/fbgemm/reorder/).

Valid batches (``conformance/specs/fbgemm/reorder/inputs.py``: empty requests, broadcast,
``max_batch_size``, int32 / int64 offsets, every value dtype upstream takes) in every layout
equal upstream's CPU kernels; a non-tensor, a refused dtype, a wrong offsets count, a tensor on
another device, broken offsets or batch offsets (decreasing, negative, past the end, not from
zero, int32-wrapped, float) and sizes that cannot be allocated get a clear error naming the op
and the argument.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.specs.fbgemm.reorder.inputs import Batch, make_batch, split_by_request
from fbgemm_npu.testing.fuzz import Case, On, fuzz_test
from fbgemm_npu.testing.fuzz_strategies import bad_offsets, in_layout, not_a_tensor, other_dtype

OPS = ("lengths", "indices", "sequence", "cat")
VALUES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TARGET = {
    "lengths": "fbgemm::reorder_batched_ad_lengths",
    "indices": "fbgemm::reorder_batched_ad_indices",
    "sequence": "fbgemm::reorder_batched_sequence_embeddings",
    "cat": "fbgemm::cat_reorder_batched_ad_indices",
}


def _batch(data: Any, which: str) -> Batch:
    nbs = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=6), label="ads")
    nbs[0] = max(nbs[0], 1)
    broadcast = which != "sequence" and data.draw(st.booleans(), label="broadcast")
    padded = which in ("lengths", "cat") and not (which == "lengths" and broadcast)
    mbs = sum(nbs) + data.draw(st.integers(1, 3)) if padded and data.draw(st.booleans()) else 0
    return make_batch(
        nbs,
        data.draw(st.integers(1, 4), label="tables"),
        broadcast,
        seed=data.draw(st.integers(0, 2**16), label="seed"),
        offsets_dtype=data.draw(st.sampled_from((torch.int32, torch.int64))),
        values_dtype=data.draw(st.sampled_from(FLOATS if which == "sequence" else VALUES)),
        dim=data.draw(st.integers(1, 3)) if which == "sequence" else 0,
        max_batch_size=mbs,
    )


def _args(which: str, b: Batch) -> dict[str, Any]:
    """The call's arguments by name (CPU tensors)."""
    bo = b.batch_offsets
    if which == "lengths":
        return {
            "cat_ad_lengths": b.lengths.to(b.values.dtype),
            "batch_offsets": bo.to(b.offsets.dtype),
            "num_ads_in_batch": b.num_ads,
            "broadcast_lengths": b.broadcast,
            "max_batch_size": b.max_batch_size,
        }
    if which == "sequence":
        return {
            "cat_sequence_embeddings_offsets": b.offsets,
            "cat_sequence_embeddings": b.values,
            "reordered_cat_sequence_embeddings_offsets": b.reordered,
            "batch_offsets": bo.to(b.offsets.dtype),
            "num_items_in_batch": b.num_ads,
        }
    args: dict[str, Any] = {
        "cat_ad_offsets": b.offsets,
        "cat_ad_indices": b.values,
        "reordered_cat_ad_offsets": b.reordered,
        "batch_offsets": bo,
        "num_ads_in_batch": b.num_ads,
        "broadcast_indices": b.broadcast,
    }
    if which == "indices":
        return {**args, "num_indices_after_broadcast": b.total if b.broadcast else -1}
    return {
        **args,
        "cat_ad_indices": split_by_request(b),
        "total_num_indices": b.total,
        "pinned_memory": False,
        "max_batch_size": b.max_batch_size,
    }


def _case(which: str, args: dict[str, Any], **kw: Any) -> Case:
    return Case(TARGET[which], (), args, **kw)


@fuzz_test("reorder")
def test_fuzz_reorder_valid(data: Any) -> Case:
    """Every op on a valid batch, its tensors in drawn layouts."""
    which = data.draw(st.sampled_from(OPS), label="op")
    args = _args(which, _batch(data, which))
    for name, value in args.items():
        if isinstance(value, torch.Tensor):
            args[name] = in_layout(data, value)
        elif isinstance(value, list):
            args[name] = [in_layout(data, t) for t in value]
    return _case(which, args, label=f"valid {which}")


TENSOR_ARGS = {
    "lengths": ("cat_ad_lengths", "batch_offsets"),
    "indices": ("cat_ad_offsets", "cat_ad_indices", "reordered_cat_ad_offsets", "batch_offsets"),
    "sequence": (
        "cat_sequence_embeddings_offsets",
        "cat_sequence_embeddings",
        "reordered_cat_sequence_embeddings_offsets",
        "batch_offsets",
    ),
    "cat": ("cat_ad_offsets", "reordered_cat_ad_offsets", "batch_offsets"),
}
INDEX = (torch.int32, torch.int64)
ALLOWED = {  # the dtypes an argument may have, its partners' unchanged
    ("lengths", "cat_ad_lengths"): VALUES,
    ("lengths", "batch_offsets"): INDEX,
    ("indices", "cat_ad_indices"): VALUES,
    ("sequence", "cat_sequence_embeddings"): (*FLOATS, torch.uint8),  # uint8: as upstream CUDA
}


@fuzz_test("reorder")
def test_fuzz_reorder_invalid(data: Any) -> Case:
    """A non-tensor, a refused dtype, a short offsets tensor, a tensor on another device."""
    which = data.draw(st.sampled_from(OPS), label="op")
    b = _batch(data, which)
    args = _args(which, b)
    name = data.draw(st.sampled_from(TENSOR_ARGS[which]), label="argument")
    how = data.draw(st.sampled_from(("object", "dtype", "short", "device")), label="how")
    t = args[name]
    names = (*TENSOR_ARGS[which], "cat_ad_indices")  # a partner may be the one named
    expect = "error"
    if how == "object":
        args[name] = not_a_tensor(data)
    elif how == "dtype":
        # an index tensor's dtype: anything but the one its partners have
        args[name] = t.to(other_dtype(data, ALLOWED.get((which, name), (t.dtype,))))
    elif how == "short" and name in ("cat_sequence_embeddings", "cat_ad_indices"):
        args[name] = t[None]  # 3-D embeddings are refused; 2-D indices are read flat
        expect = "error" if name == "cat_sequence_embeddings" else "equal_or_error"
    elif how == "short":
        args[name] = t[:-1]
        # fewer lengths can be fewer tables (NA = 1, or B = 1 broadcast), fewer batch offsets
        # a batch without its last, empty requests: upstream's result
        expect = "equal_or_error" if name in ("cat_ad_lengths", "batch_offsets") else "error"
    else:
        args[name] = On(t, data.draw(st.sampled_from(("cpu", "npu:1")), label="device"))
    return _case(which, args, expect=expect, names=names, label=how)


@fuzz_test("reorder")
def test_fuzz_reorder_bad_data(data: Any) -> Case:
    """Broken batch offsets or reordered offsets (queued checks), or an output too large."""
    which = data.draw(st.sampled_from(OPS), label="op")
    b = _batch(data, which)
    args = _args(which, b)
    what = data.draw(st.sampled_from(("batch_offsets", "reordered", "huge")), label="what")
    if what == "huge":
        if which == "lengths" and not b.broadcast:
            args["max_batch_size"] = 2**61
            return _case(which, args, expect="error", names=("max_batch_size",), label=what)
        if which == "cat":
            args["total_num_indices"] = 2**61
            return _case(which, args, expect="error", names=("total_num_indices",), label=what)
        what = "batch_offsets"
    if which != "lengths" and b.total == 0:
        # an empty output reads no data, ours and upstream's (whose reads of broken offsets
        # would crash the oracle): the batch as drawn
        return _case(which, args, label="empty output")
    expect = "error"
    if what == "reordered" and which != "lengths" and b.total > 0:
        name = next(n for n in args if n.startswith("reordered"))
        how, args[name] = bad_offsets(data, args[name], b.total)
        return _case(which, args, expect=expect, names=(name,), label=f"reordered {how}")
    how, args["batch_offsets"] = bad_offsets(data, args["batch_offsets"], b.num_ads)
    return _case(which, args, expect=expect, names=("batch_offsets",), label=f"bo {how}")
