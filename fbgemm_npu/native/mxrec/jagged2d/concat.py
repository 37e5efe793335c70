"""``mxrec::concat_2d_jagged``: Rec SDK's per-batch concatenation of two 2-D jagged tensors
(the seed's ``concat_jagged_tensor``), with generative-recommenders' options.

Schema (Rec SDK, ``concat_jagged_tensor.cpp``)::

    concat_2d_jagged(SymInt maxSeqlen, Tensor valuesA, Tensor valuesB, Tensor offsetA,
        Tensor offsetB, bool isReplace=False, SymInt nPrefixFromRight=0) -> Tensor

Math (B batches, ``oA`` / ``oB`` of length ``B + 1`` from 0, ``p_j = min(n, lB_j)``)::

    out[oA_j + oB_j :][: lA_j + lB_j] = [B[oB_j : oB_j + p_j], A[oA_j : oA_{j+1}],
                                         B[oB_j + p_j : oB_{j+1}]]

(``n = nPrefixFromRight``, GR's ``n_prefix_from_right``: B's first ``n`` rows go in front of
A; Rec SDK's golden ``concat_jagged_tensor_golden_with_prefix`` takes ``min(n, lB_j)``; 0 is
Rec SDK's plain concat).  The output has ``A.size(0) + B.size(0)`` rows: after the last batch,
A's rows past ``oA[-1]``, then B's past ``oB[-1]`` (Rec SDK allows values longer than their
offsets), so the op is a permutation of ``cat([A, B])``.  ``isReplace`` (GR's
``pytorch_concat_2D_jagged_jagged(is_replace=True)`` = ``pytorch_replace_last_n_with_jagged``):
the output is A with the last ``min(lA_j, lB_j)`` rows of each batch replaced by B's last rows,
``A.size(0)`` rows; GR supports it only without a prefix, so ``isReplace`` with
``nPrefixFromRight > 0`` is refused.  A dense side (GR's ``offsets=None``): an empty offsets
tensor and 3-D values ``[B, dense_size, D]`` (batch ``j``'s rows ``j * dense_size ...``); a
dense ``A`` under ``isReplace`` returns ``A``'s shape.  ``maxSeqlen`` (GR's max sequence
length, a kernel grid size; Rec SDK ignores it) is not needed: the row arithmetic covers any
length, and no offset is read on the host.

Autograd (PrivateUse1 and CPU): the backward is the split (``split.py``) of the gradient with
the forward's offsets and row counts (no read); with ``isReplace`` a scatter of the gradient
(replaced rows of A and unused rows of B get 0).

dtypes: values float32 / float16 / bfloat16 / int32 (Rec SDK) and int64, both of one dtype and
width ``D``; offsets int32 / int64 (mixed allowed).  Rec SDK's length cap (``B + 1 <= 1024``) is
a kernel limit we do not share.  Data checks (queued): offsets from 0, non-decreasing, within
their values.  Launches: see ``budgets.py`` (the row map of ``_plan.py``, a ``cat`` of the
values and one ``index_select``); no sync.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_on_device,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.mxrec.jagged2d._args import (
    VALUE_DTYPES,
    check_offsets,
    check_sizes,
    dense_offsets,
    offsets_ok,
)
from fbgemm_npu.native.mxrec.jagged2d._plan import source_rows

__all__ = ["CONCAT_2D_JAGGED", "KERNELS", "SCHEMAS", "concat_rows"]

CONCAT_2D_JAGGED = "mxrec::concat_2d_jagged"
SCHEMAS = {
    CONCAT_2D_JAGGED: "concat_2d_jagged(SymInt maxSeqlen, Tensor valuesA, Tensor valuesB, "
    "Tensor offsetA, Tensor offsetB, bool isReplace=False, SymInt nPrefixFromRight=0) -> Tensor",
}


def _check(
    maxSeqlen: object,
    valuesA: object,
    valuesB: object,
    offsetA: object,
    offsetB: object,
    isReplace: bool,
    nPrefixFromRight: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Host checks (no launch); returns ``(A, B, oA, oB, batches)`` with 2-D values views."""
    op = CONCAT_2D_JAGGED
    check_sizes(op, maxSeqlen=maxSeqlen, nPrefixFromRight=nPrefixFromRight)
    if isReplace and not (isinstance(nPrefixFromRight, int) and nPrefixFromRight == 0):
        raise ValueError(
            f"{op}: argument 'nPrefixFromRight' must be 0 with isReplace=True (GR defines no "
            f"prefix for a replace), got {nPrefixFromRight}"
        )
    oa, ob = check_offsets(op, offsetA, offsetB)
    batches = max(oa.numel(), ob.numel()) - 1
    flat = []
    for name, v, o in (("valuesA", valuesA, oa), ("valuesB", valuesB, ob)):
        t = check_tensor(op, name, v)
        check_ndim(op, name, t, (3,) if o.numel() == 0 else (2,))
        check_dtype(op, name, t, VALUE_DTYPES)
        if o.numel() == 0 and t.size(0) != batches:
            raise ValueError(
                f"{op}: argument '{name}' (dense: empty offsets) must be [B, dense_size, D] with "
                f"B = {batches}, got shape {tuple(t.shape)}"
            )
        flat.append(t.reshape(-1, t.size(-1)) if t.dim() == 3 else t)
    a, b = flat
    if a.size(1) != b.size(1) or a.dtype != b.dtype:
        raise ValueError(
            f"{op}: arguments 'valuesA' {tuple(a.shape)} {a.dtype} and 'valuesB' "
            f"{tuple(b.shape)} {b.dtype} must have the same width D and dtype"
        )
    check_same_device(op, valuesA=a, valuesB=b, offsetA=oa, offsetB=ob)
    return a, b, oa, ob, batches


def concat_rows(
    a: torch.Tensor, b: torch.Tensor, oa: torch.Tensor, ob: torch.Tensor, n: int, replace: bool
) -> torch.Tensor:
    """The concat of the 2-D values by jagged offsets (no checks): ``cat`` + ``index_select``
    by :func:`source_rows`.  Shared with the split's backward."""
    ta, tb = a.size(0), b.size(0)
    rows = ta if replace else ta + tb
    with allocation_of(CONCAT_2D_JAGGED, f"the output of 'valuesA' and 'valuesB' ({rows} rows)"):
        src = source_rows(oa, ob, ta, tb, n, replace)
        return torch.cat([a, b]).index_select(0, src)


def _jagged(
    oa: torch.Tensor, ob: torch.Tensor, batches: int, shape_a: torch.Size, shape_b: torch.Size
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both offsets jagged: a dense side's (values ``[B, n, D]``) ``n * arange`` (1 launch)."""
    if oa.numel() == 0:
        oa = dense_offsets(batches, shape_a[1], ob)
    if ob.numel() == 0:
        ob = dense_offsets(batches, shape_b[1], oa)
    return oa, ob


def concat_2d_jagged(
    maxSeqlen: int,
    valuesA: torch.Tensor,
    valuesB: torch.Tensor,
    offsetA: torch.Tensor,
    offsetB: torch.Tensor,
    isReplace: bool = False,
    nPrefixFromRight: int = 0,
) -> torch.Tensor:
    """PrivateUse1 / CPU: ``[A.size(0) + B.size(0), D]`` (``isReplace``: A's shape); no sync."""
    a, b, oa, ob, batches = _check(
        maxSeqlen, valuesA, valuesB, offsetA, offsetB, isReplace, nPrefixFromRight
    )
    if validation_enabled():
        given = [(o, t.size(0)) for o, t in ((oa, a), (ob, b)) if o.numel()]
        ok = offsets_ok([o for o, _ in given], [t for _, t in given])
        check_on_device(
            CONCAT_2D_JAGGED,
            ok,
            "arguments 'offsetA' and 'offsetB' must start at 0, be non-decreasing and end "
            "within the rows of valuesA / valuesB",
        )
    oa, ob = _jagged(oa, ob, batches, valuesA.shape, valuesB.shape)
    out = concat_rows(a, b, oa, ob, int(nPrefixFromRight), isReplace)
    return out.view(valuesA.shape) if isReplace and valuesA.dim() == 3 else out


def _concat_meta(
    maxSeqlen: int,
    valuesA: torch.Tensor,
    valuesB: torch.Tensor,
    offsetA: torch.Tensor,
    offsetB: torch.Tensor,
    isReplace: bool = False,
    nPrefixFromRight: int = 0,
) -> torch.Tensor:
    a, b, _, _, _ = _check(
        maxSeqlen, valuesA, valuesB, offsetA, offsetB, isReplace, nPrefixFromRight
    )
    if isReplace:
        return valuesA.new_empty(valuesA.shape)
    return a.new_empty((a.size(0) + b.size(0), a.size(1)))


class _Concat(torch.autograd.Function):
    """The concat; its backward the split of the gradient by the same offsets."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        maxSeqlen: int,
        valuesA: torch.Tensor,
        valuesB: torch.Tensor,
        offsetA: torch.Tensor,
        offsetB: torch.Tensor,
        isReplace: bool,
        nPrefixFromRight: int,
    ) -> torch.Tensor:
        ctx.save_for_backward(offsetA, offsetB)
        ctx.shapes = (valuesA.shape, valuesB.shape)
        ctx.options = (isReplace, int(nPrefixFromRight))
        return below_autograd(
            torch.ops.mxrec.concat_2d_jagged,
            maxSeqlen,
            valuesA,
            valuesB,
            offsetA,
            offsetB,
            isReplace,
            nPrefixFromRight,
        )

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[None, torch.Tensor | None, torch.Tensor | None, None, None, None, None]:
        from fbgemm_npu.native.mxrec.jagged2d.split import split_rows

        oa, ob = ctx.saved_tensors
        (sa, sb), (replace, n) = ctx.shapes, ctx.options
        batches = max(oa.numel(), ob.numel()) - 1
        rows_a = sa[0] * sa[1] if len(sa) == 3 else sa[0]
        rows_b = sb[0] * sb[1] if len(sb) == 3 else sb[0]
        oa, ob = _jagged(oa, ob, batches, sa, sb)
        g = grad.reshape(-1, grad.size(-1))
        ga, gb = split_rows(g, oa, ob, rows_a, rows_b, n, replace)
        return None, ga.view(sa), gb.view(sb), None, None, None, None


def _concat_autograd(
    maxSeqlen: int,
    valuesA: torch.Tensor,
    valuesB: torch.Tensor,
    offsetA: torch.Tensor,
    offsetB: torch.Tensor,
    isReplace: bool = False,
    nPrefixFromRight: int = 0,
) -> torch.Tensor:
    """AutogradPrivateUse1 / AutogradCPU: recorded only when a values tensor needs a gradient."""
    if not needs_grad(valuesA, valuesB):
        return below_autograd(
            torch.ops.mxrec.concat_2d_jagged,
            maxSeqlen,
            valuesA,
            valuesB,
            offsetA,
            offsetB,
            isReplace,
            nPrefixFromRight,
        )
    return _Concat.apply(maxSeqlen, valuesA, valuesB, offsetA, offsetB, isReplace, nPrefixFromRight)


KERNELS = {
    CONCAT_2D_JAGGED: {
        "PrivateUse1": concat_2d_jagged,
        "CPU": concat_2d_jagged,
        "AutogradPrivateUse1": _concat_autograd,
        "AutogradCPU": _concat_autograd,
        "Meta": _concat_meta,
    },
}
