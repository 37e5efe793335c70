"""``mxrec::hstu_jagged.delta`` and ``mxrec::hstu_jagged_backward.delta``: HSTU attention of jagged
queries against jagged keys of their own offsets (Rec SDK's delta-qk), the tile program of
``_attention.py`` on npu and CPU.

Batch ``b``'s ``L_q`` queries (``seq_offset``) are the last ``L_q`` positions of its ``L_k``
keys (``seq_offset_k``): query ``i`` sits at key position ``i + L_k - L_q``, and the built-in
causal mask is bottom-right aligned (``j <= i + L_k - L_q``); context and target rules are read
at that key position (our reading of Rec SDK's notes).  ``mask`` / ``attn_bias`` are
``[B, N_q, S_q, S_k]`` (``S_q = max_seq_len``, ``S_k = max_seq_len_k``; 0: read back, 1 sync),
indexed by (local q row, local k col); ``s = silu_scale`` or ``1 / S_q``.  Data checks (queued):
both offsets start at 0, end at their row counts, never decrease; ``L_q <= L_k``; lengths and
counts within their bounds.  Autograd: q, k, v, attn_bias (None without a bias).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_tensor, validation_enabled
from fbgemm_npu.native.mxrec.hstu import _layout as L
from fbgemm_npu.native.mxrec.hstu._attention import Problem, attention_backward, attention_forward
from fbgemm_npu.native.mxrec.hstu._grad import attention_autograd, backward_meta
from fbgemm_npu.native.mxrec.hstu._rows import jagged_rows, padded_rows
from fbgemm_npu.native.mxrec.hstu._spans import mask_type_spans

__all__ = ["KERNELS", "SCHEMAS"]

FWD = "mxrec::hstu_jagged.delta"
BWD = "mxrec::hstu_jagged_backward.delta"
_ARGS = (
    "Tensor? mask=None, Tensor? attn_bias=None, int mask_type=0, int max_seq_len=0, "
    "int max_seq_len_k=0, float silu_scale=0.0, Tensor? seq_offset=None, "
    "Tensor? seq_offset_k=None, Tensor? num_context=None, Tensor? num_target=None, "
    "int? target_group_size=0, float? alpha=1.0"
)
SCHEMAS = {
    FWD: f"hstu_jagged.delta(Tensor q, Tensor k, Tensor v, {_ARGS}, bool deterministic=False) "
    "-> Tensor",
    BWD: f"hstu_jagged_backward.delta(Tensor grad, Tensor q, Tensor k, Tensor v, {_ARGS}) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
}
NAMES = (
    "mask", "attn_bias", "mask_type", "max_seq_len", "max_seq_len_k", "silu_scale", "seq_offset",
    "seq_offset_k", "num_context", "num_target", "target_group_size", "alpha",
)  # fmt: skip


def _problem(op: str, q, k, v, grad, a: dict):  # type: ignore[no-untyped-def]
    """Every check, then the padded problem and both offsets."""
    q, k, v = L.check_qkv(op, q, k, v, 3, q_rows=False)
    off_q = L.check_offsets(op, a["seq_offset"], q)
    off_k = L.check_offsets(op, a["seq_offset_k"], q, "seq_offset_k")
    if off_k.numel() != off_q.numel():
        raise ValueError(
            f"{op}: argument 'seq_offset_k' must have seq_offset's {off_q.numel()} elements"
        )
    batch = off_q.numel() - 1
    s_q, s_k = int(a["max_seq_len"]), int(a["max_seq_len_k"])
    if s_q < 0 or s_k < 0:
        raise ValueError(f"{op}: arguments 'max_seq_len' and 'max_seq_len_k' must be >= 0")
    group = int(a["target_group_size"] or 0)
    if group < 0:
        raise ValueError(f"{op}: argument 'target_group_size' must be >= 0; got {group}")
    counts = L.check_counts(op, batch, q, num_context=a["num_context"], num_target=a["num_target"])
    oq, ok = off_q.to(torch.int32), off_k.to(torch.int32)
    lq, lk = oq[1:] - oq[:-1], ok[1:] - ok[:-1]
    if s_q == 0 or s_k == 0 or validation_enabled():
        checks = L.queue_data_checks(op, oq, lq, q.size(0), s_q or None)
        # targets are the last keys (q, the newest tokens, may be targets only): the counts are
        # held to the key lengths
        kc = L.queue_data_checks(
            op, ok, lk, k.size(0), s_k or None, "seq_offset_k", "k.size(0)", **counts
        )
        checks.items.extend(kc.items)
        checks.add((lq - lk).max(), None, 0, "every q length must be <= its k length")
        if s_q == 0 or s_k == 0:  # the contract's read-back (1 sync)
            got = checks.read_with([lq.max(), lk.max()]) if batch > 0 else [0, 0]
            s_q, s_k = s_q or max(got[0], 1), s_k or max(got[1], 1)
        else:
            checks.assert_on_device()
    L.check_mask_args(op, q, batch, s_q, a["mask"], a["attn_bias"], a["mask_type"], s_k)
    (qp, *gp), rows_q = padded_rows([q, *([grad] if grad is not None else [])], off_q, s_q)
    (kp, vp), rows_k = padded_rows([k, v], off_k, s_k)
    lq, lk = rows_q.lengths, rows_k.lengths
    scale = a["silu_scale"] if a["silu_scale"] != 0.0 else 1.0 / s_q
    mask = a["mask"] if a["mask_type"] == 3 else None
    alpha = 1.0 if a["alpha"] is None else float(a["alpha"])
    # Rec SDK's context rows are the first n_c q rows (its create_causal_mask and v2 kernel):
    # at key positions a = i + (L_k - L_q) that is a < n_c + L_k - L_q
    ctx = counts["num_context"]
    spans = mask_type_spans(
        a["mask_type"], s_q, s_k, q.device, lq, lk, lk - lq,
        None if ctx is None else ctx + (lk - lq), counts["num_target"], group,
    )  # fmt: skip
    p = Problem(qp, kp, vp, spans, mask, a["attn_bias"], scale, alpha)
    return p, rows_q, rows_k, gp


def _args(args: tuple, kwargs: dict) -> dict:
    defaults = (None, None, 0, 0, 0, 0.0, None, None, None, None, 0, 1.0)
    a = dict(zip(NAMES, defaults, strict=True))
    a.update(zip(NAMES, args, strict=False))
    a.update({n: kwargs[n] for n in NAMES if n in kwargs})
    return a


def hstu_jagged_delta(q, k, v, *args, deterministic=False, **kwargs):  # type: ignore[no-untyped-def]
    """Forward ``[T_q, N_q, D_v]``; launches: both layouts plus about 16 per query tile."""
    p, rows_q, _, _ = _problem(FWD, q, k, v, None, _args(args, kwargs))
    if q.size(0) == 0:
        return q.new_empty(0, q.size(1), v.size(2))
    return jagged_rows(attention_forward(p), rows_q)


def hstu_jagged_backward_delta(grad, q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``(dq, dk, dv, dbias)``; dbias an empty ``(0,)`` tensor without a bias."""
    grad = check_tensor(BWD, "grad", grad)
    qq, vv = check_tensor(BWD, "q", q), check_tensor(BWD, "v", v)
    want = (qq.size(0), qq.size(1), vv.size(-1)) if qq.dim() == 3 and vv.dim() == 3 else None
    if want is None or tuple(grad.shape) != want or grad.dtype != qq.dtype:
        raise ValueError(f"{BWD}: argument 'grad' must have the output's shape and q's dtype")
    a = _args(args, kwargs)
    p, rows_q, rows_k, (gp,) = _problem(BWD, q, k, v, grad, a)
    empty = q.new_empty(0)
    if q.size(0) == 0 or k.size(0) == 0:
        db = torch.zeros_like(a["attn_bias"]) if a["attn_bias"] is not None else empty
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), db
    dq, dk, dv, db = attention_backward(p, gp)
    return (
        jagged_rows(dq, rows_q),
        jagged_rows(dk, rows_k),
        jagged_rows(dv, rows_k),
        empty if db is None else db,
    )


def _delta_autograd(q, k, v, *args, deterministic=False, **kwargs):  # type: ignore[no-untyped-def]
    """The autograd kernel: records the call when q, k, v or attn_bias need a gradient."""
    a = _args(args, kwargs)
    bias = a.pop("attn_bias")
    a["deterministic"] = deterministic
    ops = torch.ops.mxrec
    return attention_autograd(
        ops.hstu_jagged.delta, ops.hstu_jagged_backward.delta, q, k, v, bias, a
    )


def _fwd_meta(q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    return q.new_empty(q.size(0), q.size(1), v.size(-1))


def _bwd_meta(grad, q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    return backward_meta(q, k, v, _args(args, kwargs)["attn_bias"])


KERNELS = {
    FWD: {
        "PrivateUse1": hstu_jagged_delta,
        "CPU": hstu_jagged_delta,
        "AutogradPrivateUse1": _delta_autograd,
        "AutogradCPU": _delta_autograd,
        "Meta": _fwd_meta,
    },
    BWD: {
        "PrivateUse1": hstu_jagged_backward_delta,
        "CPU": hstu_jagged_backward_delta,
        "Meta": _bwd_meta,
    },
}
