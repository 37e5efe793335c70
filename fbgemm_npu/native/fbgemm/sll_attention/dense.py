"""``fbgemm::sll_jagged_dense_flash_attention`` on npu: attention of jagged queries over dense
keys, softmax along the jagged dim.

Shapes: ``q [N, D]``, ``k [B, D, T]``, ``v [N', Dv]`` (``N' >= N``), ``attn_bias [B, Nb, T]``,
``offsets [B + 1]``; ``n_b = clamp(len_b, 0, max_seq_len)``, rows ``r = offsets[b] + l``.  Math
(upstream's CPU kernel: jagged_dense_bmm, jagged_dense_elementwise_add_jagged_output,
jagged_softmax, jagged_jagged_bmm)::

    S[b, l, t] = q[r] . k[b, :, t] + (attn_bias[b, l, t] if l < Nb else 0)     (l < n_b)
    P[b, :, t] = softmax over l < n_b of S[b, :, t]
    out[b, t, :] = sum_{l < n_b} P[b, l, t] v[r]                                -> [B, T, Dv]

(0 for ``n_b = 0``).  Backward: ``dv[r] = sum_t P g``, ``dP = v g^T``, ``dS = P * (dP - sum_l P
dP)``, ``dq[r] = dS k^T``, ``dk = q^T dS``, ``dattn_bias[:, :min(Nb, M)] = dS`` (0 elsewhere;
upstream's backward leaves rows past ``max_seq_len`` uninitialised).  Dtypes: float32 / float16
/ bfloat16 ``q`` (upstream's kernels refuse float64); ``k``, ``v`` and ``attn_bias`` are cast to
``q``'s dtype, as upstream casts them (each gradient back to its input's dtype).
``allow_tf32`` is ignored.

How: the family's ``[B, M]`` row index, one gather each of ``q`` and ``v`` (padding zeroed),
``baddbmm`` of the bias rows (padded by ``F.pad`` where ``Nb < M``), ``-inf`` at padding,
``softmax`` over dim 1, the padding zeroed (an empty batch row's NaN), ``bmm``.  No host loop,
no sync, nothing on a 910B's AI CPU.  Data checks (queued): offsets in ``[0, 2**31)``,
non-decreasing, rows inside ``q`` and ``v``.  Shapes upstream does not check (``k``'s batch,
``attn_bias``'s batch and ``T``) are refused by name.  Launches: ``budgets.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as tnf

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import allocation_of, check_same_device, validation_enabled
from fbgemm_npu.native.fbgemm.jagged._utils import (
    READ_CHECK,
    assert_no_bad,
    dense_index,
    write_rows,
)
from fbgemm_npu.native.fbgemm.jagged.to_jagged import scatter_rows
from fbgemm_npu.native.fbgemm.sll_attention._common import (
    FLOATS,
    check_float,
    check_int,
    check_offsets,
    padded,
    row_index,
)

__all__ = ["KERNELS", "sll_jagged_dense_flash_attention_npu"]

_F = torch.ops.fbgemm
DENSE = "fbgemm::sll_jagged_dense_flash_attention"
END = "q_weights.size(0)"  # where upstream's size check wants the last offset


def _check(q, k, v, attn_bias, offsets, max_seq_len) -> tuple:
    op = DENSE
    qt = check_float(op, "q_weights", q, 2)
    kt = check_float(op, "k_weights", k, 3, FLOATS)
    vt = check_float(op, "v_weights", v, 2, FLOATS)
    bt = check_float(op, "attn_bias", attn_bias, 3)
    o = check_offsets(op, "offsets", offsets)
    check_same_device(op, q_weights=qt, k_weights=kt, v_weights=vt, attn_bias=bt, offsets=o)
    b, d = o.numel() - 1, qt.size(1)
    if kt.size(0) != b or kt.size(1) != d:
        raise ValueError(
            f"{op}: argument 'k_weights' {tuple(kt.shape)} must be [B, D, T] with B = {b} "
            f"(offsets.numel() - 1) and D = {d} (q_weights.size(1))"
        )
    if bt.size(0) != b or bt.size(2) != kt.size(2):  # upstream: RuntimeError
        raise RuntimeError(
            f"{op}: argument 'attn_bias' {tuple(bt.shape)} must be [B, Nb, T] with B = {b} and "
            f"T = {kt.size(2)} (k_weights.size(2))"
        )
    if vt.size(0) < qt.size(0):  # upstream's jagged_jagged_bmm raises RuntimeError
        raise RuntimeError(
            f"{op}: argument 'v_weights' has {vt.size(0)} rows, fewer than q_weights' {qt.size(0)}"
        )
    return qt, kt, vt, bt, o, max(check_int(op, "max_seq_len", max_seq_len), 0)


def _forward(q, k, v, attn_bias, offsets, max_seq_len, keep: bool) -> tuple:
    qt, kt, vt, bt, o, length = _check(q, k, v, attn_bias, offsets, max_seq_len)
    dt = qt.dtype
    kt, vt, bt = (t.to(dt) for t in (kt, vt, bt))  # no launch where the dtype is q's already
    b, t, n, dv = o.numel() - 1, kt.size(2), qt.size(0), vt.size(1)
    msl, length = length, padded(length, n)
    if b == 0 or n == 0 or length == 0:
        if validation_enabled() and b > 0:  # rows read past an empty q: as upstream's reads
            bad = [o < 0, o[:-1] > o[1:], o[1:] > n] if msl > 0 else [o < 0]
            assert_no_bad(DENSE, bad, f"argument 'offsets': {READ_CHECK}")
        if validation_enabled():  # upstream's size check: offsets[-1] == q_weights.size(0)
            assert_no_bad(DENSE, [o[-1:] != n], f"argument 'offsets' must end at {END} = {n}")
        return qt.new_zeros((b, t, dv)), None
    with allocation_of(DENSE, f"the padded [B, {length}, T] scores"):
        return _attend(qt, kt, vt, bt, o, length, keep)


def _attend(qt, kt, vt, bt, o, length: int, keep: bool) -> tuple:
    """The padded program (module docstring) on checked inputs, ``length >= 1``."""
    b, n, dv = o.numel() - 1, qt.size(0), vt.size(1)
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    read, pad, _ = row_index(o, length, n, bad)
    if bad is not None:
        bad.append(o[:-1] > o[1:])
        # upstream's size check (a sequence past the rows is refused even where the rows ours
        # read, capped by max_seq_len, stay inside q: upstream has no result for it)
        bad.append(o[-1:] != n)
    assert_no_bad(DENSE, bad, f"argument 'offsets': {READ_CHECK}, ending at {END} = {n}")
    flat, mask = read.view(-1), pad.unsqueeze(-1)
    qp = qt.index_select(0, flat).view(b, length, -1).masked_fill_(mask, 0)
    vp = vt.index_select(0, flat).view(b, length, dv).masked_fill_(mask, 0)
    nb = bt.size(1)
    bias = bt[:, :length] if nb >= length else tnf.pad(bt, (0, 0, 0, length - nb))
    s = torch.baddbmm(bias, qp, kt)
    s.masked_fill_(mask, float("-inf"))
    p = torch.softmax(s, 1).masked_fill_(mask, 0)  # an empty batch row's columns: NaN
    out = torch.bmm(p.transpose(1, 2), vp)
    return out, ((o, length, pad, qp, vp, kt, p) if keep else None)


def sll_jagged_dense_flash_attention_npu(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    attn_bias: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """``[B, T, Dv]``: see the module docstring."""
    return _forward(q_weights, k_weights, v_weights, attn_bias, offsets, max_seq_len, False)[0]


class _Dense(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, attn_bias, offsets, max_seq_len):  # type: ignore[override]
        out, kept = _forward(q, k, v, attn_bias, offsets, max_seq_len, True)
        ctx.kept = kept
        ctx.inputs = [(t.shape, t.dtype) for t in (q, k, v, attn_bias)]
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (nq, dq_t), (nk, dk_t), (nv, dv_t), (nb, db_t) = ctx.inputs
        if ctx.kept is None:
            zeros = [grad.new_zeros(s, dtype=d) for s, d in ctx.inputs]
            return (*zeros, None, None)
        o, length, pad, qp, vp, kt, p = ctx.kept
        g = grad.to(p.dtype)
        dvp = torch.bmm(p, g)
        dp = torch.bmm(vp, g.transpose(1, 2))
        ds = p * (dp - (p * dp).sum(1, keepdim=True))
        rows = nb[1]
        dbias = ds[:, :rows] if rows <= length else tnf.pad(ds, (0, 0, 0, rows - length))
        dqp = torch.bmm(ds, kt.transpose(1, 2))
        dk = torch.bmm(qp.transpose(1, 2), ds)
        idx, _ = dense_index([o], [length], None)  # type: ignore[misc]
        b = o.numel() - 1
        dq = scatter_rows(
            dqp.view(b * length, -1), write_rows(idx, pad, nq[0], None).view(-1), nq[0]
        )
        dv = scatter_rows(
            dvp.view(b * length, -1), write_rows(idx, pad, nv[0], None).view(-1), nv[0]
        )
        return dq.to(dq_t), dk.to(dk_t), dv.to(dv_t), dbias.to(db_t), None, None


def _autograd(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    attn_bias: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    args = (q_weights, k_weights, v_weights, attn_bias, offsets, max_seq_len)
    if needs_grad(q_weights, k_weights, v_weights, attn_bias):
        return _Dense.apply(*args)
    return below_autograd(_F.sll_jagged_dense_flash_attention, *args, allow_tf32)


def _meta(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    attn_bias: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """Upstream registers no Meta kernel: its CPU kernel's ``[B, T, Dv]``."""
    b, t = offsets.size(0) - 1, k_weights.size(2)
    return q_weights.new_empty((b, t, v_weights.size(1)))


KERNELS = {
    DENSE: {
        "PrivateUse1": sll_jagged_dense_flash_attention_npu,
        "AutogradPrivateUse1": _autograd,
        "Meta": _meta,
    }
}
