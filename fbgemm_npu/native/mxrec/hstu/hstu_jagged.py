"""``mxrec::hstu_jagged.equal`` and ``mxrec::hstu_jagged_backward.equal``: HSTU attention on jagged
q / k / v (Rec SDK, recsdk-ops.md section 2), the same tensor program on npu and CPU.

``q [T, N_q, D_qk]``, ``k [T, N_k, D_qk]``, ``v [T, N_k, D_v]`` (float32 / float16 / bfloat16; GQA:
``N_q % N_k == 0``), rows of batch ``b`` = ``seq_offset[b]:seq_offset[b + 1]``; output
``[T, N_q, D_v]``::

    out_i = sum_j silu(alpha * (q_i . k_j + rab_ij)) * s * mask_ij * v_j,   s = silu_scale or 1/S

with ``S = max_seq_len`` (0: the longest sequence, read back: 1 sync) and ``mask_type`` 0 (causal
with per-batch ``num_context`` / ``num_target`` and ``target_group_size``), 2 (none) or 3 (the
custom ``mask [B, N_q, S, S]``); 1 (upper triangular) is refused, as Rec SDK does.
``attn_bias [B, N_q, S, S]``.  The rows are gathered into a padded ``[B, S, N, D]`` layout and
attended in query tiles (``_attention.py``): launches grow with the tiles only, never with B or N,
and no ``[B, N, S, S]`` buffer exists (the bias gradient aside, which has the bias's shape).

Autograd (AutogradPrivateUse1 / AutogradCPU) gives grads for q, k, v and attn_bias (None without
a bias; the backward op returns an empty ``(0,)`` tensor in that slot: a schema's ``Tensor``
return cannot be None).  ``deterministic`` changes nothing here (our accumulation order is fixed).
Data checks (queued, no sync): offsets start at 0, end at T, never decrease; lengths and counts
within ``[0, S]``; kernels stay memory-safe on bad data (indices clamped).
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import check_tensor, validation_enabled
from fbgemm_npu.native.mxrec.hstu import _layout as L
from fbgemm_npu.native.mxrec.hstu._attention import Problem, attention_backward, attention_forward
from fbgemm_npu.native.mxrec.hstu._grad import attention_autograd, backward_meta
from fbgemm_npu.native.mxrec.hstu._rows import Rows, jagged_rows, padded_rows
from fbgemm_npu.native.mxrec.hstu._spans import mask_type_spans

__all__ = ["KERNELS", "SCHEMAS", "hstu_jagged_backward_equal", "hstu_jagged_equal"]

FWD = "mxrec::hstu_jagged.equal"
BWD = "mxrec::hstu_jagged_backward.equal"
_ARGS = (
    "Tensor? mask=None, Tensor? attn_bias=None, int mask_type=0, int max_seq_len=0, "
    "float silu_scale=0.0, Tensor? seq_offset=None, Tensor? num_context=None, "
    "Tensor? num_target=None, int? target_group_size=0, float? alpha=1.0"
)
SCHEMAS = {
    "mxrec::hstu_jagged.equal": f"hstu_jagged.equal(Tensor q, Tensor k, Tensor v, {_ARGS}, "
    "bool deterministic=False) -> Tensor",
    "mxrec::hstu_jagged_backward.equal": "hstu_jagged_backward.equal(Tensor grad, Tensor q, "
    f"Tensor k, Tensor v, {_ARGS}) -> (Tensor, Tensor, Tensor, Tensor)",
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
    seq_offset: object,
    num_context: torch.Tensor | None,
    num_target: torch.Tensor | None,
    target_group_size: int | None,
    alpha: float | None,
    extra: list[torch.Tensor] | None = None,
) -> tuple[Problem, Rows, list[torch.Tensor]]:
    """Every check, then the padded problem, the offsets and the padded ``extra`` tensors."""
    q, k, v = L.check_qkv(op, q, k, v, 3)
    off = L.check_offsets(op, seq_offset, q)
    batch, tokens = off.numel() - 1, q.size(0)
    if max_seq_len < 0:
        raise ValueError(f"{op}: argument 'max_seq_len' must be >= 0; got {max_seq_len}")
    group = 0 if target_group_size is None else int(target_group_size)
    if group < 0:
        raise ValueError(f"{op}: argument 'target_group_size' must be >= 0; got {group}")
    counts = L.check_counts(op, batch, q, num_context=num_context, num_target=num_target)
    o = off.to(torch.int32)
    lengths = o[1:] - o[:-1]
    s_max = max_seq_len
    if s_max == 0 or validation_enabled():  # checks off: not even built (no launch)
        checks = L.queue_data_checks(op, o, lengths, tokens, max_seq_len or None, **counts)
        if s_max == 0:  # the contract's read-back: the longest sequence (1 sync)
            s_max = max(checks.read_with([lengths.max()])[0] if batch > 0 else 0, 1)
        else:
            checks.assert_on_device()
    if batch * s_max >= 2**31:
        raise ValueError(f"{op}: batch size x max_seq_len must be below 2**31; got {batch * s_max}")
    L.check_mask_args(op, q, batch, s_max, mask, attn_bias, mask_type)
    (qp, kp, vp, *padded), rows = padded_rows([q, k, v, *(extra or [])], off, s_max)
    lengths = rows.lengths
    scale = silu_scale if silu_scale != 0.0 else 1.0 / s_max
    spans = mask_type_spans(
        mask_type, s_max, s_max, q.device, lengths, num_context=counts["num_context"],
        num_target=counts["num_target"], group=group,
    )  # fmt: skip
    p = Problem(
        qp, kp, vp, spans, mask if mask_type == 3 else None, attn_bias, scale,
        1.0 if alpha is None else float(alpha),
    )  # fmt: skip
    return p, rows, padded


def hstu_jagged_equal(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    attn_bias: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    silu_scale: float = 0.0,
    seq_offset: torch.Tensor | None = None,
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    target_group_size: int | None = 0,
    alpha: float | None = 1.0,
    deterministic: bool = False,
) -> torch.Tensor:
    """Forward ``[T, N_q, D_v]`` (module docstring).  Launches: the layout (about 20) plus about
    16 per query tile; 0 syncs with ``max_seq_len`` given (1 without); BUDGETS in budgets.py."""
    p, rows, _ = _problem(
        FWD, q, k, v, mask, attn_bias, mask_type, max_seq_len, silu_scale, seq_offset,
        num_context, num_target, target_group_size, alpha,
    )  # fmt: skip
    if q.size(0) == 0:
        return q.new_empty(0, q.size(1), v.size(2))
    return jagged_rows(attention_forward(p), rows)


def hstu_jagged_backward_equal(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    attn_bias: torch.Tensor | None = None,
    mask_type: int = 0,
    max_seq_len: int = 0,
    silu_scale: float = 0.0,
    seq_offset: torch.Tensor | None = None,
    num_context: torch.Tensor | None = None,
    num_target: torch.Tensor | None = None,
    target_group_size: int | None = 0,
    alpha: float | None = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv, dbias)`` for ``grad [T, N_q, D_v]``; dbias has attn_bias's shape, or is an
    empty ``(0,)`` tensor without a bias.  Launches: the layout plus about 26 per tile."""
    grad = check_tensor(BWD, "grad", grad)
    qq = check_tensor(BWD, "q", q)
    vv = check_tensor(BWD, "v", v)
    want = (qq.size(0), qq.size(1), vv.size(-1)) if qq.dim() == 3 and vv.dim() == 3 else None
    if want is None or tuple(grad.shape) != want or grad.dtype != qq.dtype:
        raise ValueError(
            f"{BWD}: argument 'grad' must have the output's shape {list(want or ())} and q's "
            f"dtype; got {list(grad.shape)} {grad.dtype}"
        )
    p, rows, (gp,) = _problem(
        BWD, q, k, v, mask, attn_bias, mask_type, max_seq_len, silu_scale, seq_offset,
        num_context, num_target, target_group_size, alpha, extra=[grad],
    )  # fmt: skip
    empty = q.new_empty(0)
    if q.size(0) == 0:
        db = torch.zeros_like(attn_bias) if attn_bias is not None else empty
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), db
    dq, dk, dv, db = attention_backward(p, gp)
    return (
        jagged_rows(dq, rows),
        jagged_rows(dk, rows),
        jagged_rows(dv, rows),
        empty if db is None else db,
    )


def _hstu_jagged_autograd(
    q, k, v, mask=None, attn_bias=None, mask_type=0, max_seq_len=0, silu_scale=0.0,
    seq_offset=None, num_context=None, num_target=None, target_group_size=0, alpha=1.0,
    deterministic=False,
):  # fmt: skip
    """The autograd kernel: records the call when q, k, v or attn_bias need a gradient."""
    rest = dict(
        mask=mask, mask_type=mask_type, max_seq_len=max_seq_len, silu_scale=silu_scale,
        seq_offset=seq_offset, num_context=num_context, num_target=num_target,
        target_group_size=target_group_size, alpha=alpha, deterministic=deterministic,
    )  # fmt: skip
    ops = torch.ops.mxrec
    return attention_autograd(
        ops.hstu_jagged.equal, ops.hstu_jagged_backward.equal, q, k, v, attn_bias, rest
    )


def _fwd_meta(q, k, v, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Shape of the forward: ``[T, N_q, D_v]``."""
    return q.new_empty(q.size(0), q.size(1), v.size(-1))


def _bwd_meta(grad, q, k, v, mask=None, attn_bias=None, *args, **kwargs):  # type: ignore[no-untyped-def]
    return backward_meta(q, k, v, attn_bias)


KERNELS = {
    FWD: {
        "PrivateUse1": hstu_jagged_equal,
        "CPU": hstu_jagged_equal,
        "AutogradPrivateUse1": _hstu_jagged_autograd,
        "AutogradCPU": _hstu_jagged_autograd,
        "Meta": _fwd_meta,
    },
    BWD: {
        "PrivateUse1": hstu_jagged_backward_equal,
        "CPU": hstu_jagged_backward_equal,
        "Meta": _bwd_meta,
    },
}
