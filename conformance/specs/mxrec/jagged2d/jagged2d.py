"""Specs of ``mxrec::concat_2d_jagged`` and ``mxrec::split_2d_jagged`` (forward, and the
backward of each through autograd).

No upstream CPU kernel exists (the CPU kernel is ours): values are checked against references
written from the definitions with Python slicing per batch (Rec SDK's goldens
``concat_jagged_tensor_golden_with_prefix`` / ``split_jagged_tensor_golden_with_prefix``, GR's
``pytorch_replace_last_n_with_jagged``; rows past the offsets appended as the op defines),
float values in float64.  Inputs: float32 / float16 / bfloat16 / int32 / int64 values, int32 /
int64 offsets (mixed too), empty batches and sequences, prefixes larger than a sequence,
replace, a dense side (empty offsets), values longer than their offsets, one invalid example
in ten (offsets of two lengths, a dtype).

Tolerances: both ops move rows, so every dtype is compared exactly; the gradients are rows of
the float64 grad_output rounded once to the input's dtype (``GRAD``).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.harness import BudgetUse, Compare, OpSpec, Tol

M = torch.ops.mxrec
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
EXACT = {d: Tol(rtol=0.0, atol=0.0) for d in (*FLOATS, torch.float64)}
GRAD = {
    torch.float32: Tol(rtol=1e-7, atol=0.0),
    torch.float16: Tol(rtol=1e-3, atol=0.0),
    torch.bfloat16: Tol(rtol=8e-3, atol=0.0),
    torch.float64: Tol(rtol=0.0, atol=0.0),
}


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.double() if t.is_floating_point() else t


def _jagged(values: torch.Tensor, offsets: torch.Tensor, batches: int) -> tuple:
    """A dense side (empty offsets, values ``[B, n, D]``) as rows and offsets; lists."""
    if offsets.numel() == 0:
        n = values.size(1)
        return values.reshape(-1, values.size(-1)), [n * j for j in range(batches + 1)]
    return values, offsets.tolist()


def concat_reference(
    maxSeqlen, valuesA, valuesB, offsetA, offsetB, isReplace=False, nPrefixFromRight=0
):
    """Per batch ``[B[:p], A, B[p:]]`` (``p = min(n, lB)``), then A's and B's trailing rows;
    ``isReplace``: A with its last ``min(lA, lB)`` rows replaced by B's last rows."""
    batches = max(offsetA.numel(), offsetB.numel()) - 1
    a, oa = _jagged(_f64(valuesA), offsetA, batches)
    b, ob = _jagged(_f64(valuesB), offsetB, batches)
    if isReplace:
        out = a.clone()
        for j in range(batches):
            q = min(oa[j + 1] - oa[j], ob[j + 1] - ob[j])
            if q:
                out[oa[j + 1] - q : oa[j + 1]] = b[ob[j + 1] - q : ob[j + 1]]
        out = out + 0 * b.sum()  # B is an input of the op even where nothing is replaced
        return out.view(valuesA.shape) if valuesA.dim() == 3 else out
    parts = []
    for j in range(batches):
        bj = b[ob[j] : ob[j + 1]]
        p = min(nPrefixFromRight, bj.size(0))
        parts += [bj[:p], a[oa[j] : oa[j + 1]], bj[p:]]
    parts += [a[oa[-1] :], b[ob[-1] :]]
    return torch.cat(parts)


def split_reference(values, maxSeqlen, offsetA, offsetB, dense_size=0, nPrefixToRight=0):
    """The inverse of :func:`concat_reference`: walks ``values`` batch by batch."""
    batches = max(offsetA.numel(), offsetB.numel()) - 1
    v = _f64(values)
    dense = [dense_size * j for j in range(batches + 1)]
    oa = offsetA.tolist() if offsetA.numel() else dense
    ob = offsetB.tolist() if offsetB.numel() else dense
    a_rows, b_rows, r = [], [], 0
    for j in range(batches):
        la, lb = oa[j + 1] - oa[j], ob[j + 1] - ob[j]
        p = min(nPrefixToRight, lb)
        b_rows.append(v[r : r + p])
        a_rows.append(v[r + p : r + p + la])
        b_rows.append(v[r + p + la : r + la + lb])
        r += la + lb
    a, b = torch.cat([v[:0], *a_rows]), torch.cat([v[:0], *b_rows])
    if offsetA.numel() == 0:
        a = a.view(batches, dense_size, v.size(1))
    if offsetB.numel() == 0:
        b = b.view(batches, dense_size, v.size(1))
    return a, b


def _lengths(draw: st.DrawFn, batches: int) -> torch.Tensor:
    return torch.tensor(
        draw(st.lists(st.integers(0, 4), min_size=batches, max_size=batches)), dtype=torch.int64
    )


def _offsets(lengths: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(dtype)


@st.composite
def concat_inputs(draw: st.DrawFn, requires_grad: bool = False) -> dict[str, object]:
    batches, d = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    kinds = FLOATS if requires_grad else (*FLOATS, torch.int32, torch.int64)
    dtype = draw(st.sampled_from(kinds))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    replace = draw(st.booleans())
    dense = draw(st.sampled_from(("none", "none", "A", "B")))
    sides = {}
    for side in "AB":
        odt = draw(st.sampled_from((torch.int32, torch.int64)))
        if dense == side:
            n = draw(st.integers(0, 3))
            v = (torch.randn(batches, n, d, generator=gen) * 50).to(dtype)
            sides[side] = (v, torch.empty(0, dtype=odt))
        else:
            o = _offsets(_lengths(draw, batches), odt)
            extra = draw(st.sampled_from((0, 0, 2)))
            v = (torch.randn(int(o[-1]) + extra, d, generator=gen) * 50).to(dtype)
            sides[side] = (v, o)
    (a, oa), (b, ob) = sides["A"], sides["B"]
    if not requires_grad and draw(st.integers(0, 9)) == 9:
        ob = torch.cat([ob, ob[-1:]]) if ob.numel() else ob.to(torch.float32)
    return {
        "maxSeqlen": 8,
        "valuesA": a.requires_grad_(requires_grad),
        "valuesB": b.requires_grad_(requires_grad),
        "offsetA": oa,
        "offsetB": ob,
        "isReplace": replace,
        "nPrefixFromRight": 0 if replace else draw(st.sampled_from((0, 1, 3))),
    }


@st.composite
def split_inputs(draw: st.DrawFn, requires_grad: bool = False) -> dict[str, object]:
    batches, d = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    kinds = FLOATS if requires_grad else (*FLOATS, torch.int32, torch.int64)
    dtype = draw(st.sampled_from(kinds))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    dense = draw(st.sampled_from(("none", "none", "A", "B")))
    dense_size = draw(st.integers(0, 3))
    offs = {}
    for side in "AB":
        odt = draw(st.sampled_from((torch.int32, torch.int64)))
        offs[side] = (
            torch.empty(0, dtype=odt) if dense == side else _offsets(_lengths(draw, batches), odt)
        )
    rows = sum(int(o[-1]) if o.numel() else batches * dense_size for o in offs.values())
    extra = draw(st.sampled_from((0, 0, 3))) if dense == "none" else 0
    v = (torch.randn(rows + extra, d, generator=gen) * 50).to(dtype)
    if not requires_grad and draw(st.integers(0, 9)) == 9:
        v = v[:-1] if rows + extra else v.to(torch.float64)
    return {
        "values": v.requires_grad_(requires_grad),
        "maxSeqlen": 8,
        "offsetA": offs["A"],
        "offsetB": offs["B"],
        "dense_size": dense_size,
        "nPrefixToRight": draw(st.sampled_from((0, 1, 3))),
    }


def _concat_budget(offsetA, offsetB, isReplace=False, nPrefixFromRight=0, **_) -> BudgetUse:
    dense = offsetA.numel() == 0 or offsetB.numel() == 0 or offsetA.dtype != offsetB.dtype
    prefix = isReplace or nPrefixFromRight > 0
    path = {(False, False): None, (True, False): "dense", (False, True): "prefix"}.get(
        (dense, prefix), "dense_prefix"
    )
    return BudgetUse(op="mxrec::concat_2d_jagged", path=path)


def _split_budget(offsetA, offsetB, nPrefixToRight=0, **_) -> BudgetUse:
    if offsetA.numel() == 0 or offsetB.numel() == 0:
        kind = "dense"
    else:
        kind = "mixed" if offsetA.dtype != offsetB.dtype else ""
    path = "_".join(k for k in (kind, "prefix" if nPrefixToRight else "") if k) or None
    return BudgetUse(op="mxrec::split_2d_jagged", path=path)


def _both(out):
    return list(out)


SPECS = [
    OpSpec(
        name="concat_2d_jagged",
        op=lambda **kw: M.concat_2d_jagged(**kw),
        inputs=concat_inputs(),
        compare=Compare(EXACT),
        budget=_concat_budget,
        reference=concat_reference,
    ),
    OpSpec(
        name="concat_2d_jagged[grad]",
        op=lambda **kw: M.concat_2d_jagged(**kw),
        inputs=concat_inputs(requires_grad=True),
        compare=Compare(GRAD),
        budget=_concat_budget,
        reference=concat_reference,
        backward=True,
        grad_inputs=("valuesA", "valuesB"),
    ),
    OpSpec(
        name="split_2d_jagged",
        op=lambda **kw: _both(M.split_2d_jagged(**kw)),
        inputs=split_inputs(),
        compare=Compare(EXACT),
        budget=_split_budget,
        reference=lambda **kw: _both(split_reference(**kw)),
    ),
    OpSpec(
        name="split_2d_jagged[grad]",
        op=lambda **kw: _both(M.split_2d_jagged(**kw)),
        inputs=split_inputs(requires_grad=True),
        compare=Compare(GRAD),
        budget=_split_budget,
        reference=lambda **kw: _both(split_reference(**kw)),
        backward=True,
        grad_inputs=("values",),
    ),
]
