"""``mxrec::hstu_forward_v2`` and ``mxrec::hstu_backward_v2``: Rec SDK's v2 HSTU interface
(recsdk-ops.md sections 2.4 and 4) on the shared tile program of ``mxrec/hstu/_attention.py``,
the same tensor program at PrivateUse1 and CPU.

Jagged ``q [T_q, N_q, D_qk]``, ``k [T_k, N_k, D_qk]``, ``v [T_k, N_k, D_v]`` (float32, float16,
bfloat16; GQA ``N_q % N_k == 0``), batch ``b``'s rows ``seq_offset_q[b]:seq_offset_q[b+1]`` (q)
and ``seq_offset_k[b]:..`` (k, v); the ``L_q <= L_k`` queries are the last positions of the keys
(row ``i`` at key position ``a = i + L_k - L_q``, Rec SDK's delta alignment)::

    out_i = sum_j silu(alpha * (q_i . k_j + rab[b, h, i, j])) * s * V_ij * mask_ij * v_j

``s = scale`` (forward: ``silu_scale``); 0.0 or None means ``1 / max_seqlen_q``, explicit or not
(open point 16.5: both READMEs and the v2 test golden say so; Rec SDK's backward adapter passes
an explicit 0.0 through to its kernel, which would make every gradient 0 -- we follow the docs,
so the pair agrees).  ``rab [B, N_q, S_q, S_k]`` (``S_q = max_seqlen_q``, ``S_k =
max_seqlen_k``) in q's dtype.  ``V`` (0/1), one rule per call:

* the window ``(window_size_left, window_size_right)``: ``a - left <= j <= a + right`` (``-1``:
  unbounded); ``(-1, 0)`` causal, ``(-1, -1)`` none -- Rec SDK's two; any other window too (the
  shared core supports them: ours).  With causal only: ``num_context`` (query rows ``i < n_c``
  see every key ``j < L_k - n_t``), ``num_target`` and ``target_group_size >= 1`` (a target sees
  the history and the earlier targets of its group of ``g``), ``n_c + n_t < L_q``;
* ``arbitrary_func [B, 1, S_q, 2G]`` int32: row ``i`` sees the union of its ``[start, end)``
  pairs (Rec SDK sorts them; any order works here; ``[B, N_q, S_q, 2G]`` per head is ours),
  clipped to the sequence; no window (-1, -1) and no counts with it;
* forward ``mask_type``: 0 the window (default causal) or ``arbitrary_func``; 2 none; 3 the
  custom multiplicative ``mask [B, N_q, S_q, S_k]`` (1 refused, as Rec SDK does).

``metadata`` (the ``hstu_attn_metadata`` scheduling table) is accepted and not read: we schedule
by query tiles.  ``sparse_info`` (Rec SDK's block lists of arbitrary_func's mask, built from it by
its helpers: an acceleration hint of the same mask) is accepted and not read; a list that
disagrees with arbitrary_func is not detected, the mask is arbitrary_func's.
Beyond Rec SDK (fp16 / bf16, MHA, int32 offsets, D a multiple of 16, no autograd): float32
(float64 on CPU), GQA, int64 offsets, any D, general windows, per-head intervals, and autograd
(AutogradPrivateUse1 / AutogradCPU) for q, k, v and rab (None without a rab; the backward op
returns an empty ``(0,)`` tensor in that slot).  Not supported: float8 (refused).  Launches: a
setup, then a count per query tile (``budgets.py``), 0 syncs (the max lengths are required),
0 AI-CPU; no ``[B, N, S, S]`` buffer besides ``rab``'s gradient.
"""

from __future__ import annotations

import inspect

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native.mxrec.hstu._attention import attention_backward, attention_forward
from fbgemm_npu.native.mxrec.hstu._rows import jagged_rows
from fbgemm_npu.native.mxrec.hstu_v2 import _args as A

__all__ = ["KERNELS", "SCHEMAS", "hstu_backward_v2", "hstu_forward_v2"]

FWD, BWD = "mxrec::hstu_forward_v2", "mxrec::hstu_backward_v2"
FWD_NAMES = ("max_seq_len", "max_seq_len_k", "seq_offset", "seq_offset_k")
BWD_NAMES = ("max_seqlen_q", "max_seqlen_k", "seq_offset_q", "seq_offset_k")
SCHEMAS = {
    # FWD_README's arguments, order and defaults (the required max_seq_len / seq_offset get a
    # default a schema needs after mask=None; 0 / None are refused), the adapter's metadata, then
    # ours: the backward's window sizes (None: mask_type decides), arbitrary_func, sparse_info
    FWD: "hstu_forward_v2(Tensor q, Tensor k, Tensor v, Tensor? mask=None, Tensor? rab=None, "
    "int mask_type=0, int max_seq_len=0, int? max_seq_len_k=None, float? silu_scale=0.0, "
    "Tensor? seq_offset=None, Tensor? seq_offset_k=None, Tensor? num_context=None, "
    "Tensor? num_target=None, int? target_group_size=0, float? alpha=1.0, "
    "Tensor? metadata=None, int? window_size_left=None, int? window_size_right=None, "
    "Tensor? arbitrary_func=None, Tensor[]? sparse_info=None) -> Tensor",
    # Rec SDK ff329e4, verbatim
    BWD: "hstu_backward_v2(Tensor grad, Tensor q, Tensor k, Tensor v, int max_seqlen_q, "
    "int max_seqlen_k, Tensor seq_offset_q, Tensor seq_offset_k, Tensor? rab=None, "
    "Tensor? num_context=None, Tensor? num_target=None, float? scale=0.0, "
    "int? target_group_size=1, float? alpha=1.0, int window_size_left=-1, "
    "int window_size_right=-1, Tensor? metadata=None, Tensor? arbitrary_func=None, "
    "Tensor[]? sparse_info=None) -> (Tensor, Tensor, Tensor, Tensor)",
}


def _forward_rule(
    mask_type: int,
    mask: torch.Tensor | None,
    left: int | None,
    right: int | None,
    arbitrary: bool,
) -> tuple[tuple[int, int] | None, torch.Tensor | None]:
    """The forward's (window, custom mask) from mask_type and the window sizes."""
    if mask_type == 1:
        raise ValueError(f"{FWD}: argument 'mask_type' 1 (upper triangular) is not supported")
    if mask_type not in (0, 2, 3):
        raise ValueError(f"{FWD}: argument 'mask_type' must be 0, 2 or 3; got {mask_type}")
    if mask_type == 0 and not arbitrary:
        return A.check_window(
            FWD, -1 if left is None else left, 0 if right is None else right
        ), None
    if (left, right) not in ((None, None), (-1, -1), (-1, None), (None, -1)):
        why = "arbitrary_func" if mask_type == 0 else f"mask_type {mask_type}"
        raise ValueError(
            f"{FWD}: arguments 'window_size_left' / 'window_size_right' must be None or -1 "
            f"with {why} (a window is mask_type 0's built-in mask)"
        )
    if mask_type == 3 and mask is None:
        raise ValueError(f"{FWD}: argument 'mask' is required with mask_type 3")
    return None, (mask if mask_type == 3 else None)


def _forward_call(
    q, k, v, mask, rab, mask_type, max_seq_len, max_seq_len_k, silu_scale, seq_offset,
    seq_offset_k, num_context, num_target, target_group_size, alpha, metadata,
    window_size_left, window_size_right, arbitrary_func, sparse_info,
) -> A.V2Call:  # type: ignore[no-untyped-def]  # fmt: skip
    if seq_offset is None:
        raise ValueError(f"{FWD}: argument 'seq_offset' is required (the q offsets)")
    arbitrary = arbitrary_func is not None
    if arbitrary and mask_type != 0:
        raise ValueError(f"{FWD}: argument 'arbitrary_func' needs mask_type 0; got {mask_type}")
    window, custom = _forward_rule(mask_type, mask, window_size_left, window_size_right, arbitrary)
    s_k = max_seq_len if max_seq_len_k is None else max_seq_len_k
    off_k = seq_offset if seq_offset_k is None else seq_offset_k
    group = 0 if target_group_size is None else int(target_group_size)
    return A.resolve(
        FWD, FWD_NAMES, q, k, v, max_seq_len, s_k, seq_offset, off_k, rab, custom, window,
        (num_context, num_target), group, arbitrary_func, silu_scale, alpha, metadata, sparse_info,
    )  # fmt: skip


def _backward_call(
    q, k, v, max_seqlen_q, max_seqlen_k, seq_offset_q, seq_offset_k, rab, num_context,
    num_target, scale, target_group_size, alpha, window_size_left, window_size_right,
    metadata, arbitrary_func, sparse_info,
) -> A.V2Call:  # type: ignore[no-untyped-def]  # fmt: skip
    window = A.check_window(BWD, window_size_left, window_size_right)
    rule = None if window == (-1, -1) else window
    group = 1 if target_group_size is None else int(target_group_size)
    if arbitrary_func is not None and rule is not None:
        raise ValueError(
            f"{BWD}: argument 'arbitrary_func' is the whole mask: window sizes must be -1, -1; "
            f"got {window}"
        )
    return A.resolve(
        BWD, BWD_NAMES, q, k, v, max_seqlen_q, max_seqlen_k, seq_offset_q, seq_offset_k, rab,
        None, rule, (num_context, num_target), group, arbitrary_func, scale, alpha, metadata,
        sparse_info,
    )  # fmt: skip


def _run_forward(c: A.V2Call) -> torch.Tensor:
    if c.q.size(0) == 0 or c.k.size(0) == 0:  # no rows to gather (no keys: nothing visible)
        A.check_data(c, FWD_NAMES)
        return c.q.new_zeros(c.q.size(0), c.q.size(1), c.v.size(2))
    p, rows_q, _, _ = A.problem(c, FWD_NAMES)
    return jagged_rows(attention_forward(p), rows_q)


def _run_backward(
    c: A.V2Call, grad: torch.Tensor, names: tuple[str, ...]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv, drab)`` of a checked call: the shared core's backward on the padded
    layout, gathered back; ``drab`` an empty ``(0,)`` tensor without a rab."""
    empty = c.q.new_empty(0)
    if c.q.size(0) == 0 or c.k.size(0) == 0:  # no rows to gather: every gradient 0
        A.check_data(c, names)
        db = torch.zeros_like(c.rab) if c.rab is not None else empty
        return torch.zeros_like(c.q), torch.zeros_like(c.k), torch.zeros_like(c.v), db
    p, rows_q, rows_k, gp = A.problem(c, names, grad)
    dq, dk, dv, db = attention_backward(p, gp)
    return (
        jagged_rows(dq, rows_q),
        jagged_rows(dk, rows_k),
        jagged_rows(dv, rows_k),
        empty if db is None else db,
    )


def hstu_forward_v2(  # type: ignore[no-untyped-def]
    q, k, v, mask=None, rab=None, mask_type=0, max_seq_len=0, max_seq_len_k=None,
    silu_scale=0.0, seq_offset=None, seq_offset_k=None, num_context=None, num_target=None,
    target_group_size=0, alpha=1.0, metadata=None, window_size_left=None,
    window_size_right=None, arbitrary_func=None, sparse_info=None,
):  # fmt: skip
    """Output ``[T_q, N_q, D_v]`` in q's dtype.  Launches (float16, rab): a setup of 33-38 (the
    padded gathers, the spans, the tile layout, the rows back; 52 with context / targets), then
    8-10 per query tile (12 with context / targets, 14 with 2 interval pairs)."""
    return _run_forward(_forward_call(**_locals(locals())))


def hstu_backward_v2(  # type: ignore[no-untyped-def]
    grad, q, k, v, max_seqlen_q, max_seqlen_k, seq_offset_q, seq_offset_k, rab=None,
    num_context=None, num_target=None, scale=0.0, target_group_size=1, alpha=1.0,
    window_size_left=-1, window_size_right=-1, metadata=None, arbitrary_func=None,
    sparse_info=None,
):  # fmt: skip
    """``(dq, dk, dv, drab)`` in the shapes of q, k, v and rab (``(0,)`` without one).
    Launches (float16, rab): a setup of 45-51 (65 with context / targets), then 17-19 per query
    tile (21 with context / targets, 23 with 2 interval pairs)."""
    grad = A.check_grad(BWD, grad, q, v)
    kw = _locals(locals())
    kw.pop("grad")
    return _run_backward(_backward_call(**kw), grad, BWD_NAMES)


def _locals(names: dict) -> dict:
    return {n: a for n, a in names.items() if not n.startswith("_")}


class _V2(torch.autograd.Function):
    """The forward op recorded; its backward is ``hstu_backward_v2`` (the forward's mask rule
    translated to window sizes), or -- for mask_type 3, which the backward op cannot express --
    the same shared core with the custom mask.  Grads for q, k, v, rab (None without one)."""

    @staticmethod
    def forward(ctx, q, k, v, rab, kw):  # type: ignore[override]
        ctx.save_for_backward(q, k, v, rab)
        ctx.kw = kw
        return below_autograd(torch.ops.mxrec.hstu_forward_v2, q, k, v, rab=rab, **kw)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        q, k, v, rab = ctx.saved_tensors
        kw, grad = ctx.kw, grad.contiguous()
        if kw["mask_type"] == 3:
            c = _forward_call(q, k, v, rab=rab, **kw)
            dq, dk, dv, db = _run_backward(c, grad, FWD_NAMES)
        else:
            dq, dk, dv, db = torch.ops.mxrec.hstu_backward_v2(
                grad, q, k, v, rab=rab, **_backward_kwargs(kw)
            )
        return dq, dk, dv, (db if rab is not None else None), None


def _backward_kwargs(kw: dict) -> dict:
    """The forward's arguments as hstu_backward_v2's (its mask rule as window sizes; metadata
    and sparse_info are the forward's scheduling hints, not passed on)."""
    s_q = kw["max_seq_len"]
    if kw["mask_type"] == 2 or kw["arbitrary_func"] is not None:
        window = (-1, -1)
    else:
        left, right = kw["window_size_left"], kw["window_size_right"]
        window = (-1 if left is None else left, 0 if right is None else right)
    return {
        "max_seqlen_q": s_q,
        "max_seqlen_k": s_q if kw["max_seq_len_k"] is None else kw["max_seq_len_k"],
        "seq_offset_q": kw["seq_offset"],
        "seq_offset_k": kw["seq_offset"] if kw["seq_offset_k"] is None else kw["seq_offset_k"],
        "num_context": kw["num_context"],
        "num_target": kw["num_target"],
        "scale": kw["silu_scale"],
        "target_group_size": kw["target_group_size"],
        "alpha": kw["alpha"],
        "window_size_left": window[0],
        "window_size_right": window[1],
        "arbitrary_func": kw["arbitrary_func"],
    }


# the forward's arguments after q, k, v, with their defaults (the schema's)
_FWD_DEFAULTS = {
    n: p.default
    for n, p in inspect.signature(hstu_forward_v2).parameters.items()
    if n not in ("q", "k", "v")
}


def _forward_autograd(q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    """The autograd kernel: records the call when q, k, v or rab need a gradient."""
    kw = dict(_FWD_DEFAULTS)
    kw.update(zip(_FWD_DEFAULTS, args, strict=False))
    kw.update(kwargs)
    rab = kw.pop("rab")
    if not needs_grad(q, k, v, rab):
        return below_autograd(torch.ops.mxrec.hstu_forward_v2, q, k, v, rab=rab, **kw)
    return _V2.apply(q, k, v, rab, kw)


def _fwd_meta(q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    return q.new_empty(q.size(0), q.size(1), v.size(-1))


def _bwd_meta(grad, q, k, v, max_seqlen_q, max_seqlen_k, seq_offset_q, seq_offset_k, rab=None,
              *args, **kwargs):  # type: ignore[no-untyped-def]  # fmt: skip
    db = torch.empty_like(rab) if rab is not None else q.new_empty(0)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), db


KERNELS = {
    FWD: {
        "PrivateUse1": hstu_forward_v2,
        "CPU": hstu_forward_v2,
        "AutogradPrivateUse1": _forward_autograd,
        "AutogradCPU": _forward_autograd,
        "Meta": _fwd_meta,
    },
    BWD: {"PrivateUse1": hstu_backward_v2, "CPU": hstu_backward_v2, "Meta": _bwd_meta},
}
