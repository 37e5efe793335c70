"""Specs for ``fbgemm::asynchronous_{complete,exclusive,inclusive}_cumsum`` and
``fbgemm::asynchronous_batched_complete_cumsum`` (2-D only, as complete cumsum on 2-D input).

Inputs: int32, int64, float16, bfloat16, float32; complete cumsum 1-D and 2-D (one scan per row),
exclusive / inclusive cumsum 0-D to 3-D (upstream CPU scans the tensor flattened in logical
order).  Edge cases: empty (0,), (0, k), (k, 0); all zeros; int32 sums that overflow (upstream
wraps); transposed, sliced and expanded (stride 0) views.  One example in ten is invalid (a rank
or a dtype upstream rejects): ours must raise as upstream does.
Budgets: the op's entry; its ``int64`` path for int64 input (scanned as two int32 words, no int64
``cumsum``), and for exclusive / inclusive its ``strided`` path when no view flattens the input
(it is cloned before the scan).

Oracles and tolerances (``scale`` = the same cumsum of ``|t_in|`` in float64, the running
magnitude: partial sums can cancel to ~0 while rounding error grows with the terms summed):

* int32, int64: upstream, exact.
* float32: upstream, ``|ours - upstream| <= 1e-5 + 1.3e-6 * scale + slack``, where ``slack`` =
  ``|upstream - float64 reference|`` elementwise: upstream's own rounding error.  Upstream
  accumulates float32 sequentially and drifts (measured: 3.0e-5 * scale after 3000 x 0.1, 2.7e-6
  after 427 x 0.1; 9e-7 for 3000 uniform terms in [0, 10)), while torch.cumsum accumulates in a
  wider type and stays within 6e-8 * scale of the exact sum; ours must sit within the tight band
  around the segment between upstream and the exact sum.  The band leaves room for a device scan
  that accumulates in float32 in another order (error ~ sqrt(n) * eps * scale).
* float16, bfloat16: a float64 reference (cast in, cumsum, compare in float64), because upstream
  CPU accumulates in the half type itself and drifts far from the true sum (3000 x 0.1 gives 256
  in float16 and 32 in bfloat16 instead of 300).  Bound ``1e-5 + 1e-2 * scale``: one final
  rounding costs 2**-11 (float16) or 2**-8 (bfloat16) of the value, and a float32 accumulator
  adds far less.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, TensorView, Tol
from conformance.strategies import shapes, tensors, with_layout

DTYPES = (torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32)
HALF = (torch.float16, torch.bfloat16)
BAD_DTYPES = (torch.int8, torch.float64, torch.bool)  # upstream: NotImplementedError
TOLERANCES = {
    torch.float32: Tol(rtol=1.3e-6, atol=1e-5),
    torch.float16: Tol(rtol=1e-2, atol=1e-5),
    torch.bfloat16: Tol(rtol=1e-2, atol=1e-5),
}

F = torch.ops.fbgemm
BATCHED = "asynchronous_batched_complete_cumsum"  # 2-D only: the rows' complete cumsums


def complete_reference(t_in: torch.Tensor) -> torch.Tensor:
    """float64: a zero column, then the cumsum along the last dim (per row for 2-D)."""
    x = t_in.to(torch.float64)
    zero = torch.zeros((*x.shape[:-1], 1), dtype=torch.float64)
    return torch.cat([zero, x.cumsum(-1)], dim=-1)


def inclusive_reference(t_in: torch.Tensor) -> torch.Tensor:
    """float64: cumsum of the tensor flattened in logical order, in ``t_in``'s shape."""
    x = t_in.to(torch.float64).reshape(-1)
    return x.cumsum(0).reshape(t_in.shape)


def exclusive_reference(t_in: torch.Tensor) -> torch.Tensor:
    """float64: ``out[0] = 0``, ``out[i] = sum(flat[:i])``, in ``t_in``'s shape."""
    x = t_in.to(torch.float64).reshape(-1)
    out = torch.zeros_like(x)
    out[1:] = x[:-1].cumsum(0)
    return out.reshape(t_in.shape)


def _inputs(valid_ranks: tuple[int, ...], bad_ranks: tuple[int, ...]) -> st.SearchStrategy:
    valid = tensors(shapes(valid_ranks, small=8, large=2048), DTYPES)
    invalid = st.one_of(
        # non-empty: upstream's batched cumsum returns an empty result for an empty tensor of a
        # dtype it refuses otherwise (int8 (0, 0)); ours refuses it, naming the argument
        tensors(shapes(valid_ranks, small=4), BAD_DTYPES, layouts=("contiguous",)).filter(
            lambda t: t.numel() > 0
        ),
        *([tensors(shapes(bad_ranks, small=3), DTYPES)] if bad_ranks else []),
    )

    @st.composite
    def draw(draw: st.DrawFn) -> dict[str, object]:
        bad = draw(st.integers(0, 9)) == 9  # shrinks towards valid inputs
        return {"t_in": draw(invalid if bad else valid)}

    return draw()


def _upstream_error(
    op: Callable[[torch.Tensor], torch.Tensor],
    ref: Callable[[torch.Tensor], torch.Tensor],
    t_in: torch.Tensor,
) -> torch.Tensor | None:
    """float32 only: ``|upstream - exact|`` per element, upstream's sequential rounding error."""
    if t_in.dtype != torch.float32:
        return None
    return (op(t_in).to(torch.float64) - ref(t_in)).abs()  # t_in is on the CPU: upstream's kernel


def _examples(name: str) -> tuple[dict[str, object], ...]:
    """Edge cases every run checks: empties, zeros, int32 wrap, long half sums, views, ranks."""
    i32max = torch.iinfo(torch.int32).max
    cases: list[object] = [
        torch.zeros(0, dtype=torch.int64),
        torch.zeros(0, 3, dtype=torch.int32),
        torch.zeros(3, 0, dtype=torch.float32),
        torch.zeros(4, 5, dtype=torch.int64),
        torch.tensor([i32max, 1, 5, -3], dtype=torch.int32),  # wraps to int32 min
        torch.tensor([[i32max - 2, 2, 1], [-i32max, -2, -3]], dtype=torch.int32),
        torch.full((3000,), 0.1, dtype=torch.float16),  # upstream: 256, not 300
        torch.full((3000,), 0.1, dtype=torch.bfloat16),  # upstream: 32, not 300
        with_layout((3000,), torch.float32, "positive", 1, "contiguous"),
        with_layout((4, 3), torch.int64, "signed", 2, "transposed"),
        with_layout((5, 4), torch.float16, "uniform", 3, "sliced"),
        with_layout((3, 6), torch.int32, "lengths", 4, "expanded"),
    ]
    if name in ("asynchronous_complete_cumsum", "asynchronous_batched_complete_cumsum"):
        cases += [torch.tensor(5), torch.zeros(2, 2, 2, dtype=torch.int64)]  # upstream raises
    else:
        cases += [torch.tensor(5), torch.tensor(0.5, dtype=torch.bfloat16)]
        cases += [with_layout((2, 3, 4), torch.int32, "signed", 5, "transposed")]
    cases += [torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.int8)]  # raises
    return tuple({"t_in": c} for c in cases)


def _scan_budget(flat: bool) -> Callable[[torch.Tensor | TensorView], BudgetUse]:
    """The budget path of one input: ``int64`` (scanned as two int32 words) and, for exclusive /
    inclusive (``flat``: they scan the input flattened), ``strided`` when no view flattens it
    (it is cloned)."""

    def path(t_in: torch.Tensor | TensorView) -> BudgetUse:
        t = t_in.view(t_in.base) if isinstance(t_in, TensorView) else t_in
        parts = ["int64"] if t.dtype == torch.int64 else []
        try:
            t.view(-1)
        except RuntimeError:
            parts += ["strided"] if flat else []
        return BudgetUse(path=" + ".join(parts) or None)

    return path


def _spec(
    name: str,
    ref: Callable[[torch.Tensor], torch.Tensor],
    valid_ranks: tuple[int, ...],
    bad_ranks: tuple[int, ...],
) -> OpSpec:
    op = getattr(F, name)
    return OpSpec(
        name=name,
        op=lambda t_in: op(t_in),
        inputs=_inputs(valid_ranks, bad_ranks),
        compare=Compare(
            TOLERANCES,
            scale=lambda t_in: ref(t_in.to(torch.float64).abs()),
            slack=lambda t_in: _upstream_error(op, ref, t_in),
        ),
        budget=_scan_budget(flat=name not in ("asynchronous_complete_cumsum", BATCHED)),
        reference=ref,
        use_reference=lambda t_in: t_in.dtype in HALF and t_in.numel() > 0,
        examples=_examples(name),
        notes="half types against a float64 reference: upstream accumulates in the half type",
    )


SPECS = [
    _spec("asynchronous_complete_cumsum", complete_reference, (1, 2), (0, 3)),
    _spec(BATCHED, complete_reference, (2,), (0, 1, 3)),
    _spec("asynchronous_exclusive_cumsum", exclusive_reference, (0, 1, 2, 3), ()),
    _spec("asynchronous_inclusive_cumsum", inclusive_reference, (0, 1, 2, 3), ()),
]
