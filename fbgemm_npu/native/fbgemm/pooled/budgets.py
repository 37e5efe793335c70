"""Budgets of the pooled family (see :class:`fbgemm_npu.native.family.Budget`), written once:
the budget tests (``tests/fbgemm/pooled/``), the conformance specs, the docs and ``info`` read
them.

No plan derived from an index tensor's data is kept between calls (a memo keyed on the tensor's
identity and version counter went stale after writes through ``.data`` or the storage, see
``_utils.py``): every call derives and checks its plan.  What depends on host values only (the
widths' table of ``permute_multi_embedding``, ``regroup_keyed_tensor``'s whole plan) is kept per
layout: the counts are those of a first call with a layout, ``"same layout again"`` those of a
later one.  Paths: ``"one input"`` / ``"one output"``, where the regroup needs no ``cat`` /
``split`` (fewer inputs or groups than the main path's 2 and 3), joined to the others by ``" +
"``; ``"backward"``, the gradient's call.  Every path of every op: no AI-CPU launch and no stall
(docs/hardware.md), int64 index lists included (``permute_pooled_embs`` takes only int64 ones,
``permute_multi_embedding`` only int32 ``permutes``).
``path_checks``: the data checks of a path where they differ from ``checks`` (none where the plan
is not derived on the device).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

__all__ = ["BUDGETS"]

# The plan, every call, all on a 910B's AI Core (docs/hardware.md): the permute's float32 cast,
# its sort, the blocks' segment ids (clamp, int32 index_add, int32 cumsum), the ranks' cast,
# index_select, the keys' sort; then the gather.  Was 6 with 3 AI-CPU launches (searchsorted, two
# int64 sorts); one block: the gather alone (a cached arange).  The data check (the sorted
# permute equal to arange, cut points non-negative and non-decreasing: three comparisons into one
# bool buffer, all, the check itself; fewer for 1 or 2 blocks) makes a call 14.
_PERMUTE = Budget(
    9,
    checks=4,
    ai_cpu=0,
    paths={"one block": 1, "two blocks": 9},
    path_checks={"one block": 1, "two blocks": 3},
    target=6,
    note="ATen has no AI-Core searchsorted nor integer sort on a 910B: the blocks' ids take an "
    "index_add + cumsum (3 launches where searchsorted took 1) and the sorts float32 keys (2 "
    "casts), 3 AI-CPU launches traded for 3 AI-Core ones; no plan can be kept beside the index "
    "lists (a write through .data or the storage would leave it stale), and ATen has no op that "
    "checks a permutation in fewer launches: a fused kernel would do both in one.",
)

# Every call: the plan derived on the device (clamp ids, index_select, starts, start difference,
# segment ids: clamp, index_add, cumsum; index_select, add) and the gather (cat, index_select,
# split), with the table of the widths uploaded (pinned, non-blocking) on the first call with a
# layout (then kept, keyed on host values: path "same layout again"), no AI-CPU launch (was 1:
# repeat_interleave; 2 with the check's int64 cumsum).  The data check: ends, 4 comparisons, all,
# the check itself, and the clamp of the plan into the inputs (memory safety until a deferred
# check is read).
# Until the plan memo was removed, a second call with the same permutes cost the gather alone (3).
_MULTI_NOTE = (
    "ATen needs 9 ops to turn the rows of permutes into a column index on the device (a fused "
    "kernel would read the rows directly), every call: a plan kept beside the permutes tensor "
    "(torchrec's KTRegroupAsDict holds it) can go stale through writes its version counter "
    "misses (.data, the storage).  A later call with the same widths finds their table kept: "
    "one launch fewer."
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
        13,
        checks=7,
        ai_cpu=0,
        paths={
            "same layout again": 12,  # the widths' table kept: no upload
            "one input": 12,
            "one output": 12,
            "one input + one output": 11,
            # torchrec's sequence: kt_regroup_arguments (3 uploads), then the call (13); was 7
            # while the call took the host rows kt_regroup_arguments kept beside permutes
            "after kt_regroup_arguments": 16,
            "after kt_regroup_arguments + one input": 15,
            "after kt_regroup_arguments + one output": 15,
            "after kt_regroup_arguments + one input + one output": 14,
            "backward": 4,  # the scatter: cat, zeros, index_add, split
        },
        path_checks={"backward": 0},  # the forward's plan, saved: nothing derived, no check
        target=6,
        note=_MULTI_NOTE,
    ),
    # As permute_multi_embedding; reverse scatters (cat, zeros, index_add, split) instead.
    "fbgemm::permute_multi_embedding_function": Budget(
        13,
        checks=7,
        ai_cpu=0,
        paths={"same layout again": 12, "reverse": 14},
        target=6,
        note=_MULTI_NOTE,
    ),
    # one pinned, non-blocking upload per tensor (was a blocking one each: 3 stalls)
    "fbgemm::kt_regroup_arguments": Budget(3, ai_cpu=0),
    # The plan made on the host, uploaded (pinned, non-blocking; was a blocking upload every
    # call) on the first call with a layout (keys, lengths, groups, widths: host values) and
    # kept: cat, index_select, split then.  The backward: cat, zeros, index_add, split.
    "fbgemm::regroup_keyed_tensor": Budget(
        4,
        ai_cpu=0,
        paths={
            "same layout again": 3,
            "one input": 3,
            "one output": 3,
            "one input + one output": 2,
            "backward": 4,
        },
    ),
    "fbgemm::merge_pooled_embeddings": Budget(2, per="input", ai_cpu=0, note=_CROSS_NOTE),
    "fbgemm::all_to_one_device": Budget(1, per="input", ai_cpu=0),
    "fbgemm::sum_reduce_to_one": Budget(2, per="input", ai_cpu=0, note=_CROSS_NOTE),
}
