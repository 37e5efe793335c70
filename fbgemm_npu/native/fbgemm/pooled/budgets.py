"""Budgets of the pooled family (see :class:`fbgemm_npu.native.family.Budget`), written once:
the budget tests (``tests/fbgemm/pooled/``), the conformance specs, the docs and ``info`` read
them.

No plan derived from an index tensor's data is kept between calls (a memo keyed on the tensor's
identity and version counter went stale after writes through ``.data`` or the storage, see
``_utils.py``): every call derives and checks its plan.  Paths: ``"one input"`` / ``"one
output"``, where the regroup needs no ``cat`` / ``split`` (fewer inputs or groups than the main
path's 2 and 3), joined to the others by ``" + "``; ``"backward"``, the gradient's call.
``path_checks``: the data checks of a path where they differ from ``checks`` (none where the plan
is not derived on the device).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

__all__ = ["BUDGETS"]

# The plan (arange, searchsorted, 2 sorts, index_select) and the gather, every call (until the
# plan memo was removed, a module passing the same index tensors again paid the gather alone, 1).
# The data check (permute_list a permutation, cut points non-negative and non-decreasing: three
# comparisons into one bool buffer, all, _assert_async; fewer for 1 or 2 blocks) makes a call 11.
_PERMUTE = Budget(
    6,
    checks=5,
    paths={"one block": 6, "two blocks": 6},
    path_checks={"one block": 3, "two blocks": 4},
    note="With the data check a call costs 11, over the catalogue's 6: ATen has no op "
    "that checks a permutation in fewer launches; a fused kernel would.",
)

# Every call: the plan derived on the device (9: upload the table, clamp ids, index_select,
# starts, start difference, repeat_interleave, arange, index_select, add) and the gather (cat,
# index_select, split).  The data check: ends, cumsum, 4 comparisons, all, _assert_async.  Until
# the plan memo was removed, a second call with the same permutes cost the gather alone (3) and
# permutes from our kt_regroup_arguments an upload of their host rows (4); both could go stale.
_MULTI_NOTE = (
    "ATen needs 9 ops to turn the rows of permutes into a column index on the device (a fused "
    "kernel would read the rows directly), every call: a plan kept beside the permutes tensor "
    "(torchrec's KTRegroupAsDict holds it) can go stale through writes its version counter "
    "misses (.data, the storage)."
)
# Inputs to move: 1 copy per input not on the target, and 1 cat / add per input.  Ceilings: the
# count depends on where the inputs lie.  all_to_one_device: 1 copy per input wherever it lies
# (was a ceiling: inputs already on the target were returned as they are, aliasing an input,
# which AOTAutograd refuses for a custom op whose schema declares no alias).
_CROSS_NOTE = "a ceiling: inputs already on the target device cost less"

BUDGETS: dict[str, Budget] = {
    "fbgemm::permute_pooled_embs": _PERMUTE,
    "fbgemm::permute_pooled_embs_split": _PERMUTE,
    # The backward is the non-autograd permute with the inverse lists: its budget.
    "fbgemm::permute_pooled_embs_auto_grad": _PERMUTE,
    "fbgemm::permute_pooled_embs_auto_grad_split": _PERMUTE,
    "fbgemm::permute_multi_embedding": Budget(
        12,
        checks=8,
        paths={
            "one input": 11,
            "one output": 11,
            "one input + one output": 10,
            # torchrec's sequence: kt_regroup_arguments (3 uploads), then the call (12); was 7
            # while the call took the host rows kt_regroup_arguments kept beside permutes
            "after kt_regroup_arguments": 15,
            "after kt_regroup_arguments + one input": 14,
            "after kt_regroup_arguments + one output": 14,
            "after kt_regroup_arguments + one input + one output": 13,
            "backward": 4,  # the scatter: cat, zeros, index_add, split
        },
        path_checks={"backward": 0},  # the forward's plan, saved: nothing derived, no check
        target=6,
        note=_MULTI_NOTE,
    ),
    # As permute_multi_embedding; reverse scatters (cat, zeros, index_add, split) instead.
    "fbgemm::permute_multi_embedding_function": Budget(
        12, checks=8, paths={"reverse": 13}, target=6, note=_MULTI_NOTE
    ),
    "fbgemm::kt_regroup_arguments": Budget(3),  # one upload per tensor
    # The plan made on the host: upload it, cat, index_select, split; the backward: cat, zeros,
    # index_add, split.
    "fbgemm::regroup_keyed_tensor": Budget(
        4, paths={"one input": 3, "one output": 3, "one input + one output": 2, "backward": 4}
    ),
    "fbgemm::merge_pooled_embeddings": Budget(2, per="input", note=_CROSS_NOTE),
    "fbgemm::all_to_one_device": Budget(1, per="input"),
    "fbgemm::sum_reduce_to_one": Budget(2, per="input", note=_CROSS_NOTE),
}
