"""Specs of the pooled-embedding permutes: ``permute_pooled_embs`` (``_split``, ``_auto_grad``,
``_auto_grad_split``).  The regrouping ops: ``regroup.py``; the cross-device ops:
``cross_device.py``.

Oracle: upstream's CPU kernels.  Drawn inputs: ``T`` blocks of width 0..6 (zero width often),
batch 0..5 (empty batch), every dtype upstream's CPU kernel takes (the autograd ops: float types,
gradients checked), rank 2 or 3, contiguous / transposed / sliced (non-contiguous)
``pooled_embs``; a permute shorter than the blocks (upstream then cuts only at the first
``T - 1`` offsets) and a last offset other than the width (upstream ignores it) in the forward
specs.  One example in ten is invalid in a way upstream rejects (int32 index lists, a 1-D input,
an empty or too long permute): ours must raise too.  Invalid lists upstream accepts and answers
with another output width (duplicate or out-of-range permute entries, decreasing cut points) or
reads out of bounds cannot be run here; ``tests/fbgemm/pooled/test_pooled_errors.py`` checks ours
refuses them.

Tolerances: none.  Permutes copy values (``Tol(0, 0)``).

Budgets: the op's ``BUDGETS`` entry (``fbgemm_npu/native/fbgemm/pooled/budgets.py``); one or two
blocks take the paths whose data check is shorter.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.strategies import values as fill_values
from conformance.strategies import with_layout

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


def _permute_budget(**inputs: Any) -> BudgetUse:
    """The path of a call: the data check is shorter for one or two blocks."""
    n_blocks = inputs["permute_list"].numel()
    return BudgetUse(path={1: "one block", 2: "two blocks"}.get(n_blocks))


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
        out.append(
            {
                "pooled_embs": pooled,
                "offset_dim_list": offsets,
                "permute_list": perm,
                "inv_offset_dim_list": offsets.clone(),
                "inv_permute_list": torch.argsort(perm),
            }
        )
    if not backward:
        ragged = torch.tensor([0, 1, 1, 4, 9])
        out.append(
            {
                "pooled_embs": fill_values((3, 9), torch.bool, "signed", 1),
                "offset_dim_list": ragged,
                "permute_list": torch.tensor([3, 1, 0, 2]),
                "inv_offset_dim_list": torch.tensor([0, 5, 5, 6, 9]),
                "inv_permute_list": torch.tensor([2, 1, 3, 0]),
            }
        )
    return tuple(out)


SPECS = [
    _permute_spec("permute_pooled_embs", backward=False),
    _permute_spec("permute_pooled_embs_split", backward=False),
    _permute_spec("permute_pooled_embs_auto_grad", backward=True),
    _permute_spec("permute_pooled_embs_auto_grad_split", backward=True),
]
