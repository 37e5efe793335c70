"""``fbgemm::hstu_varlen_fwd_80`` and ``fbgemm::hstu_varlen_bwd_80``: FBGEMM's varlen HSTU
attention (upstream's sm80 op schemas, pytorch/FBGEMM fbgemm_gpu/experimental/hstu), the HSTU
tile program of ``native/mxrec/hstu/_attention.py`` on npu and CPU.

fbgemm-gpu-cpu 1.8.0 does not define these ops (upstream's CPU wheel ships no HSTU), so the
family defines their schemas exactly as upstream's CUDA library does and registers npu, CPU and
Meta kernels (docs/design.md rule 1: an op nobody defines).  ``fbgemm_npu.experimental.hstu``'s
``hstu_attn_varlen_func`` / ``hstu_attn_qkvpacked_func`` are autograd Functions over them, as
upstream's are over its CUDA kernels.

``q [total_q, H, D]``, ``k [total_k, H_k, D]``, ``v [total_k, H_k, D_v]`` (float32 / float16 /
bfloat16), batch ``b``'s ``L_q`` queries the last of its ``L_k`` keys: query ``i`` at key
position ``a = i + L_k - L_q`` (module ``_gather``: padded at their key positions with rab,
in rows of their own and the mask shifted without); ``n = scaling_seqlen`` (-1:
``max_seqlen_q``)::

    out[i, h] = sum_j silu(alpha * (q_i . k_j + rab[b, h // (H / H_rab), a, j])) / n * M * v_j

``M``: the window ``(window_size_left, window_size_right)`` (``(-1, 0)`` causal with
``num_contexts`` / ``num_targets`` / ``target_group_size``, ``(-1, -1)`` none, else local) or the
arbitrary mask ``func`` (``_spans.build_spans``: one interval table per call).  Paged KV
(``kv_cache``, ...): cached keys then the targets' (forward only, as upstream's backward op takes
no cache).  The fwd op returns ``(out, rab_padded)``: ``rab`` padded to a multiple of 8 keys, as
upstream hands it to the backward (an empty tensor without rab: a schema ``Tensor`` cannot be
None); the bwd op ``(dq, dk, dv, dRab)``, dRab ``[B, H_rab, max_seqlen_k, max_seqlen_k]`` with
``has_drab`` (else empty), and writes dq / dk / dv into the optional ``dq`` / ``dk`` / ``dv`` too
(upstream's out-arguments).  Rows of q outside every used sequence get 0 (upstream leaves them
unwritten).  No data is read back: 0 syncs; the data checks are queued (``_args``).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import DataChecks
from fbgemm_npu.native.fbgemm.hstu_varlen import _gather as G
from fbgemm_npu.native.fbgemm.hstu_varlen._args import Call, data_checks, parse
from fbgemm_npu.native.mxrec.hstu._attention import Problem, attention_backward, attention_forward
from fbgemm_npu.native.mxrec.hstu._spans import Spans, build_spans

__all__ = ["BWD", "FWD", "KERNELS", "SCHEMAS", "hstu_varlen_bwd", "hstu_varlen_fwd"]

FWD = "fbgemm::hstu_varlen_fwd_80"
BWD = "fbgemm::hstu_varlen_bwd_80"
_SIZES = (
    "Tensor cu_seqlens_q, Tensor cu_seqlens_k, Tensor? seqused_q, Tensor? seqused_k, "
    "int max_seqlen_q, int max_seqlen_k, int scaling_seqlen=-1"
)
_MASK = (
    "Tensor? num_contexts=None, Tensor? num_targets=None, int target_group_size=1, "
    "int window_size_left=-1, int window_size_right=-1, float alpha=1.0, Tensor? rab=None"
)
SCHEMAS = {
    FWD: f"hstu_varlen_fwd_80(Tensor q, Tensor k, Tensor v, {_SIZES}, {_MASK}, "
    "Tensor? func=None, Tensor? kv_cache=None, Tensor? page_offsets=None, "
    "Tensor? page_ids=None, Tensor? last_page_lens=None) -> (Tensor, Tensor)",
    BWD: f"hstu_varlen_bwd_80(Tensor dout, Tensor q, Tensor k, Tensor v, {_SIZES}, "
    f"Tensor? dq=None, Tensor? dk=None, Tensor? dv=None, {_MASK}, bool has_drab=False, "
    "Tensor? func=None, bool deterministic=False) -> (Tensor, Tensor, Tensor, Tensor)",
}


def problem(
    c: Call, grad: torch.Tensor | None = None, checks: DataChecks | None = None
) -> tuple[Problem, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """The padded problem of a checked call (the queries at their key positions with rab, in
    ``max_seqlen_q`` rows of their own without: ``_gather``), the padded ``grad``, and the ways
    back of the q and (not paged, backward) k layouts (``_gather.unpad``); the page checks go
    into ``checks``.  Launches: the gathers (``_gather``), the spans."""
    s, at_keys = c.s, c.rab is not None
    s_q = s if at_keys else c.max_q
    if c.paged is not None:
        kp, vp = G.pad_paged(c.k, c.v, c.paged, c.cu_q, c.lq, c.lk, c.num_targets, s, c.op, checks)
        back_k = None
    else:
        (kp, vp), back_k = G.pad_keys([c.k, c.v], c.cu_k, c.lk, s, grad is not None)
    extra = [grad] if grad is not None else []
    (qp, *gp), back_q = G.pad_queries([c.q, *extra], c.cu_q, c.lq, c.lk, s_q, at_keys)
    intervals = None
    if c.func is not None:
        intervals = G.func_intervals(c.func, c.cu_q, c.lq, c.lk, s_q, c.q.size(1), at_keys)
    rule = {"window": c.window, "num_context": c.num_contexts, "num_target": c.num_targets,
            "group": c.group, "intervals": intervals}  # fmt: skip
    if at_keys:
        spans = build_spans(s, s, c.q.device, c.lk, c.lk, q_first=c.lk - c.lq, **rule)
    else:
        spans = build_spans(s_q, s, c.q.device, c.lq, c.lk, shift=c.lk - c.lq, **rule)
    if intervals is not None:  # func's first interval starts at key 0 (a tile tests hi alone)
        spans = Spans(spans.table, (True, *spans.lo_zero[1:]))
    p = Problem(qp, kp, vp, spans=spans, bias=c.rab, scale=c.scale, alpha=c.alpha)
    return p, (gp[0] if gp else None), back_q, back_k


def _rab_padded(rab: torch.Tensor | None, q: torch.Tensor, s: int) -> torch.Tensor:
    """``rab`` with its keys padded to a multiple of 8 (a fresh tensor, as upstream's is when it
    pads; 1 launch), or an empty tensor without rab."""
    if rab is None:
        return q.new_empty(0)
    return torch.nn.functional.pad(rab, (0, -(-s // 8) * 8 - s))


def hstu_varlen_fwd(
    q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
    scaling_seqlen=-1, num_contexts=None, num_targets=None, target_group_size=1,
    window_size_left=-1, window_size_right=-1, alpha=1.0, rab=None, func=None, kv_cache=None,
    page_offsets=None, page_ids=None, last_page_lens=None,
):  # type: ignore[no-untyped-def]  # fmt: skip
    """``(out [total_q, H, D_v], rab_padded)`` (module docstring).  Launches: the gathers and
    spans (setup) plus the tile program's count per query tile; budgets.py."""
    c = parse(
        FWD, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
        max_seqlen_k, scaling_seqlen, num_contexts, num_targets, target_group_size,
        window_size_left, window_size_right, alpha, rab, func, kv_cache, page_offsets,
        page_ids, last_page_lens,
    )  # fmt: skip
    assert c is not None
    checks = data_checks(c)
    rab_padded = _rab_padded(c.rab, c.q, c.s)
    if c.batch == 0 or c.s == 0 or c.q.size(0) == 0 or (c.rab is None and c.max_q == 0):
        out = c.q.new_zeros(c.q.size(0), c.q.size(1), c.v.size(2))
    else:
        p, _, back_q, _ = problem(c, checks=checks)
        out = G.unpad(attention_forward(p), back_q, c.q.size(0))
    if checks is not None:
        checks.assert_on_device()
    return out, rab_padded


def hstu_varlen_bwd(
    dout, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
    scaling_seqlen=-1, dq=None, dk=None, dv=None, num_contexts=None, num_targets=None,
    target_group_size=1, window_size_left=-1, window_size_right=-1, alpha=1.0, rab=None,
    has_drab=False, func=None, deterministic=False,
):  # type: ignore[no-untyped-def]  # fmt: skip
    """``(dq, dk, dv, dRab)`` for ``dout [total_q, H, D_v]`` (module docstring; ``deterministic``
    changes nothing: our accumulation order is fixed).  Launches: setup plus the tile program's
    backward count per query tile; budgets.py."""
    c = parse(
        BWD, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
        max_seqlen_k, scaling_seqlen, num_contexts, num_targets, target_group_size,
        window_size_left, window_size_right, alpha, rab, func, bwd=True,
    )  # fmt: skip
    assert c is not None
    if not isinstance(dout, torch.Tensor) or tuple(dout.shape) != (
        c.q.size(0), c.q.size(1), c.v.size(2)
    ) or dout.dtype != c.q.dtype or dout.device != c.q.device:  # fmt: skip
        raise ValueError(
            f"{BWD}: argument 'dout' must be the output's gradient: shape "
            f"{[c.q.size(0), c.q.size(1), c.v.size(2)]}, q's dtype and device; got "
            f"{list(dout.shape) if isinstance(dout, torch.Tensor) else type(dout).__name__}"
        )
    if has_drab and c.rab is None:
        raise ValueError(f"{BWD}: argument 'has_drab' is True but 'rab' is None")
    for name, out, like in (("dq", dq, c.q), ("dk", dk, c.k), ("dv", dv, c.v)):
        if out is not None and (tuple(out.shape) != tuple(like.shape) or out.dtype != like.dtype):
            raise ValueError(f"{BWD}: argument '{name}' must have the shape and dtype of its input")
    checks = data_checks(c)
    empty = c.q.new_empty(0)
    if c.batch == 0 or c.s == 0 or c.q.size(0) == 0 or (c.rab is None and c.max_q == 0):
        grads = [torch.zeros_like(c.q), torch.zeros_like(c.k), torch.zeros_like(c.v)]
        drab = c.q.new_zeros(c.batch, c.rab.size(1), c.s, c.s) if has_drab else empty
    else:
        p, gp, back_q, back_k = problem(c, dout)
        p.bias_grad = has_drab  # no [B, H, S, S] buffer nobody asked for
        dqp, dkp, dvp, db = attention_backward(p, gp)
        grads = [
            G.unpad(dqp, back_q, c.q.size(0)),
            G.unpad(dkp, back_k, c.k.size(0)),
            G.unpad(dvp, back_k, c.k.size(0)),
        ]
        drab = db[..., : c.s, : c.s].contiguous() if has_drab and db is not None else empty
    if checks is not None:
        checks.assert_on_device()
    for out, g in zip((dq, dk, dv), grads, strict=True):
        if out is not None:  # upstream's out-arguments: written, and fresh tensors returned
            out.copy_(g)
    return (*grads, drab)


_FWD_NAMES = (
    "cu_seqlens_k", "seqused_q", "seqused_k", "max_seqlen_q", "max_seqlen_k", "scaling_seqlen",
    "num_contexts", "num_targets", "target_group_size", "window_size_left", "window_size_right",
    "alpha", "rab",
)  # fmt: skip
_BWD_NAMES = (
    "seqused_q", "seqused_k", "max_seqlen_q", "max_seqlen_k", "scaling_seqlen", "dq", "dk", "dv",
    "num_contexts", "num_targets", "target_group_size", "window_size_left", "window_size_right",
    "alpha", "rab", "has_drab",
)  # fmt: skip


def _bind(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict:
    a = dict(zip(names, args, strict=False))
    a.update({n: kwargs[n] for n in names if n in kwargs})
    return a


def _fwd_meta(q, k, v, cu_seqlens_q, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Shapes of the forward: ``[total_q, H, D_v]`` and rab's, its keys rounded up to 8."""
    a = _bind(_FWD_NAMES, args, kwargs)
    rab, s = a.get("rab"), int(a.get("max_seqlen_k", 0))
    out = q.new_empty(q.size(0), q.size(1), v.size(-1))
    if rab is None:
        return out, q.new_empty(0)
    return out, rab.new_empty(*rab.shape[:3], -(-s // 8) * 8)


def _bwd_meta(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Shapes of the backward: q's, k's, v's and ``[B, H_rab, S_k, S_k]`` (has_drab) or (0,)."""
    a = _bind(_BWD_NAMES, args, kwargs)
    rab, s = a.get("rab"), int(a.get("max_seqlen_k", 0))
    drab = (
        rab.new_empty(rab.size(0), rab.size(1), s, s)
        if a.get("has_drab") and rab is not None
        else q.new_empty(0)
    )
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), drab


KERNELS = {
    FWD: {"PrivateUse1": hstu_varlen_fwd, "CPU": hstu_varlen_fwd, "Meta": _fwd_meta},
    BWD: {"PrivateUse1": hstu_varlen_bwd, "CPU": hstu_varlen_bwd, "Meta": _bwd_meta},
}
