"""Budgets of the tbe family, one entry per op it registers (see fbgemm_npu.native.family.Budget),
each path measured by ``tests/fbgemm/tbe/test_tbe_budgets.py`` (the pt2 lookups),
``tests/fbgemm/tbe/test_tbe_budgets_module.py`` (a module's training step, the dense TBE) and
``tests/fbgemm/tbe/test_tbe_budgets_metadata.py``.

The lookups are counted per distinct D -- more exactly per table class, the tables of one D whose
rows start at the same residue modulo D (``_utils``), one class per D in every layout upstream's
modules build -- and never per table.  Their main path is the training forward of a fixed-batch
pooled lookup (SUM or MEAN, weighted SUM); ``paths`` name the other forwards (``weighted_mean``,
``sequence``: pooling NONE, ``vbe``) and the backward with the fused optimizer step
(``backward``: SUM, weighted or not; ``mean_backward``: MEAN, weighted or not;
``sequence_backward``; ``vbe_backward``: any pooling).  A per-D count is the ceiling of the
per-class counts measured with one and with two classes: one class that is the whole output
saves the backward its column select, and a second VBE class costs one launch more than the
first.  The catalogue's targets (docs/ops.md): forward 10 per D (the main path is 11: the bag ids
without an AI-CPU searchsorted cost 2 launches more, per call); a training step, forward plus
backward, 40 per D -- the notes say where a step measured over it (from the counts of each
argument path, not from sums of these ceilings).  Every forward clamps each index into its own
table (one launch per call: an index outside it must never read or update another table's
rows) and, with the data checks on, raises for an index the clamp moved, as upstream's CPU
kernels raise, or for offsets that do not start at 0, decrease or end past the indices (what
``BoundsCheckMode.NONE`` lets through): ``checks`` 7 (an ``eq`` of the indices, the offsets closed
with their bound by a ``cat``, a ``ge``, an ``eq`` of the first offset, a ``cat``, an ``all``,
queued for ``fbgemm_npu.check()``, and a ``where`` that hands the bag kernel all-zero offsets
where the check failed: the call runs on until the check is read and must stay inside
``indices``; once per call, not per D); ``sequence`` (no bag kernel) 6; with
``FBGEMM_NPU_VALIDATE=assert`` each is one more (the ``_assert_async``); the backwards have no
data checks.  No call
syncs once the layout is known (``fbgemm_npu.split_table.register_tbe_layout``; otherwise the
first call with a new layout reads it back once).
"""

from __future__ import annotations

from fbgemm_npu.native.family import Budget

# Every forward clamps the indices into their tables (1 launch per call) and builds the bag of
# each index without searchsorted, which a 910B runs on its AI CPU (_utils.segment_ids: clamp,
# index_add, cumsum, all int32, for one searchsorted: 2 launches per call more), so 11 on the
# main path, none of them on the AI CPU; sequence needs no gradient-row copy, the backward
# takes its sort permutation instead.
_MAIN = 11
_FORWARD = {"weighted_mean": 14, "sequence": 8}
# VBE (.vbe): each bag's block id by one segment_ids over the block bounds, its feature by a
# gather of a cached table (no second segment_ids), the output starts from the same ids; a
# further class's scatter member test is a gather of its cached mask and a where
_VBE_FORWARD = {"vbe": 25}
# The data check of the indices and offsets (eq, cat, ge, eq, cat, all; queued, deferred) runs
# in the forward only, and a where of the bag offsets (all zeros where it failed: the bag kernel
# then stays inside the indices); sequence has no bag kernel.
_CHECKS = 7
_PATH_CHECKS = {"sequence": 6}
_FORWARD_NOTE = "forward 11 per D: the bag ids built on the AI Core, not by an AI-CPU searchsorted"
_WEIGHTED_MEAN_NOTE = "weighted MEAN forward 14 (bag lengths, clamp, divide)"
_VBE_NOTE = "VBE forward too (block ids, features, output offsets from the call's data, scatter)"
# The optimizer step is elementwise math on the [L, D] rows, one ATen op per term.  Every
# backward de-duplicates without an AI-CPU op (backward.py: float32 sort keys, decided on the
# host from the table's rows, an LSD pass over 24-bit digits past 2**24 rows; int32 run ids;
# run starts by counting, not searchsorted; an out-of-place index_put into cached zeros, not
# index_copy_ with int64 ids): 10 launches per class where the integer sort took 9 and 3 of
# them ran on the AI CPU.  SGD's and rowwise AdaGrad's fast forms (updates that are exact zeros
# on skipped slots) fold their scalings into addcmul's into a cached 0-D zero: 1 and 3 fewer.
_STEP_NOTE = "elementwise optimizer math, one op per term"


def _note(step_over: str = "", vbe: bool = False) -> str:
    """A lookup's note: its forward paths over 10 per D, and where a training step (forward +
    backward) is over 40 per D."""
    parts = [_FORWARD_NOTE, _WEIGHTED_MEAN_NOTE] + ([_VBE_NOTE] if vbe else [])
    if step_over:
        parts.append(f"a training step over 40 per D {step_over}: {_STEP_NOTE}")
    remedy = "fused kernels close them" if len(parts) > 1 else "a fused kernel closes it"
    return "; ".join([*parts, remedy])


_LOOKUP = "fbgemm::split_embedding_codegen_lookup_{}_function_pt2"
# The fused Triton forward (_triton_forward.py): one kernel for every forward of a lookup (SUM /
# MEAN / NONE, weighted or not, any number of D, training or inference: "call" pooled,
# "sequence" NONE, "vbe" pooled with variable batch sizes); its data check is a flag per
# program reduced by one `all` (triton_checks 1, in place of the tensor program's 7).  Global
# weight decay runs the tensor program.
_TRITON_FORWARD = {"call": 1, "sequence": 1, "vbe": 1}
_TRITON_CHECKS = 1
# The fused Triton backward (_triton_backward.py) of the optimizers it runs (SGD, AdaGrad,
# rowwise AdaGrad, Adam, partial rowwise Adam, LAMB, partial rowwise LAMB, LARS-SGD), per call
# whatever the number of table classes: each index's de-duplication key over all classes (a
# kernel), its stable float32 sort, then one kernel that sums each touched row's gradient
# (clipping, per-sample weights, 1 / length in it) and updates the row and its states once: 3.
# After the tensor program's forward (separate index matrices) two classes or more stack them
# first: 4.  Per-sample weights that require grad get their gradient from the same two kernels
# (zeros from the key kernel, each member's dot with its row before the update from the step
# kernel): weight_grad_backward 3.  The backward has no data checks (triton_checks is the
# label's triton_path_checks is 0).  VBE, global weight decay, Adam's rowwise bias
# correction and a device learning rate run the tensor program.
_TRITON_BACKWARD = {
    "backward": 3,
    "weighted_backward": 3,
    "mean_backward": 3,
    "sequence_backward": 3,
    "clipped_backward": 3,
    "two_class_backward": 3,
    "tensor_forward_two_class_backward": 4,
    "weight_grad_backward": 3,
}


def _lookup(paths: dict[str, int], note: str = "", triton: dict[str, int] | None = None) -> Budget:
    """A lookup's budget: the forward's main path and ``paths``, the index check on the forwards
    only; ``triton``: Triton labels beside the fused forward's (``_TRITON_FORWARD``)."""
    backwards = {p: 0 for p in paths if p.endswith("backward")}
    backwards.update({p: c for p, c in _PATH_CHECKS.items() if p in paths})
    if not note.startswith(_FORWARD_NOTE):
        note = f"{_FORWARD_NOTE}; {note}" if note else f"{_FORWARD_NOTE}; a fused kernel closes it"
    return Budget(
        launches=_MAIN,
        checks=_CHECKS,
        ai_cpu=0,
        per="distinct D",
        paths=paths,
        path_checks=backwards,
        target=10,
        note=note,
        triton={**_TRITON_FORWARD, **(triton or {})},
        triton_checks=_TRITON_CHECKS,
        triton_path_checks={p: 0 for p in {**_TRITON_BACKWARD, **(triton or {})} if "back" in p},
    )


BUDGETS: dict[str, Budget] = {
    # MEAN backwards: the reciprocal takes the integer bag lengths itself (no cast launch).
    _LOOKUP.format("sgd"): _lookup(
        {
            **_FORWARD,
            **_VBE_FORWARD,
            "backward": 15,
            "mean_backward": 20,
            "sequence_backward": 13,
            "vbe_backward": 22,
        },
        _note("with VBE", vbe=True),
        triton=_TRITON_BACKWARD,
    ),
    _LOOKUP.format("adagrad"): _lookup(
        {**_FORWARD, "backward": 25, "mean_backward": 30, "sequence_backward": 23},
        _note("with MEAN pooling"),
        triton=_TRITON_BACKWARD,
    ),
    _LOOKUP.format("rowwise_adagrad"): _lookup(
        {
            **_FORWARD,
            **_VBE_FORWARD,
            "backward": 24,
            "mean_backward": 29,
            "sequence_backward": 22,
            "vbe_backward": 31,
            # WeightDecayMode.DECOUPLE_GLOBAL: the forward scales each looked-up row by the
            # decay still pending on it (prev_iter gathered at the momentum1 row the index
            # matrix already holds; the factor in rsub, mul, clamp, pow: 5 over the main path),
            # the backward decays and stamps prev_iter
            "global_weight_decay": 16,
            "global_weight_decay_backward": 37,
        },
        _note(
            "with weighted MEAN, VBE or global weight decay, whose forward is over 10 too",
            vbe=True,
        ),
        triton=_TRITON_BACKWARD,
    ),
    _LOOKUP.format("adam"): _lookup(
        {
            **_FORWARD,
            **_VBE_FORWARD,
            "backward": 31,
            "mean_backward": 36,
            "sequence_backward": 29,
            "vbe_backward": 38,
        },
        _note("on every pooled path", vbe=True),
        triton=_TRITON_BACKWARD,
    ),
    _LOOKUP.format("partial_rowwise_adam"): _lookup(
        {**_FORWARD, "backward": 32, "mean_backward": 37, "sequence_backward": 30},
        _note("on every pooled path"),
        triton=_TRITON_BACKWARD,
    ),
    _LOOKUP.format("lamb"): _lookup(
        {**_FORWARD, "backward": 36, "mean_backward": 41, "sequence_backward": 34},
        _note("on every path"),
        triton=_TRITON_BACKWARD,
    ),
    _LOOKUP.format("partial_rowwise_lamb"): _lookup(
        {**_FORWARD, "backward": 37, "mean_backward": 42, "sequence_backward": 35},
        _note("on every path"),
        triton=_TRITON_BACKWARD,
    ),
    _LOOKUP.format("lars_sgd"): _lookup(
        {**_FORWARD, "backward": 30, "mean_backward": 35, "sequence_backward": 28},
        _note("on every pooled path"),
        triton=_TRITON_BACKWARD,
    ),
    # The counter and CowClip regularisations (one lookup for every mode, the costliest is the
    # counter with decoupled decay): their math runs on row scalars, one ATen op per term (the
    # row sums of squares as a norm and an addcmul, freq folded into one divide, cached 0-D
    # constants, prev_iter := iter as a constant: 63 -> 52); with the de-duplication (10),
    # the gathers (4) and the writes of four buffers (12), 40 needs a fused kernel.
    _LOOKUP.format("rowwise_adagrad_with_counter"): _lookup(
        {"backward": 52},
        f"a training step over 40 per D in every counter mode: {_STEP_NOTE}; a fused kernel "
        "closes it",
    ),
    # No EmbOptimType builds it in fbgemm_gpu 1.8.0: measured on the raw op, host layout.
    _LOOKUP.format("rowwise_rmsprop_ar"): _lookup(
        {"backward": 41},
        f"a training step over 40 per D: {_STEP_NOTE}; a fused kernel closes it",
    ),
    # No optimizer step: the backward returns the weights' gradient as a sparse COO tensor.  One
    # class only: upstream refuses mixed dims with OptimType.NONE.
    _LOOKUP.format("none"): _lookup({"backward": 14}),
    # The dense TBE trains with a torch optimizer: its backward only scatters the gradient rows
    # (with pooling NONE grad_output's rows are the indices' own: no gather).
    "fbgemm::dense_embedding_codegen_lookup_function": _lookup(
        {**_FORWARD, "backward": 8, "mean_backward": 13, "sequence_backward": 6}, _note()
    ),
    # Main path WARNING (upstream modules' default), nothing on a 910B's AI CPU for int32 or
    # int64 inputs: the repaired offsets (6: a running max by three windowed amax passes over a
    # zero-prefixed buffer, not cummax; the clamp and the last offset written into it), each
    # index's table size (4: segment_ids over the features' first offsets -- a strided view,
    # each index then below the repaired last offset N -- and a gather; VBE gathers the first
    # offsets by B_offsets after a clamp and clamps the features: 3 more), the index check (5,
    # into one flag buffer with the offsets' flags: no cat), the repairs (2: a where into the
    # indices, not an int64 masked_fill_; the offsets' copy), the count (4).  FATAL repairs
    # nothing: its offsets are good iff non-decreasing from >= 0 to N (no running max), and it
    # raises through one queued check, read at fbgemm_npu.check() (FBGEMM_NPU_VALIDATE=assert:
    # an _assert_async, one launch more) -- the mode's contract, kept when
    # FBGEMM_NPU_VALIDATE=0; NONE and the V2 mode values do nothing here (upstream's Python
    # handles V2).
    "fbgemm::bounds_check_indices": Budget(
        launches=21,
        ai_cpu=0,
        paths={"ignore": 17, "fatal": 14, "none": 0, "vbe": 24, "vbe_ignore": 20, "vbe_fatal": 16},
    ),
    # Host arithmetic on B and T.
    "fbgemm::get_infos_metadata": Budget(launches=0, ai_cpu=0),
    # The per-bag output offsets of VBE (the forward's vbe path builds the same, .vbe: the
    # block id of each bag by one segment_ids over the block bounds, not an AI-CPU searchsorted;
    # the block tables, which the forward caches with its plan, built per call here) and
    # b_t_map.
    "fbgemm::generate_vbe_metadata": Budget(launches=21, ai_cpu=0),
    # Upstream's CUDA-only index sort (.transpose).  Main path (pooled, int64, keys below 2**24,
    # no total_unique_indices): the bag ids (segment_ids: clamp, index_add, cumsum), t and b
    # (floor_divide, remainder: no shifts), the int32 info (an add), hash_size_cumsum's gather
    # and the add, the key mod 2**bits, its float32 cast and stable sort (no integer sort), the
    # two permuting gathers, the run ids (fill_, ne, cumsum), the run counts (index_add) and
    # their cumsum, the run values (clamp, gather, gt, where): 22.  int32 indices: the key's
    # cast (23); keys below 2**48: two 24-bit digit passes (29); nobag: p * T + t in place of
    # the info (21); total_unique_indices below L: the run ids' clamp (23); infos past 2**31
    # (T << info_B_num_bits): the uint32 wrap in int64 (28); VBE: the map's gather, its clamp,
    # the uint32 >> bits by remainder / floor_divide and the feature's clamp (25, nobag 26);
    # index-select: features by segment_ids over total_L_offsets, their starts' gather and
    # cast, r * T + t (22).  Checks: offsets start at 0, end at L, non-decreasing (ge, all,
    # then stack, upload, clamp, eq, all: 7); VBE (the map's features below T) and
    # index-select (the features' lengths) one amax more.
    "fbgemm::transpose_embedding_input": Budget(
        launches=22,
        checks=7,
        ai_cpu=0,
        paths={
            "int32": 23,
            "bits48": 29,
            "nobag": 21,
            "total_unique": 23,
            "info_wrap": 28,
            "vbe": 25,
            "vbe_nobag": 26,
            "index_select": 22,
        },
        path_checks={"vbe": 8, "vbe_nobag": 8, "index_select": 8},
    ),
    # Upstream's CUDA-only pruning reset (.reset), the layout known (its first call with a new
    # one reads the offsets back once, as the lookups).  The table of each buffer (clamp,
    # out-of-place index_put of arange), of each pruned position (segment_ids: clamp, index_add,
    # cumsum; gather, clamp, gather, clamp_), the table's row of the per-layout table (gather),
    # the index's clamp into its table, the reset width (ge, where); the momentum addresses (add,
    # gt) and the weights' (addcmul, add, lt); each buffer's zeros without a data-dependent
    # selection (where with its fill, amin, clamp, a 0-d zeros, lt, gather, 3 where,
    # index_put_: 11): 40, whatever the tables or indices.  Checks: the offsets (start, end,
    # ge + all), the ids' ranges (2 amin, 2 amax), each buffer named once (clamp, index_add,
    # amax), the indices in their tables (2 eq, or, all), then stack, upload, clamp, eq, all:
    # 17.  The first call with a new layout uploads its per-layout table (new_layout: one
    # launch more; no sync when the layout is registered, as upstream's module on npu does).
    "fbgemm::reset_weight_momentum": Budget(
        launches=40, checks=17, ai_cpu=0, paths={"new_layout": 41}
    ),
}
