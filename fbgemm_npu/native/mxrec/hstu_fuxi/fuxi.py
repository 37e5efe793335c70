"""``mxrec::hstu_fuxi`` and ``mxrec::hstu_dense_backward_fuxi``: Rec SDK's FuXi-alpha attention
(recsdk-ops.md section 3), the same tensor program on npu and CPU.

Schemas are Rec SDK's, verbatim (camelCase names, the layout string, ``seqOffset`` a host int list
``[B + 1]``).  ``q, k, v`` are jagged ``[T, N, D]`` (rows of batch ``b`` are
``seqOffset[b]:seqOffset[b + 1]``) or normal ``[B, S, N, D]`` (``S = maxSeqLen``), one shape
for the three (no GQA).  With ``s = siluScale`` or ``1 / maxSeqLen`` and ``M`` the mask of
``maskType`` (0: causal; 2: none; 3: the custom ``mask [B, N, S, S]``; 1 refused) on the valid
rows and keys, per head::

    out_score = (silu(q k^T) * s * M) @ v
    out_ts    = (timestampBias[b] * M) @ v          timestampBias [B, S, S], over the heads
    out_pos   = (positionBias[0] * M) @ v           positionBias  [1, S, S], over batch and heads
    out       = [out_score | out_ts | out_pos]      [T, 3 * N * D] / [B, S, 3 * N * D]

in blocks of ``N * D`` (head-major), the bias channels only when both biases are given (else
``[T, N * D]`` / ``[B, S, N * D]``).  The backward op takes Rec SDK's *other* layout: ``grad
[T, N, 3D]``, per head ``[g_score | g_ts | g_pos]`` (``[T, N, D]`` without biases), jagged only
as Rec SDK's, and returns ``(dq, dk, dv, dpositionBias [1, S, S] = sum over batch and heads,
dtimestampBias [B, S, S] = sum over heads)``; without biases the last two are empty ``(0,)``
tensors (a schema ``Tensor`` cannot be None; Rec SDK returns undefined ones).

Layouts, resolved (Rec SDK binds no autograd; recsdk-ops.md open point 1): each op keeps its own
documented layout for direct callers, and autograd (AutogradPrivateUse1 / AutogradCPU) binds
them: the output gradient ``[T, 3, N, D]`` is permuted to ``[T, N, 3, D]`` inside the autograd
Function (one copy; a view without biases), a normal-layout call goes to the backward op as
``B`` jagged sequences of ``S`` rows (``seqOffset = [0, S, .., B * S]``: views, host
arithmetic).  Gradients for q, k, v, timestampBias and positionBias (None without biases), none
for the mask.

Cost: the padded layout and query tiles of ``_program.py``: launches grow with the tiles only,
never with B or N; 0 data checks and 0 syncs (``seqOffset`` is checked on the host, ``_args.py``;
its upload is pinned and non-blocking); 0 AI-CPU.  BUDGETS in budgets.py.
"""

from __future__ import annotations

from typing import Any

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import allocation_of, check_same_device, check_tensor
from fbgemm_npu.native._upload import upload
from fbgemm_npu.native.mxrec.hstu._attention import Problem
from fbgemm_npu.native.mxrec.hstu._rows import Rows, jagged_rows, padded_rows
from fbgemm_npu.native.mxrec.hstu._spans import build_spans
from fbgemm_npu.native.mxrec.hstu_fuxi._args import Call, check_call
from fbgemm_npu.native.mxrec.hstu_fuxi._program import Fuxi, fuxi_backward, fuxi_forward

__all__ = ["BWD", "FWD", "KERNELS", "SCHEMAS", "hstu_dense_backward_fuxi", "hstu_fuxi"]

FWD = "mxrec::hstu_fuxi"
BWD = "mxrec::hstu_dense_backward_fuxi"
SCHEMAS = {
    FWD: "hstu_fuxi(Tensor q, Tensor k, Tensor v, Tensor? timestampBias=None, "
    "Tensor? positionBias=None, Tensor? mask=None, int maskType=0, int maxSeqLen=0, "
    'float siluScale=0.0, str layout="normal", int[]? seqOffset=None) -> Tensor',
    BWD: "hstu_dense_backward_fuxi(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor? mask=None, "
    "Tensor? biasPosition=None, Tensor? biasTimestamp=None, "
    'str layout="jagged", int maskType=0, int maxSeqLen=0, float siluScale=0.0, '
    "int[]? seqOffset=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
}
_BWD_NAMES = ("biasTimestamp", "biasPosition")


def _problem(
    c: Call, extra: list[torch.Tensor] | None = None
) -> tuple[Fuxi, Rows | None, list[torch.Tensor]]:
    """The padded problem, the jagged rows' way back (None: normal layout) and the padded
    ``extra`` tensors.  Launches (jagged): the offsets' upload, the gather into the padded
    layout, the spans (lengths folded in: what lies past a length is never read)."""
    dev, s = c.q.device, c.s
    window = (-1, 0) if c.mask_type == 0 else (-1, -1)
    if c.layout == "normal":
        rows, (qp, kp, vp), padded = None, (c.q, c.k, c.v), list(extra or [])
        spans = build_spans(s, s, dev, None, window=window) if c.mask_type == 0 else None
    else:
        assert c.offsets is not None
        off = upload(c.offsets, torch.int32, dev)
        (qp, kp, vp, *padded), rows = padded_rows([c.q, c.k, c.v, *(extra or [])], off, s)
        spans = build_spans(s, s, dev, rows.lengths, window=window)
    p = Problem(qp, kp, vp, spans, mask=c.mask, scale=c.scale)
    return Fuxi(p, c.ts, c.pos), rows, padded


def _padded(c: Call) -> str:
    """What asks for the memory: the padded layout of 'seqOffset' (B) and 'maxSeqLen' (S)."""
    size = [c.batch, c.s, c.q.size(-2), c.q.size(-1)]
    return f"the padded [B, S, N, D] = {size} layout of 'seqOffset' and 'maxSeqLen'"


def hstu_fuxi(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    timestampBias: torch.Tensor | None = None,  # noqa: N803 - Rec SDK's argument names
    positionBias: torch.Tensor | None = None,  # noqa: N803
    mask: torch.Tensor | None = None,
    maskType: int = 0,  # noqa: N803
    maxSeqLen: int = 0,  # noqa: N803
    siluScale: float = 0.0,  # noqa: N803
    layout: str = "normal",
    seqOffset: list[int] | None = None,  # noqa: N803
) -> torch.Tensor:
    """Forward ``[T, C * N * D]`` / ``[B, S, C * N * D]`` (module docstring).  Launches: a
    setup of 20-22 (jagged; normal 3-8) plus 7-11 per query tile; 0 syncs (BUDGETS)."""
    c = check_call(
        FWD,
        q,
        k,
        v,
        timestampBias,
        positionBias,
        mask,
        maskType,
        maxSeqLen,
        siluScale,
        layout,
        seqOffset,
    )
    with allocation_of(FWD, _padded(c)):
        f, rows, _ = _problem(c)
        out = fuxi_forward(f)  # [B, S, C, N, D]
        if rows is None:
            return out.view(c.batch, c.s, -1)
        return jagged_rows(out.view(c.batch, c.s, -1), rows)


def _check_grad(grad: object, c: Call) -> torch.Tensor:
    g = check_tensor(BWD, "grad", grad)
    want = [c.q.size(0), c.q.size(1), c.channels * c.q.size(2)]
    if list(g.shape) != want or g.dtype != c.q.dtype:
        raise ValueError(
            f"{BWD}: argument 'grad' must have shape {want} ([T, N, 3D] with the biases: per "
            f"head score | ts | pos) and q's dtype {c.q.dtype}; got {list(g.shape)} {g.dtype}"
        )
    check_same_device(BWD, q=c.q, grad=g)
    return g


def hstu_dense_backward_fuxi(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    biasPosition: torch.Tensor | None = None,  # noqa: N803
    biasTimestamp: torch.Tensor | None = None,  # noqa: N803
    layout: str = "jagged",
    maskType: int = 0,  # noqa: N803
    maxSeqLen: int = 0,  # noqa: N803
    siluScale: float = 0.0,  # noqa: N803
    seqOffset: list[int] | None = None,  # noqa: N803
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv, dpositionBias, dtimestampBias)`` for jagged ``grad [T, N, 3D]`` (module
    docstring).  Launches: a setup of 27-33 plus 10-23 per query tile; 0 syncs (BUDGETS)."""
    c = check_call(
        BWD,
        q,
        k,
        v,
        biasTimestamp,
        biasPosition,
        mask,
        maskType,
        maxSeqLen,
        siluScale,
        layout,
        seqOffset,
        _BWD_NAMES,
        ("jagged",),
    )
    g = _check_grad(grad, c)
    with allocation_of(BWD, _padded(c)):
        f, rows, (gp,) = _problem(c, [g])
        assert rows is not None
        *grads, dpos, dts = fuxi_backward(f, gp)
        dq, dk, dv = (jagged_rows(x, rows) for x in grads)  # 1 index_copy_ each
    if dpos is None or dts is None:
        return dq, dk, dv, c.q.new_empty(0), c.q.new_empty(0)
    return dq, dk, dv, dpos, dts


class _Fuxi(torch.autograd.Function):
    """``hstu_fuxi`` recorded; its backward is ``hstu_dense_backward_fuxi`` on the gradient in
    the backward op's layout (module docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, ts, pos, mask, rest):  # type: ignore[override]
        ctx.save_for_backward(q, k, v, ts, pos, mask)
        ctx.rest = rest
        return below_autograd(torch.ops.mxrec.hstu_fuxi, q, k, v, ts, pos, mask, **rest)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        q, k, v, ts, pos, mask = ctx.saved_tensors
        r: dict[str, Any] = ctx.rest
        n, d = q.shape[-2:]
        if r["layout"] == "normal":  # B jagged sequences of S rows: views, host offsets
            b, s = q.shape[:2]
            qkv, off = [x.reshape(b * s, n, d) for x in (q, k, v)], [i * s for i in range(b + 1)]
        else:
            qkv, off = [q, k, v], r["seqOffset"]
        t, c = qkv[0].size(0), 3 if ts is not None else 1
        # [T, C, N, D] (score | ts | pos blocks) -> [T, N, C, D] (per head): 1 copy, a view at C 1
        g = grad.reshape(t, c, n, d).transpose(1, 2).reshape(t, n, c * d)
        dq, dk, dv, dpos, dts = torch.ops.mxrec.hstu_dense_backward_fuxi(
            g, *qkv, mask, pos, ts, "jagged", r["maskType"], r["maxSeqLen"], r["siluScale"], off
        )
        dq, dk, dv = (x.view(y.shape) for x, y in zip((dq, dk, dv), (q, k, v), strict=True))
        bias = ts is not None
        return dq, dk, dv, dts if bias else None, dpos if bias else None, None, None


def _hstu_fuxi_autograd(
    q,
    k,
    v,
    timestampBias=None,
    positionBias=None,
    mask=None,
    maskType=0,
    maxSeqLen=0,
    siluScale=0.0,
    layout="normal",
    seqOffset=None,
):  # type: ignore[no-untyped-def]  # noqa: N803
    """The autograd kernel: records the call when q, k, v or a bias needs a gradient."""
    rest = dict(
        maskType=maskType,
        maxSeqLen=maxSeqLen,
        siluScale=siluScale,
        layout=layout,
        seqOffset=seqOffset,
    )
    if not needs_grad(q, k, v, timestampBias, positionBias):
        return below_autograd(
            torch.ops.mxrec.hstu_fuxi, q, k, v, timestampBias, positionBias, mask, **rest
        )
    return _Fuxi.apply(q, k, v, timestampBias, positionBias, mask, rest)


def _fwd_meta(
    q,
    k,
    v,
    timestampBias=None,
    positionBias=None,
    mask=None,
    maskType=0,
    maxSeqLen=0,
    siluScale=0.0,
    layout="normal",
    seqOffset=None,
):  # type: ignore[no-untyped-def]  # noqa: N803
    """The forward's shape after the host checks: ``[T, C * N * D]`` / ``[B, S, C * N * D]``."""
    c = check_call(
        FWD,
        q,
        k,
        v,
        timestampBias,
        positionBias,
        mask,
        maskType,
        maxSeqLen,
        siluScale,
        layout,
        seqOffset,
    )
    width = c.channels * c.q.size(-2) * c.q.size(-1)
    lead = c.q.shape[:1] if layout == "jagged" else c.q.shape[:2]
    return c.q.new_empty(*lead, width)


def _bwd_meta(
    grad,
    q,
    k,
    v,
    mask=None,
    biasPosition=None,
    biasTimestamp=None,
    layout="jagged",
    maskType=0,
    maxSeqLen=0,
    siluScale=0.0,
    seqOffset=None,
):  # type: ignore[no-untyped-def]  # noqa: N803
    """The backward's shapes after the host checks."""
    c = check_call(
        BWD,
        q,
        k,
        v,
        biasTimestamp,
        biasPosition,
        mask,
        maskType,
        maxSeqLen,
        siluScale,
        layout,
        seqOffset,
        _BWD_NAMES,
        ("jagged",),
    )
    _check_grad(grad, c)
    grads = (torch.empty_like(c.q), torch.empty_like(c.k), torch.empty_like(c.v))
    if c.channels == 1:
        return (*grads, c.q.new_empty(0), c.q.new_empty(0))
    return (*grads, c.q.new_empty(1, c.s, c.s), c.q.new_empty(c.batch, c.s, c.s))


KERNELS = {
    FWD: {
        "PrivateUse1": hstu_fuxi,
        "CPU": hstu_fuxi,
        "AutogradPrivateUse1": _hstu_fuxi_autograd,
        "AutogradCPU": _hstu_fuxi_autograd,
        "Meta": _fwd_meta,
    },
    BWD: {
        "PrivateUse1": hstu_dense_backward_fuxi,
        "CPU": hstu_dense_backward_fuxi,
        "Meta": _bwd_meta,
    },
}
