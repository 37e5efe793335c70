"""``mxrec::hstu_dense`` and ``mxrec::hstu_dense_backward``: HSTU attention on the normal layout
(every sequence ``S`` long), the tile program of ``_attention.py`` run on the inputs as they are.

``q [B, S, N_q, D_qk]``, ``k [B, S, N_k, D_qk]``, ``v [B, S, N_k, D_v]`` (float32 / float16 /
bfloat16; GQA ``N_q % N_k == 0``), output ``[B, S, N_q, D_v]``::

    out[b, i] = sum_j silu(q_i . k_j + rab[b, h, i, j]) * s * mask_ij * v_j,   s = silu_scale or 1/S

(alpha fixed at 1, as Rec SDK's normal layout has it).  ``max_seq_len`` is 0 or ``S``;
mask_type 0 (causal), 2 (none), 3 (custom ``mask [B, N_q, S, S]``), 1 refused; ``attn_bias
[B, N_q, S, S]``.  No data checks (no offsets), no syncs.  Autograd at AutogradPrivateUse1 /
AutogradCPU (Rec SDK binds it at PrivateUse1): grads for q, k, v and attn_bias, None without a
bias (Rec SDK returns a zero ``[B, N, ceil256(S), ceil256(S)]`` buffer there; its open point: we
give None, and the backward op an empty ``(0,)`` tensor in that slot).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import check_tensor
from fbgemm_npu.native.mxrec.hstu import _layout as L
from fbgemm_npu.native.mxrec.hstu._attention import Problem, attention_backward, attention_forward
from fbgemm_npu.native.mxrec.hstu._grad import backward_meta
from fbgemm_npu.native.mxrec.hstu._spans import mask_type_spans

__all__ = ["KERNELS", "SCHEMAS", "hstu_dense", "hstu_dense_backward"]

FWD = "mxrec::hstu_dense"
BWD = "mxrec::hstu_dense_backward"
SCHEMAS = {
    FWD: "hstu_dense(Tensor q, Tensor k, Tensor v, Tensor? mask=None, Tensor? attn_bias=None, "
    "int mask_type=0, int max_seq_len=0, float silu_scale=0.0) -> Tensor",
    BWD: "hstu_dense_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor? mask, "
    "Tensor? attn_bias, int mask_type=0, int max_seq_len=0, float silu_scale=0.0) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
}


def _problem(
    op: str,
    q: object,
    k: object,
    v: object,
    mask: torch.Tensor | None,
    attn_bias: torch.Tensor | None,
    mask_type: int,
    max_seq_len: int,
    silu_scale: float,
) -> Problem:
    q, k, v = L.check_qkv(op, q, k, v, 4)
    b, s = q.shape[:2]
    if max_seq_len not in (0, s):
        raise ValueError(
            f"{op}: argument 'max_seq_len' must be 0 or q.size(1) = {s}; got {max_seq_len}"
        )
    L.check_mask_args(op, q, b, s, mask, attn_bias, mask_type)
    scale = silu_scale if silu_scale != 0.0 else 1.0 / max(s, 1)
    mask = mask if mask_type == 3 else None
    spans = mask_type_spans(mask_type, s, s, q.device, None)
    return Problem(q, k, v, spans, mask, attn_bias, scale, 1.0)


def hstu_dense(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    attn_bias: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    silu_scale: float = 0.0,
) -> torch.Tensor:
    """Forward ``[B, S, N_q, D_v]`` (module docstring).  Launches: 2 plus about 13 per query
    tile; 0 syncs; BUDGETS in budgets.py."""
    p = _problem(FWD, q, k, v, mask, attn_bias, mask_type, max_seq_len, silu_scale)
    if q.numel() == 0 or v.numel() == 0:
        return q.new_zeros(*q.shape[:3], v.size(-1))
    return attention_forward(p)


def hstu_dense_backward(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    attn_bias: torch.Tensor | None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    silu_scale: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv, dbias)`` for ``grad [B, S, N_q, D_v]``; dbias has attn_bias's shape, or is
    an empty ``(0,)`` tensor without a bias.  Launches: 6 plus about 27 per tile."""
    grad = check_tensor(BWD, "grad", grad)
    p = _problem(BWD, q, k, v, mask, attn_bias, mask_type, max_seq_len, silu_scale)
    want = (*p.q.shape[:3], p.v.size(-1))
    if tuple(grad.shape) != want or grad.dtype != p.q.dtype or grad.device != p.q.device:
        raise ValueError(
            f"{BWD}: argument 'grad' must have the output's shape {list(want)}, q's dtype and "
            f"device; got {list(grad.shape)} {grad.dtype} {grad.device}"
        )
    empty = p.q.new_empty(0)
    if p.q.numel() == 0 or p.v.numel() == 0:
        db = torch.zeros_like(attn_bias) if attn_bias is not None else empty
        return torch.zeros_like(p.q), torch.zeros_like(p.k), torch.zeros_like(p.v), db
    dq, dk, dv, db = attention_backward(p, grad)
    return dq, dk.contiguous(), dv.contiguous(), empty if db is None else db


class _HstuDense(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, bias, mask_type, max_seq_len, silu_scale):  # type: ignore[override]
        ctx.save_for_backward(q, k, v, mask, bias)
        ctx.rest = (mask_type, max_seq_len, silu_scale)
        return below_autograd(
            torch.ops.mxrec.hstu_dense, q, k, v, mask, bias, mask_type, max_seq_len, silu_scale
        )

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        q, k, v, mask, bias = ctx.saved_tensors
        dq, dk, dv, db = torch.ops.mxrec.hstu_dense_backward(
            grad.contiguous(), q, k, v, mask, bias, *ctx.rest
        )
        return dq, dk, dv, None, (db if bias is not None else None), None, None, None


def _hstu_dense_autograd(
    q, k, v, mask=None, attn_bias=None, mask_type=0, max_seq_len=0, silu_scale=0.0
):  # type: ignore[no-untyped-def]
    """The autograd kernel: records the call when q, k, v or attn_bias need a gradient."""
    args = (q, k, v, mask, attn_bias, mask_type, max_seq_len, silu_scale)
    if not needs_grad(q, k, v, attn_bias):
        return below_autograd(torch.ops.mxrec.hstu_dense, *args)
    return _HstuDense.apply(*args)


def _fwd_meta(q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Shape of the forward: ``[B, S, N_q, D_v]``."""
    return q.new_empty(*q.shape[:3], v.size(-1))


def _bwd_meta(grad, q, k, v, mask=None, attn_bias=None, *args, **kwargs):  # type: ignore[no-untyped-def]
    return backward_meta(q, k, v, attn_bias)


KERNELS = {
    FWD: {
        "PrivateUse1": hstu_dense,
        "CPU": hstu_dense,
        "AutogradPrivateUse1": _hstu_dense_autograd,
        "AutogradCPU": _hstu_dense_autograd,
        "Meta": _fwd_meta,
    },
    BWD: {"PrivateUse1": hstu_dense_backward, "CPU": hstu_dense_backward, "Meta": _bwd_meta},
}
