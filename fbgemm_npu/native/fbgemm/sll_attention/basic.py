"""``fbgemm::sll_jagged_flash_attention_basic`` and
``fbgemm::sll_multi_head_jagged_flash_attention`` on npu: jagged self-attention without the
``1 / sqrt(D)`` scale, divided by ``max_seq_len``.

``sll_jagged_flash_attention_basic(q [N, D], k [N, D], v [N, Dv], offsets [B + 1], max_seq_len,
use_mask=False, allow_tf32=True) -> [N, Dv]``; upstream's CPU kernel (its composite of the
jagged2 ops), per batch row ``b`` with ``n_b = offsets[b + 1] - offsets[b]``::

    P = softmax_j(q_i . k_j) / max_seq_len,  A = P * [j >= i] (use_mask),  out_i = sum_j A_ij v_j

on the first ``min(n_b, max_seq_len)`` rows (0 after).  Its softmax runs over all ``n_b``
columns while its GPU kernel (and the sum) stops at ``max_seq_len``, and its output has
``offsets[-1] - offsets[0]`` rows where the GPU kernel's has ``q.size(0)``: ours follows both
where they agree and refuses the rest by a queued data check (``n_b <= max_seq_len``,
``offsets[0] == 0``, ``offsets[-1] == q.size(0)``), as it does for upstream's own errors (a
mask with ``n_b > max_seq_len``).  float32 / float16 / bfloat16 / float64, one dtype (upstream
raises for mixed ones).

``sll_multi_head_jagged_flash_attention(q, k, v [H, N, D], offsets, max_seq_len,
allow_tf32=True) -> [H, N, D]``: upstream has only a Triton (CUDA) kernel, no CPU one; its math
(``triton_multi_head_jagged_flash_attention.py``) is the above per head, without the mask,
on ``n_b = min(len_b, max_seq_len)`` rows and columns; judged against a float64 reference of it.
float32 / float16 / bfloat16.

``allow_tf32`` is ignored (npu matmuls are float32 or the input's half type).  Autograd at
``AutogradPrivateUse1`` (upstream's CPU autograd for the first, its Triton backward for the
second): the program of ``_square.py``.  Data checks (queued): offsets in ``[0, 2**31)``,
non-decreasing, rows inside the inputs (+ the basic op's three above).  Launches: ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import allocation_of, check_same_device, validation_enabled
from fbgemm_npu.native.fbgemm.jagged._utils import READ_CHECK, assert_no_bad
from fbgemm_npu.native.fbgemm.sll_attention._common import (
    FLOATS,
    HALF_FLOATS,
    check_float,
    check_int,
    check_offsets,
    padded,
    row_index,
)
from fbgemm_npu.native.fbgemm.sll_attention._square import Padded, attend, attend_backward

__all__ = ["KERNELS", "sll_jagged_flash_attention_basic_npu", "sll_multi_head_npu"]

_F = torch.ops.fbgemm
BASIC = "fbgemm::sll_jagged_flash_attention_basic"
MULTI = "fbgemm::sll_multi_head_jagged_flash_attention"
_BASIC_CHECK = (
    "argument 'offsets': every length offsets[b + 1] - offsets[b] must be <= max_seq_len "
    "(upstream's CPU kernel softmaxes past max_seq_len, its GPU kernel does not: refused), "
    "offsets[0] == 0 and offsets[-1] == q_weights.size(0) (upstream's CPU output has "
    "offsets[-1] - offsets[0] rows, its GPU output q_weights.size(0)), non-decreasing, in "
    "[0, 2**31)"
)


def _check(
    op: str, q: object, k: object, v: object, offsets: object, max_seq_len: object, heads: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    ndim, dtypes = (3, HALF_FLOATS) if heads else (2, FLOATS)
    qt = check_float(op, "q_weights", q, ndim, dtypes)
    kt = check_float(op, "k_weights", k, ndim, dtypes)
    vt = check_float(op, "v_weights", v, ndim, dtypes)
    o = check_offsets(op, "offsets", offsets)
    check_same_device(op, q_weights=qt, k_weights=kt, v_weights=vt, offsets=o)
    if not qt.dtype == kt.dtype == vt.dtype:  # upstream's matmuls raise RuntimeError
        raise RuntimeError(
            f"{op}: arguments 'q_weights', 'k_weights' and 'v_weights' must have one dtype, got "
            f"{qt.dtype}, {kt.dtype} and {vt.dtype}"
        )
    shape_k = qt.shape
    shape_v = qt.shape if heads else (qt.size(0), vt.size(-1))
    for name, t, want in (("k_weights", kt, shape_k), ("v_weights", vt, shape_v)):
        if tuple(t.shape) != tuple(want):
            raise RuntimeError(
                f"{op}: argument '{name}' {tuple(t.shape)} must have shape {tuple(want)} "
                f"(q_weights is {tuple(qt.shape)})"
            )
    return qt, kt, vt, o, check_int(op, "max_seq_len", max_seq_len)


def _index(
    op: str, o: torch.Tensor, length: int, msl: int, n: int, basic: bool, checks: bool
) -> Padded:
    """The ``[B, length]`` row index with the queued data check (lengths against ``msl``)."""
    bad: list[torch.Tensor] | None = [] if checks and validation_enabled() else None
    index = row_index(o, length, n, bad)
    if bad is not None:
        bad.append(o[:-1] > o[1:])
        if basic:
            bad += [(o[1:] - o[:-1]) > msl, o[:1], o[-1:] != n]
    what = _BASIC_CHECK if basic else f"argument 'offsets': {READ_CHECK}"
    assert_no_bad(op, bad, what)
    return index


def _empty_checks(op: str, o: torch.Tensor, length: int, n: int, basic: bool) -> None:
    """The data check of a call that reads nothing (no rows, or ``max_seq_len <= 0``)."""
    if not validation_enabled() or o.numel() < 2:
        return
    lens = o[1:] - o[:-1]
    bad = [o < 0, lens < 0, o[1:] > n]
    if basic:
        bad += [lens > length, o[:1], o[-1:] != n]
    assert_no_bad(op, bad, _BASIC_CHECK if basic else f"argument 'offsets': {READ_CHECK}")


def _run(
    op: str, q, k, v, offsets, max_seq_len: int, use_mask: bool, keep: bool
) -> tuple[torch.Tensor, tuple | None]:
    heads = op == MULTI
    qt, kt, vt, o, msl = _check(op, q, k, v, offsets, max_seq_len, heads)
    q3, k3, v3 = (t if heads else t.unsqueeze(0) for t in (qt, kt, vt))
    h, n, b = q3.size(0), q3.size(1), o.numel() - 1
    length = padded(msl, n)
    if n == 0 or b == 0 or length == 0 or h == 0:
        _empty_checks(op, o, max(msl, 0), n, not heads)
        out = v3.new_zeros(v3.shape)
        return (out if heads else out[0]), None
    with allocation_of(op, f"the padded [H * B, {length}, {length}] attention"):
        index = _index(op, o, length, msl, n, not heads, True)
        out, saved = attend(q3, k3, v3, index, msl, use_mask)
    return (out if heads else out[0]), ((index, saved) if keep else None)


def sll_jagged_flash_attention_basic_npu(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    use_mask: bool = False,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """``[N, Dv]``: see the module docstring."""
    return _run(BASIC, q_weights, k_weights, v_weights, offsets, max_seq_len, use_mask, False)[0]


def sll_multi_head_npu(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """``[H, N, D]``: see the module docstring."""
    return _run(MULTI, q_weights, k_weights, v_weights, offsets, max_seq_len, False, False)[0]


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, q, k, v, offsets, max_seq_len, use_mask):  # type: ignore[override]
        out, kept = _run(op, q, k, v, offsets, max_seq_len, use_mask, True)
        ctx.kept, ctx.heads = kept, op == MULTI
        ctx.msl, ctx.use_mask, ctx.shapes = max_seq_len, use_mask, (q.shape, k.shape, v.shape)
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        if ctx.kept is None:  # nothing was read: every gradient is 0
            grads = tuple(grad.new_zeros(s) for s in ctx.shapes)
        else:
            index, saved = ctx.kept
            g3 = grad if ctx.heads else grad.unsqueeze(0)
            grads = attend_backward(g3, index, saved, ctx.msl, ctx.use_mask)
            if not ctx.heads:
                grads = tuple(t[0] for t in grads)
        return (None, *grads, None, None, None)


def _basic_autograd(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    use_mask: bool = False,
    allow_tf32: bool = True,
) -> torch.Tensor:
    args = (q_weights, k_weights, v_weights, offsets, max_seq_len)
    if needs_grad(q_weights, k_weights, v_weights):
        return _Attention.apply(BASIC, *args, use_mask)
    return below_autograd(_F.sll_jagged_flash_attention_basic, *args, use_mask, allow_tf32)


def _multi_autograd(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    args = (q_weights, k_weights, v_weights, offsets, max_seq_len)
    if needs_grad(q_weights, k_weights, v_weights):
        return _Attention.apply(MULTI, *args, False)
    return below_autograd(_F.sll_multi_head_jagged_flash_attention, *args, allow_tf32)


def _basic_meta(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    use_mask: bool = False,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """Upstream registers no Meta kernel: ours' shape, ``[q.size(0), v.size(1)]``."""
    return v_weights.new_empty((q_weights.size(0), v_weights.size(-1)))


def _multi_meta(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """Upstream registers no kernel but Triton's: its ``zeros_like(q)`` shape."""
    return q_weights.new_empty(q_weights.shape)  # contiguous, as ours


KERNELS = {
    BASIC: {
        "PrivateUse1": sll_jagged_flash_attention_basic_npu,
        "AutogradPrivateUse1": _basic_autograd,
        "Meta": _basic_meta,
    },
    MULTI: {
        "PrivateUse1": sll_multi_head_npu,
        "AutogradPrivateUse1": _multi_autograd,
        "Meta": _multi_meta,
    },
}
