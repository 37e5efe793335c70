"""Specs for the pooled-embedding permutes: ``permute_pooled_embs`` (``_split``, ``_auto_grad``,
``_auto_grad_split``), and the cross-device ops ``merge_pooled_embeddings``,
``all_to_one_device``, ``sum_reduce_to_one`` (the regrouping ops: ``pooled_regroup.py``).

Oracle: upstream's CPU kernels.  Drawn inputs for the permutes: ``T`` blocks of width 0..6 (zero
width often), batch 0..5 (empty batch), every dtype upstream's CPU kernel takes (the autograd ops:
float types, gradients checked), rank 2 or 3, contiguous / transposed / sliced (non-contiguous)
``pooled_embs``; a permute shorter than the blocks (upstream then cuts only at the first
``T - 1`` offsets) and a last offset other than the width (upstream ignores it) in the forward
specs.  One example in ten is invalid in a way upstream rejects (int32 index lists, a 1-D input,
an empty or too long permute): ours must raise too.  Invalid lists upstream accepts and answers
with another output width (duplicate or out-of-range permute entries, decreasing cut points) or
reads out of bounds cannot be run here; ``tests/test_pooled.py`` checks ours refuses them.

Cross-device ops: 1..4 inputs, each on ``npu:0`` or ``npu:1`` (the spec's op moves them there:
those moves are counted with the call), target ``npu:0`` or ``npu:1``; upstream runs the same
inputs on the CPU with a CPU target; contiguous and non-contiguous inputs.  merge: rank 2 or 3,
``cat_dim`` 0/1, a wrong ``uncat_dim_size`` (upstream CPU ignores it), mixed dtypes (the first
wins), all-empty inputs.

Tolerances: none.  Permutes and moves copy values (``Tol(0, 0)``), and sum_reduce adds in the
same order as upstream (only the sign of a zero sum may differ, and equal compares equal).

Budgets: OPS.md gives the permutes 6 launches: ours need 6 (5 for the plan, 1 gather) plus 5 for
the data check (permute_list is a permutation, cut points non-negative and non-decreasing; fewer
for T < 3); ``FBGEMM_NPU_VALIDATE=0`` removes them and a caller passing the same index tensors
again pays 1 launch (the plan is memoised).  Cross-device: 4 per input (OPS.md); ours use at most
2 per input, plus the spec's own move to ``npu:1``.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import Budget, Compare, OpSpec, Tol
from conformance.strategies import values as fill_values
from conformance.strategies import with_layout
from fbgemm_npu.native._checks import validation_enabled

F = torch.ops.fbgemm
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
ALL_DTYPES = (*FLOATS, torch.float64, torch.int32, torch.int64)
EXACT = Compare({d: Tol(rtol=0.0, atol=0.0) for d in (*FLOATS, torch.float64)})
LAYOUTS = ("contiguous", "contiguous", "transposed", "sliced")
ARGS = ("offset_dim_list", "permute_list", "inv_offset_dim_list", "inv_permute_list")


def _cum(sizes: list[int]) -> list[int]:
    out = [0]
    for s in sizes:
        out.append(out[-1] + s)
    return out


def _permute_budget(**inputs: Any) -> Budget:
    n_blocks = inputs["permute_list"].numel()
    checks = (3 + (n_blocks > 1) + (n_blocks > 2)) if validation_enabled() else 0
    return Budget(launches=6 + checks, syncs=0)


@st.composite
def _permute_inputs(draw: st.DrawFn, dtypes: tuple[torch.dtype, ...], odd: bool) -> dict:
    """Valid inputs (``odd``: also short permutes and a last offset other than the width)."""
    dims = draw(st.lists(st.sampled_from([0, 0, 1, 2, 3, 4, 6]), min_size=1, max_size=8))
    batch = draw(st.sampled_from([0, 1, 2, 3, 5]))
    n_used = draw(st.integers(1, len(dims))) if odd else len(dims)
    perm = draw(st.permutations(range(n_used)))
    offsets = _cum(dims)
    width = offsets[-1] if n_used == len(dims) else draw(st.integers(offsets[n_used - 1], 30))
    if odd and draw(st.booleans()):
        offsets[-1] += draw(st.integers(-2, 3))  # not read by upstream's CPU kernel
    # inverse lists as PermutePooledEmbeddings builds them (used by the backward)
    inv_dims = [dims[p] for p in perm] if n_used == len(dims) else dims
    inv = [0] * n_used
    for i, p in enumerate(perm):
        inv[p] = i
    dtype = draw(st.sampled_from(dtypes))
    fill = "small_ints" if dtype.is_floating_point else "signed"
    extra = (3,) if draw(st.integers(0, 4)) == 0 else ()
    layout = draw(st.sampled_from(LAYOUTS))
    pooled = with_layout((batch, width, *extra), dtype, fill, draw(st.integers(0, 999)), layout)
    lists = [offsets, list(perm), _cum(inv_dims), inv]
    return {"pooled_embs": pooled, **{a: torch.tensor(v) for a, v in zip(ARGS, lists, strict=True)}}


@st.composite
def _bad_permute_inputs(draw: st.DrawFn) -> dict:
    """Inputs upstream's CPU kernel rejects with an error."""
    inputs = draw(_permute_inputs(FLOATS, odd=False))
    kind = draw(st.sampled_from(["int32_offsets", "int32_permute", "rank1", "empty", "long"]))
    if kind == "int32_offsets":
        inputs["offset_dim_list"] = inputs["offset_dim_list"].int()
    elif kind == "int32_permute":
        inputs["permute_list"] = inputs["permute_list"].int()
    elif kind == "rank1":
        inputs["pooled_embs"] = torch.zeros(inputs["offset_dim_list"][-1].item())
    elif kind == "empty":
        inputs["permute_list"] = torch.zeros(0, dtype=torch.int64)
    else:  # a permute longer than the offsets: upstream reads past them and raises
        n = inputs["offset_dim_list"].numel()
        inputs["permute_list"] = torch.arange(n + 1)
    return inputs


def _permute_spec(name: str, backward: bool) -> OpSpec:
    op = getattr(F, name)
    dtypes = FLOATS if backward else ALL_DTYPES
    valid = _permute_inputs(dtypes, odd=not backward)
    # nine valid inputs in ten; shrinks towards valid ones
    inputs = st.integers(0, 9).flatmap(lambda k: _bad_permute_inputs() if k == 9 else valid)
    ex = _permute_examples(dtypes, backward)
    return OpSpec(
        name=name,
        op=lambda **kw: op(kw["pooled_embs"], *(kw[a] for a in ARGS)),
        inputs=inputs,
        compare=EXACT,
        budget=_permute_budget,
        backward=backward,
        grad_inputs=("pooled_embs",) if backward else (),
        examples=ex,
        notes="budget 6 + the data check (5); see the module docstring",
    )


def _permute_examples(dtypes: tuple[torch.dtype, ...], backward: bool) -> tuple[dict, ...]:
    """The torchrec shape (26 features x 128, batch 64), an empty batch, zero-width blocks."""
    out = []
    gen = torch.Generator().manual_seed(0)
    for n_blocks, dim, batch in ((26, 128, 64), (4, 3, 0), (5, 0, 3), (1, 7, 2)):
        perm = torch.randperm(n_blocks, generator=gen)
        offsets = torch.arange(n_blocks + 1) * dim
        dtype = dtypes[len(out) % len(dtypes)]
        pooled = fill_values((batch, n_blocks * dim), dtype, "small_ints", len(out))
        out.append({"pooled_embs": pooled, "offset_dim_list": offsets, "permute_list": perm,
                    "inv_offset_dim_list": offsets.clone(),
                    "inv_permute_list": torch.argsort(perm)})  # fmt: skip
    if not backward:
        ragged = torch.tensor([0, 1, 1, 4, 9])
        out.append({"pooled_embs": fill_values((3, 9), torch.bool, "signed", 1),
                    "offset_dim_list": ragged, "permute_list": torch.tensor([3, 1, 0, 2]),
                    "inv_offset_dim_list": torch.tensor([0, 5, 5, 6, 9]),
                    "inv_permute_list": torch.tensor([2, 1, 3, 0])})  # fmt: skip
    return tuple(out)


# ---- cross-device ------------------------------------------------------------------------------


def _device_of(like: torch.Tensor, index: int) -> torch.device:
    """npu:index on the npu side of the harness, the CPU on upstream's side."""
    return like.device if like.device.type == "cpu" else torch.device(like.device.type, index)


def _place(tensors: list[torch.Tensor], devices: list[int]) -> list[torch.Tensor]:
    return [t.to(_device_of(t, d)) for t, d in zip(tensors, devices, strict=True)]


def _merge(tensors: list, devices: list, target: int, uncat_dim_size: int, cat_dim: int) -> Any:
    placed = _place(tensors, devices)
    return F.merge_pooled_embeddings(
        placed, uncat_dim_size, _device_of(tensors[0], target), cat_dim
    )


def _all_to_one(tensors: list, devices: list, target: int) -> Any:
    return F.all_to_one_device(_place(tensors, devices), _device_of(tensors[0], target))


def _sum_reduce(tensors: list, devices: list, target: int) -> Any:
    return F.sum_reduce_to_one(_place(tensors, devices), _device_of(tensors[0], target))


@st.composite
def _cross_inputs(draw: st.DrawFn, kind: str) -> dict:
    n = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(ALL_DTYPES))
    dtypes = [dtype] * n
    if kind != "sum" and draw(st.integers(0, 3)) == 0:
        dtypes = [draw(st.sampled_from(FLOATS)) for _ in range(n)]  # mixed: the first wins
    rank = draw(st.sampled_from([2, 2, 3]))
    fixed = [draw(st.integers(0, 4)) for _ in range(rank)]
    cat_dim = draw(st.integers(0, 1))
    shapes = []
    for _ in range(n):
        shape = list(fixed)
        if kind != "sum":
            shape[cat_dim] = draw(st.integers(0, 5))
        shapes.append(tuple(shape))
    seeds = draw(st.lists(st.integers(0, 999), min_size=n, max_size=n))
    fill = {True: "small_ints", False: "signed"}
    layouts = [draw(st.sampled_from(LAYOUTS)) for _ in range(n)]  # non-contiguous inputs too
    tensors = [with_layout(s, d, fill[d.is_floating_point], k, lay)
               for s, d, k, lay in zip(shapes, dtypes, seeds, layouts, strict=True)]  # fmt: skip
    inputs = {
        "tensors": tensors,
        "devices": draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
        "target": draw(st.integers(0, 1)),
    }
    if kind == "merge":
        inputs["uncat_dim_size"] = fixed[1 - cat_dim] + draw(st.sampled_from([0, 0, 0, 2]))
        inputs["cat_dim"] = cat_dim
    return inputs


def _cross_budget(**inputs: Any) -> Budget:
    return Budget(launches=4 * len(inputs["tensors"]), syncs=0)


def _cross_examples(kind: str) -> tuple[dict, ...]:
    """Two devices with torchrec-sized pooled outputs; merge: all-empty inputs."""
    pooled = [fill_values((64, 128 * k), torch.float32, "uniform", k) for k in (1, 2, 3)]
    if kind == "sum":
        pooled = [fill_values((64, 128), torch.float32, "uniform", k) for k in (1, 2, 3)]
    out: list[dict] = [{"tensors": pooled, "devices": [0, 1, 1], "target": 0}]
    if kind == "merge":
        out[0].update(uncat_dim_size=64, cat_dim=1)
        empty = [torch.zeros(0, 0, dtype=torch.int64), torch.zeros(0, 0, dtype=torch.int32)]
        out.append({"tensors": empty, "devices": [1, 0], "target": 1, "uncat_dim_size": 0,
                    "cat_dim": 0})  # fmt: skip
    return tuple(out)


def _cross_spec(name: str, kind: str, op: Any) -> OpSpec:
    return OpSpec(
        name=name,
        op=op,
        inputs=_cross_inputs(kind),
        compare=EXACT,
        budget=_cross_budget,
        examples=_cross_examples(kind),
        notes="the spec's own moves to npu:1 are counted with the call",
    )


SPECS = [
    _permute_spec("permute_pooled_embs", backward=False),
    _permute_spec("permute_pooled_embs_split", backward=False),
    _permute_spec("permute_pooled_embs_auto_grad", backward=True),
    _permute_spec("permute_pooled_embs_auto_grad_split", backward=True),
    _cross_spec("merge_pooled_embeddings", "merge", _merge),
    _cross_spec("all_to_one_device", "all_to_one", _all_to_one),
    _cross_spec("sum_reduce_to_one", "sum", _sum_reduce),
]
