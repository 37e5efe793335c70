"""Specs of the permute family's later ops: ``permute_sequence_embeddings``,
``permute102_baddbmm_permute102``, the four duplicate pooled permutes and the three
embedding-gradient recats.

Oracles: upstream's CPU kernels, except for ``recat_embedding_grad_output`` and
``recat_embedding_grad_output_mixed_D_batch`` (upstream defines only their schema on CPU; its
CUDA kernels copy each rank's columns as one block): :func:`recat_reference`, written from that
math with ``narrow`` and ``cat`` on CPU (float64 where the input is).  Drawn: valid inputs with
empty batches, empty ranks and zero-width blocks; the duplicate permutes' cuts include negative,
decreasing and past-the-end ones (read as ``tensor_split`` reads them).  Not drawn: indices
outside their lists, sizes that disagree (upstream reads out of bounds):
``tests/fbgemm/permute/test_permute_more_errors.py`` covers them.  Gradients:
``permute_duplicate_pooled_embs_auto_grad_split`` with a permutation and its inverse lists
(upstream's backward is the split op with the inverse lists; ``_auto_grad``'s raises, as
upstream's).

Tolerances: every output but ``permute102_baddbmm_permute102``'s is a copy (exact).  The
baddbmm's sums of ``k <= 8`` products: float32 ``1e-5``, float16 / bfloat16 one rounding of the
output and of the accumulation order (``1e-2`` / ``2e-2``) relative to the magnitudes.
Budgets: the op's ``BUDGETS`` entry, main path (``sized=False`` for the sequence permute, whose
output size is always read back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.fbgemm.permute.inputs import EXACT

F = torch.ops.fbgemm
BADDBMM_TOL = Compare(
    {
        torch.float32: Tol(rtol=1e-5, atol=1e-5),
        torch.float16: Tol(rtol=1e-2, atol=1e-2),
        torch.bfloat16: Tol(rtol=2e-2, atol=2e-2),
    }
)
POOLED_ARGS = ("offset_dim_list", "permute_list", "inv_offset_dim_list", "inv_permute_list")


def _gen(draw: st.DrawFn) -> torch.Generator:
    return torch.Generator().manual_seed(draw(st.integers(0, 2**16)))


def _filled(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Small integers (exact in every dtype)."""
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


@st.composite
def _sequence_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g = _gen(draw)
    t_in, b, t_out = draw(st.integers(1, 6)), draw(st.integers(0, 5)), draw(st.integers(0, 8))
    lengths = torch.randint(0, 4, (t_in, b), generator=g)
    tail = draw(st.integers(0, 3))  # values past sum(lengths) are ignored, as upstream does
    dtype = draw(st.sampled_from((torch.int32, torch.int64, torch.float32, torch.float16)))
    return {
        "permute": torch.randint(0, t_in, (t_out,), generator=g).to(torch.int32),
        "lengths": lengths.to(draw(st.sampled_from((torch.int32, torch.int64)))),
        "embeddings": _filled((int(lengths.sum()) + tail,), dtype, g),
    }


@st.composite
def _baddbmm_inputs(draw: st.DrawFn) -> dict[str, Any]:
    g = _gen(draw)
    m, b, k, n = (draw(st.integers(0, 5)) for _ in range(4))
    k = min(k, 8)
    dtype = draw(st.sampled_from((torch.float32, torch.float16, torch.bfloat16)))
    return {
        "bias": torch.randn(b, n, generator=g).to(dtype),
        "A": torch.randn(m, b, k, generator=g).to(dtype),
        "B": torch.randn(b, k, n, generator=g).to(dtype),
    }


@st.composite
def _duplicate_inputs(draw: st.DrawFn, grad: bool = False) -> dict[str, Any]:
    """Blocks of widths 0-4 and a permute_list with repeats and drops; ``grad``: a permutation
    of the blocks with its inverse lists (upstream's backward needs them)."""
    g = _gen(draw)
    k = draw(st.integers(1, 6))
    widths = torch.randint(0, 5, (k,), generator=g)
    off = torch.cat([torch.zeros(1, dtype=torch.int64), widths.cumsum(0)])
    width = int(off[-1])
    if not grad and draw(st.booleans()):  # cuts as tensor_split reads them: any order and sign
        off = torch.randint(-width - 2, width + 3, (k + 1,), generator=g)
    if grad:
        perm = torch.randperm(k, generator=g)
    else:
        perm = torch.randint(0, off.numel(), (draw(st.integers(1, 8)),), generator=g)
    inv_off = off  # not read by the forward
    if grad:  # the output's blocks
        inv_off = torch.cat([torch.zeros(1, dtype=torch.int64), widths[perm].cumsum(0)])
    rows = (draw(st.integers(0, 4)),)
    rest = (2,) if draw(st.integers(0, 4)) == 0 else ()
    dtypes = (torch.float32, torch.float64) if grad else (torch.float32, torch.int64, torch.float16)
    x = _filled((*rows, width, *rest), draw(st.sampled_from(dtypes)), g)
    return {
        "pooled_embs": x,
        "offset_dim_list": off,
        "permute_list": perm,
        "inv_offset_dim_list": inv_off,
        "inv_permute_list": torch.argsort(perm) if grad else perm,
    }


def _duplicate_spec(name: str, grad: bool = False) -> OpSpec:
    op = getattr(F, name)
    return OpSpec(
        name=f"{name}[grad]" if grad else name,
        op=lambda **kw: op(kw["pooled_embs"], *(kw[a] for a in POOLED_ARGS)),
        inputs=_duplicate_inputs(grad=grad),
        compare=EXACT,
        budget=BudgetUse(op=f"fbgemm::{name}"),
        backward=grad,
        grad_inputs=("pooled_embs",) if grad else (),
    )


def recat_reference(grad_output: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Each rank's ``sizes[r]`` columns (features of a 3-D input) as one row-major block."""
    blocks, start = [], 0
    for s in sizes:
        blocks.append(grad_output.narrow(1, start, s).reshape(-1))
        start += s
    return torch.cat(blocks) if blocks else grad_output.new_empty((0,))


def _on_npu_or_reference(name: str, reference: Callable[..., Any]) -> Callable[..., Any]:
    """Ours on npu tensors, the reference on CPU tensors (upstream has no CPU kernel)."""
    op = getattr(F, name)

    def call(**kw: Any) -> Any:
        return reference(**kw) if kw["grad_output"].device.type == "cpu" else op(**kw)

    return call


def _batch_reference(
    grad_output: torch.Tensor, dim_sum_per_rank: torch.Tensor, cumsum_dim_sum_per_rank: torch.Tensor
) -> torch.Tensor:
    return recat_reference(grad_output, dim_sum_per_rank.tolist())


@st.composite
def _recat_inputs(draw: st.DrawFn, form: str) -> dict[str, Any]:
    g = _gen(draw)
    ranks = draw(st.integers(1, 5))
    sizes = [0 if draw(st.integers(0, 3)) == 0 else draw(st.integers(1, 5)) for _ in range(ranks)]
    b = draw(st.integers(0, 4))
    dtype = draw(st.sampled_from((torch.float32, torch.float16)))
    if form == "features":
        d = draw(st.integers(1, 3))
        return {
            "grad_output": _filled((b, sum(sizes), d), dtype, g),
            "num_features_per_rank": sizes,
        }
    grad = _filled((b, sum(sizes)), dtype, g)
    if form == "mixed_D":
        return {"grad_output": grad, "dim_sum_per_rank": sizes}
    dims = torch.tensor(sizes)
    return {
        "grad_output": grad,
        "dim_sum_per_rank": dims,
        "cumsum_dim_sum_per_rank": dims.cumsum(0) - dims,
    }


def _recat_features_reference(
    grad_output: torch.Tensor, num_features_per_rank: list[int]
) -> torch.Tensor:
    return recat_reference(grad_output, num_features_per_rank)


SPECS = [
    OpSpec(
        name="permute_sequence_embeddings",
        op=lambda **kw: F.permute_sequence_embeddings(**kw),
        inputs=_sequence_inputs(),
        compare=EXACT,
        budget=BudgetUse(sized=False),
    ),
    OpSpec(
        name="permute102_baddbmm_permute102",
        op=lambda **kw: F.permute102_baddbmm_permute102(**kw),
        inputs=_baddbmm_inputs(),
        compare=BADDBMM_TOL,
    ),
    *(
        _duplicate_spec(f"permute_duplicate_pooled_embs{suffix}")
        for suffix in ("", "_split", "_auto_grad", "_auto_grad_split")
    ),
    _duplicate_spec("permute_duplicate_pooled_embs_auto_grad_split", grad=True),
    OpSpec(
        name="recat_embedding_grad_output_mixed_D",
        op=lambda **kw: F.recat_embedding_grad_output_mixed_D(**kw),
        inputs=_recat_inputs("mixed_D"),
        compare=EXACT,
        # an empty batch: upstream checks B * sum == numel only, so any sizes pass
        examples=({"grad_output": torch.zeros(0, 10), "dim_sum_per_rank": [3, 4]},),
    ),
    OpSpec(
        name="recat_embedding_grad_output",
        op=_on_npu_or_reference("recat_embedding_grad_output", _recat_features_reference),
        inputs=_recat_inputs("features"),
        compare=EXACT,
    ),
    OpSpec(
        name="recat_embedding_grad_output_mixed_D_batch",
        op=_on_npu_or_reference("recat_embedding_grad_output_mixed_D_batch", _batch_reference),
        inputs=_recat_inputs("batch"),
        compare=EXACT,
    ),
]
