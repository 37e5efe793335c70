"""Specs of ``mxrec::hstu_fuxi`` (forward, and the backward through the autograd binding) and of
``mxrec::hstu_dense_backward_fuxi`` called directly (its own ``[T, N, 3D]`` gradient layout).

Inputs: 1-4 jagged sequences of lengths 0..6 (empty ones included; at least one row), ``maxSeqLen``
the longest plus 0-2, ``N`` 1-3, ``D`` 1-8 (the same for q, k and v: FuXi has no GQA), float32 /
float16 / bfloat16; maskType 0, 2 or 3 (a random 0 / 1 mask); the bias spec with both biases
(``timestampBias [B, S, S]``, ``positionBias [1, S, S]``) and a drawn siluScale; the normal spec
``[B, S, N, D]``.  One example in eight is invalid (maskType 1, one bias alone, a sequence longer
than maxSeqLen): ours must raise, as the CPU call does.  Budgets: the op's entry per query tile
(``units`` = the tile count: ``t`` rows with ``B * C * N * t * S <= TILE_ELEMENTS``), path
``biases`` with the two biases.

Oracle: the float64 reference written from the math (``reference.py``), for the output and the
gradients of q, k, v (and the biases).  Tolerances ``|ours - ref| <= atol + rtol |ref|``: float32
``1e-4, 1e-4`` (float32 scores and matmuls); float16 ``1e-2, 1e-2`` and bfloat16 ``6e-2, 6e-2``
(matmuls in the input dtype, scores and masked biases rounded to it before ``@ v``, as Rec SDK's
golden does: one rounding of 2**-11 / 2**-8 per term over at most 6 terms per channel).  Rec
SDK's own fraction-allclose tolerances against its dtype goldens are held in
``tests/mxrec/hstu_fuxi/test_hstu_fuxi_parity.py``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol
from conformance.specs.mxrec.hstu_fuxi.reference import fuxi_backward_reference, fuxi_reference
from fbgemm_npu.native.mxrec.hstu._attention import tile_rows

FWD, BWD = "mxrec::hstu_fuxi", "mxrec::hstu_dense_backward_fuxi"
TOL = {
    torch.float32: Tol(rtol=1e-4, atol=1e-4),
    torch.float16: Tol(rtol=1e-2, atol=1e-2),
    torch.bfloat16: Tol(rtol=6e-2, atol=6e-2),
}


@st.composite
def _inputs(
    draw: st.DrawFn, bias: bool | None, layout: str = "jagged", backward: bool = False
) -> dict:
    bias = draw(st.booleans()) if bias is None else bias
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    if layout == "jagged":
        lengths = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
        if sum(lengths) == 0:
            lengths[0] = 1
        s = max(lengths) + draw(st.integers(0, 2))
    else:
        s = draw(st.integers(1, 6))
        lengths = [s] * draw(st.integers(1, 3))
    b, n, d = len(lengths), draw(st.integers(1, 3)), draw(st.integers(1, 8))
    dtype = draw(st.sampled_from(tuple(TOL)))
    off = [0, *torch.tensor(lengths).cumsum(0).tolist()]
    shape = (off[-1], n, d) if layout == "jagged" else (b, s, n, d)
    kw: dict = {
        "q": (0.5 * torch.randn(*shape, generator=gen)).to(dtype),
        "k": (0.5 * torch.randn(*shape, generator=gen)).to(dtype),
        "v": torch.randn(*shape, generator=gen).to(dtype),
        "maskType": draw(st.sampled_from((0, 0, 2, 3))),
        "maxSeqLen": s,
        "layout": layout,
    }
    if layout == "jagged":
        kw["seqOffset"] = off
    if kw["maskType"] == 3:
        kw["mask"] = (torch.rand(b, n, s, s, generator=gen) > 0.3).to(dtype)
    ts_name, pos_name = (
        ("biasTimestamp", "biasPosition") if backward else ("timestampBias", "positionBias")
    )
    if bias:
        kw[ts_name] = torch.rand(b, s, s, generator=gen).to(dtype)
        kw[pos_name] = torch.rand(1, s, s, generator=gen).to(dtype)
        kw["siluScale"] = draw(st.sampled_from((0.0, 0.25)))
    if backward:
        kw = {
            "grad": torch.randn(off[-1], n, (3 if bias else 1) * d, generator=gen).to(dtype),
            **kw,
        }
    if draw(st.integers(0, 7)) == 7:
        kind = draw(st.sampled_from(("triu", "one_bias", "long")))
        if kind == "triu":
            kw["maskType"] = 1
        elif kind == "one_bias":
            kw[ts_name] = torch.rand(b, s, s, generator=gen).to(dtype)
            kw.pop(pos_name, None)
        else:
            kw["maxSeqLen"] = max(1, max(lengths) - 1) if max(lengths) > 1 else 0
    return kw


def _op(**kw: object) -> torch.Tensor:
    return torch.ops.mxrec.hstu_fuxi(**kw)


def _bwd_op(**kw: object) -> tuple[torch.Tensor, ...]:
    return torch.ops.mxrec.hstu_dense_backward_fuxi(**kw)


def _bwd_reference(**kw: object) -> tuple[torch.Tensor | None, ...]:
    """float64, with an empty ``(0,)`` bias gradient where there are no biases (as the op)."""
    out = fuxi_backward_reference(**kw)  # type: ignore[arg-type]
    empty = torch.zeros(0, dtype=torch.float64)
    return tuple(empty if t is None else t for t in out)


def _units(q: torch.Tensor, batch: int, s: int, channels: int) -> int:
    return -(-s // tile_rows(batch, channels * q.size(-2), s))


def _budget(**kw: object) -> BudgetUse:
    q, s = kw["q"], int(kw["maxSeqLen"])  # type: ignore[arg-type]
    bias = kw.get("timestampBias", kw.get("biasTimestamp")) is not None
    batch = len(kw["seqOffset"]) - 1 if "seqOffset" in kw else q.size(0)  # type: ignore[arg-type, union-attr]
    op = BWD if "grad" in kw else FWD
    path = "biases" if bias else None
    return BudgetUse(op=op, path=path, units=_units(q, batch, s, 3 if bias else 1))  # type: ignore[arg-type]


SPECS = [
    OpSpec(
        name="hstu_fuxi",
        op=_op,
        inputs=_inputs(False),
        compare=Compare(TOL),
        budget=_budget,
        reference=fuxi_reference,
        backward=True,
        grad_inputs=("q", "k", "v"),
    ),
    OpSpec(
        name="hstu_fuxi[bias]",
        op=_op,
        inputs=_inputs(True),
        compare=Compare(TOL),
        budget=_budget,
        reference=fuxi_reference,
        backward=True,
        grad_inputs=("q", "k", "v", "timestampBias", "positionBias"),
    ),
    OpSpec(
        name="hstu_fuxi[normal]",
        op=_op,
        inputs=_inputs(True, "normal"),
        compare=Compare(TOL),
        budget=_budget,
        reference=fuxi_reference,
        backward=True,
        grad_inputs=("q", "k", "v", "timestampBias", "positionBias"),
    ),
    OpSpec(
        name="hstu_dense_backward_fuxi",
        op=_bwd_op,
        inputs=_inputs(None, backward=True),
        compare=Compare(TOL),
        budget=_budget,
        reference=_bwd_reference,
    ),
]
