"""``mxrec::split_2d_jagged``: Rec SDK's inverse of ``concat_2d_jagged`` (the seed's
``concat_jagged_tensor_grad``), with generative-recommenders' options.

Schema (Rec SDK, ``concat_jagged_tensor.cpp``)::

    split_2d_jagged(Tensor values, SymInt maxSeqlen, Tensor offsetA, Tensor offsetB,
        SymInt dense_size=0, SymInt nPrefixToRight=0) -> (Tensor, Tensor)

Math: ``values`` laid out as ``concat_2d_jagged(A, B, nPrefixFromRight=n)`` lays out its
output (``n = nPrefixToRight``: per batch B's first ``min(n, lB_j)`` rows, A's, B's rest; GR's
``split_2D_jagged_w_prefix``), returns ``(A [oA[-1], D], B [oB[-1], D])``: the rows of
``values`` through the inverse of ``_plan.py``'s permutation (one ``index_copy_`` of an
``arange`` into a zeroed int64 buffer, then one ``index_select`` per output).  Rows of
``values`` past ``oA[-1] + oB[-1]`` are not returned.  A dense side (GR's ``offsets=None``,
whose ``dense_size`` argument this is): an empty offsets tensor; that output is
``[B, dense_size, D]`` and the other has ``values.size(0) - B * dense_size`` rows (GR's
``seq_len_b = L - seq_len_a``).  ``dense_size`` is ignored when both sides are jagged (as in
GR); ``maxSeqlen`` (a GR kernel grid size, ignored by Rec SDK) is not needed.

The one host read: with both sides jagged the output sizes ``oA[-1]`` and ``oB[-1]`` are the
data's, and nothing in the schema gives them (``maxSeqlen`` bounds one sequence, not the
totals), so one ``DataChecks.read_with`` reads both with this call's checks and every queued
one (1 sync, as Rec SDK's adapter).  A dense side needs none.  The autograd backward of
``concat_2d_jagged`` runs this split with the forward's sizes: no read there.

Autograd (PrivateUse1 and CPU): the backward is ``concat_2d_jagged`` of the two gradients
(rows of ``values`` that were not returned get 0).  dtypes as ``concat.py``.  Data checks:
offsets from 0, non-decreasing, ``oA[-1] + oB[-1] <= values.size(0)`` (read at the call on the
jagged path, queued on a dense one).  Launches: see ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_dtype,
    check_ndim,
    check_on_device,
    check_same_device,
    check_tensor,
    dynamic_size,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.mxrec.jagged2d._args import (
    VALUE_DTYPES,
    check_offsets,
    check_sizes,
    dense_offsets,
    offsets_ok,
)
from fbgemm_npu.native.mxrec.jagged2d._plan import source_rows

__all__ = ["KERNELS", "SCHEMAS", "SPLIT_2D_JAGGED", "split_rows"]

SPLIT_2D_JAGGED = "mxrec::split_2d_jagged"
SCHEMAS = {
    SPLIT_2D_JAGGED: "split_2d_jagged(Tensor values, SymInt maxSeqlen, Tensor offsetA, "
    "Tensor offsetB, SymInt dense_size=0, SymInt nPrefixToRight=0) -> (Tensor, Tensor)",
}
_WHAT = (
    "arguments 'offsetA' and 'offsetB' must start at 0, be non-decreasing and end within "
    "values: offsetA[-1] + offsetB[-1] <= values.size(0)"
)


def _check(
    values: object,
    maxSeqlen: object,
    offsetA: object,
    offsetB: object,
    dense_size: object,
    nPrefixToRight: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Host checks (no launch): ``(values, oA, oB, batches)``."""
    op = SPLIT_2D_JAGGED
    check_sizes(op, maxSeqlen=maxSeqlen, dense_size=dense_size, nPrefixToRight=nPrefixToRight)
    v = check_tensor(op, "values", values)
    check_dtype(op, "values", check_ndim(op, "values", v, (2,)), VALUE_DTYPES)
    oa, ob = check_offsets(op, offsetA, offsetB)
    check_same_device(op, values=v, offsetA=oa, offsetB=ob)
    batches = max(oa.numel(), ob.numel()) - 1
    if (oa.numel() == 0 or ob.numel() == 0) and isinstance(dense_size, int):
        if batches * dense_size > v.size(0):
            raise ValueError(
                f"{op}: argument 'dense_size' = {dense_size} asks B * dense_size = "
                f"{batches * dense_size} rows, values has {v.size(0)}"
            )
    return v, oa, ob, batches


def split_rows(
    v: torch.Tensor,
    oa: torch.Tensor,
    ob: torch.Tensor,
    sa: int,
    sb: int,
    n: int,
    replace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two row blocks of ``v`` (no checks, ``sa + sb <= v.size(0)``; with ``replace``, the
    scatter backward of a replacing concat: ``v`` has ``sa`` rows).  Shared with the concat's
    backward."""
    op = SPLIT_2D_JAGGED
    d = v.size(1)
    with allocation_of(op, f"the outputs of 'offsetA' and 'offsetB' ({sa} + {sb} rows)"):
        if replace:  # replaced rows of A and unused rows of B: no gradient
            full = v.new_zeros((sa + sb, d))
            full.index_copy_(0, source_rows(oa, ob, sa, sb, 0, True), v)
            return full[:sa], full[sa:]
        src = source_rows(oa, ob, sa, sb, n, False)  # values row r holds cat row src[r]
        inv = torch.zeros(sa + sb, dtype=torch.int64, device=v.device)
        inv.index_copy_(0, src, arange_cached(sa + sb, v.device))
        return v.index_select(0, inv[:sa]), v.index_select(0, inv[sa:])


def _sizes(
    v: torch.Tensor, oa: torch.Tensor, ob: torch.Tensor, batches: int, dense_size: int
) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Jagged offsets for both sides and the output row counts (the jagged path's one read)."""
    tv = v.size(0)
    if oa.numel() and ob.numel():
        checks = DataChecks(SPLIT_2D_JAGGED)
        if validation_enabled():
            checks.require(offsets_ok([oa, ob], None), _WHAT)  # the sum: on the host
        sa, sb = checks.read_with([oa[-1], ob[-1]])
        if min(sa, sb) < 0 or sa + sb > tv:  # only with the checks off
            raise ValueError(f"{SPLIT_2D_JAGGED}: {_WHAT}; got {sa} + {sb} and {tv} rows")
        return oa, ob, sa, sb
    dense = batches * dense_size
    jagged = oa if oa.numel() else ob
    if validation_enabled():
        check_on_device(SPLIT_2D_JAGGED, offsets_ok([jagged], [tv - dense]), _WHAT)
    other = dense_offsets(batches, dense_size, jagged)
    if oa.numel() == 0:
        return other, ob, dense, tv - dense
    return oa, other, tv - dense, dense


def split_2d_jagged(
    values: torch.Tensor,
    maxSeqlen: int,
    offsetA: torch.Tensor,
    offsetB: torch.Tensor,
    dense_size: int = 0,
    nPrefixToRight: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PrivateUse1 / CPU: ``(A, B)`` (1 sync on the jagged path, none with a dense side)."""
    v, oa, ob, batches = _check(values, maxSeqlen, offsetA, offsetB, dense_size, nPrefixToRight)
    dense_a, dense_b = oa.numel() == 0, ob.numel() == 0
    oa, ob, sa, sb = _sizes(v, oa, ob, batches, int(dense_size))
    a, b = split_rows(v, oa, ob, sa, sb, int(nPrefixToRight))
    if dense_a:
        a = a.view(batches, int(dense_size), v.size(1))
    if dense_b:
        b = b.view(batches, int(dense_size), v.size(1))
    return a, b


def _split_meta(
    values: torch.Tensor,
    maxSeqlen: int,
    offsetA: torch.Tensor,
    offsetB: torch.Tensor,
    dense_size: int = 0,
    nPrefixToRight: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    v, oa, ob, batches = _check(values, maxSeqlen, offsetA, offsetB, dense_size, nPrefixToRight)
    d = v.size(1)
    if oa.numel() == 0:
        return v.new_empty((batches, dense_size, d)), v.new_empty(
            (v.size(0) - batches * dense_size, d)
        )
    if ob.numel() == 0:
        return v.new_empty((v.size(0) - batches * dense_size, d)), v.new_empty(
            (batches, dense_size, d)
        )
    why = "offsetA[-1] and offsetB[-1] give the output rows"
    sa = dynamic_size(SPLIT_2D_JAGGED, why, v.size(0))
    sb = dynamic_size(SPLIT_2D_JAGGED, why, v.size(0))
    return v.new_empty((sa, d)), v.new_empty((sb, d))


class _Split(torch.autograd.Function):
    """The split; its backward the concat of the two gradients by the same offsets."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        values: torch.Tensor,
        maxSeqlen: int,
        offsetA: torch.Tensor,
        offsetB: torch.Tensor,
        dense_size: int,
        nPrefixToRight: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = below_autograd(
            torch.ops.mxrec.split_2d_jagged,
            values,
            maxSeqlen,
            offsetA,
            offsetB,
            dense_size,
            nPrefixToRight,
        )
        ctx.save_for_backward(offsetA, offsetB)
        # no output size is saved: they may be unbacked (traced), and the gradients have them
        ctx.meta = (values.shape, nPrefixToRight)
        return a, b

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        ga: torch.Tensor | None,
        gb: torch.Tensor | None,
    ) -> tuple[torch.Tensor, None, None, None, None, None]:
        oa, ob = ctx.saved_tensors
        vshape, n = ctx.meta  # ga, gb: materialized (zeros where unused)
        # the op, not its kernel: under a trace its fake kernel sizes the gradient
        g = torch.ops.mxrec.concat_2d_jagged(0, ga, gb, oa, ob, False, n)
        d = vshape[1]
        rest = vshape[0] - g.size(0)  # rows past oA[-1] + oB[-1]: not returned, no gradient
        if not isinstance(rest, int) or rest > 0:  # symbolic (traced): always padded
            g = torch.cat([g, g.new_zeros((rest, d))])
        return g, None, None, None, None, None


def _split_autograd(
    values: torch.Tensor,
    maxSeqlen: int,
    offsetA: torch.Tensor,
    offsetB: torch.Tensor,
    dense_size: int = 0,
    nPrefixToRight: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AutogradPrivateUse1 / AutogradCPU: recorded only when ``values`` needs a gradient."""
    if not needs_grad(values):
        return below_autograd(
            torch.ops.mxrec.split_2d_jagged,
            values,
            maxSeqlen,
            offsetA,
            offsetB,
            dense_size,
            nPrefixToRight,
        )
    return _Split.apply(values, maxSeqlen, offsetA, offsetB, dense_size, nPrefixToRight)


KERNELS = {
    SPLIT_2D_JAGGED: {
        "PrivateUse1": split_2d_jagged,
        "CPU": split_2d_jagged,
        "AutogradPrivateUse1": _split_autograd,
        "AutogradCPU": _split_autograd,
        "Meta": _split_meta,
    },
}
