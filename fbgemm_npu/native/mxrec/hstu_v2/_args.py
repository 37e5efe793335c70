"""Argument checks of the v2 HSTU ops and the padded problem they describe.

Both ops (``hstu_forward_v2``'s ``mask_type`` / window / ``arbitrary_func`` and
``hstu_backward_v2``'s window / ``arbitrary_func``) resolve to one :class:`V2Call`: jagged q / k /
v with their offsets, the padded sizes, and exactly one visibility rule -- a window
``(left, right)`` (with context / targets when it is causal), the interval table
``arbitrary_func``, or none (``mask_type`` 2, or 3 with its custom tensor).  :func:`problem`
then checks the data (queued), gathers the padded layout and builds the spans
(``hstu._spans.build_spans``) and the tile program's :class:`Problem`.

Metadata checks raise ``ValueError`` naming the op and the argument; data checks (offsets at 0
and T and non-decreasing, lengths within the max lengths, ``L_q <= L_k``, counts ``>= 0`` with
``num_context + num_target < L_q``) are queued (no sync) and the kernels stay memory-safe on bad
data (the gathers clamp their indices).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fbgemm_npu.native._checks import (
    allocation_of,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native.mxrec.hstu import _layout as L
from fbgemm_npu.native.mxrec.hstu._attention import Problem
from fbgemm_npu.native.mxrec.hstu._rows import Rows, padded_rows
from fbgemm_npu.native.mxrec.hstu._spans import build_spans

__all__ = [
    "V2Call", "check_data", "check_grad", "check_qkv", "check_window", "problem", "resolve",
]  # fmt: skip

I32 = torch.int32
# Rec SDK's documented longest sequence (recsdk-ops.md 2.3): the padded tile program costs
# B * N * S_q * S_k whatever the lengths, so a mistyped 10**6 would run for hours before failing
MAX_SEQ_LEN = 20480
# Rec SDK's sparse_info: mask_cnt, mask_offset, mask_idx, full_cnt, full_offset, full_idx
SPARSE_LISTS = 6


@dataclass
class V2Call:
    """One call's arguments, checked and resolved (module docstring)."""

    op: str
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    off_q: torch.Tensor
    off_k: torch.Tensor
    s_q: int
    s_k: int
    rab: torch.Tensor | None
    mask: torch.Tensor | None  # the forward's custom multiplicative mask (mask_type 3)
    window: tuple[int, int] | None  # None: no window rule (none, custom, arbitrary)
    num_context: torch.Tensor | None  # [B] int32
    num_target: torch.Tensor | None
    group: int
    intervals: torch.Tensor | None  # arbitrary_func [B, 1 or N_q, S_q, 2G] int32
    scale: float
    alpha: float


def check_qkv(op: str, q: object, k: object, v: object) -> tuple[torch.Tensor, ...]:
    """The family's q / k / v checks (``hstu._layout.check_qkv``: 3-D, one float dtype and
    device, GQA head counts, one ``D_qk``), float64 allowed on CPU too: there the op is a
    float64-capable kernel, which gradcheck needs (not on npu: no float64 cube path)."""
    qq, kk, vv = (check_tensor(op, n, t) for n, t in (("q", q), ("k", k), ("v", v)))
    if all(t.dtype == torch.float64 and t.device.type == "cpu" for t in (qq, kk, vv)):
        as32 = [torch.empty(t.shape, dtype=torch.float32, device="meta") for t in (qq, kk, vv)]
        L.check_qkv(op, *as32, 3, q_rows=False)  # the shape rules, on stand-ins
        return qq, kk, vv
    return L.check_qkv(op, qq, kk, vv, 3, q_rows=False)


def check_window(op: str, left: int, right: int) -> tuple[int, int]:
    """Window sizes ``>= -1`` (Rec SDK's rule; ``-1``: unbounded on that side)."""
    for name, w in (("window_size_left", left), ("window_size_right", right)):
        if w < -1:
            raise ValueError(f"{op}: argument '{name}' must be >= -1 (-1: unbounded); got {w}")
    return left, right


def check_grad(op: str, grad: object, q: object, v: object) -> torch.Tensor:
    """The backward's ``grad``: the forward output's shape ``[T_q, N_q, D_v]`` and q's dtype."""
    grad = check_tensor(op, "grad", grad)
    qq, vv = check_tensor(op, "q", q), check_tensor(op, "v", v)
    want = (qq.size(0), qq.size(1), vv.size(-1)) if qq.dim() == 3 and vv.dim() == 3 else None
    if want is None or tuple(grad.shape) != want or grad.dtype != qq.dtype:
        raise ValueError(
            f"{op}: argument 'grad' must have the output's shape {list(want or ())} and q's "
            f"dtype; got {list(grad.shape)} {grad.dtype}"
        )
    check_same_device(op, q=qq, grad=grad)
    return grad


def _check_square(
    op: str, name: str, t: torch.Tensor | None, q: torch.Tensor, want: list[int]
) -> torch.Tensor | None:
    """rab / mask: ``[B, N_q, S_q, S_k]`` in q's dtype, on q's device."""
    if t is None:
        return None
    if list(t.shape) != want:
        raise ValueError(f"{op}: argument '{name}' must have shape {want}; got {list(t.shape)}")
    if t.dtype != q.dtype:
        raise ValueError(f"{op}: argument '{name}' must have q's dtype {q.dtype}; got {t.dtype}")
    check_same_device(op, q=q, **{name: t})
    return t


def _check_intervals(op: str, af: torch.Tensor, q: torch.Tensor, batch: int, s_q: int) -> None:
    """arbitrary_func ``[B, 1 or N_q, S_q, 2G]`` int32, on q's device."""
    check_ndim(op, "arbitrary_func", af, (4,))
    check_dtype(op, "arbitrary_func", af, (I32,))
    b, h, s, w = af.shape
    if b != batch or h not in (1, q.size(1)) or s != s_q or w < 2 or w % 2:
        raise ValueError(
            f"{op}: argument 'arbitrary_func' must have shape [B={batch}, 1 or N_q={q.size(1)}, "
            f"max_seqlen_q={s_q}, 2 * groups] ((start, end) pairs per query row); "
            f"got {list(af.shape)}"
        )
    check_same_device(op, q=q, arbitrary_func=af)


def _check_hints(
    op: str, q: torch.Tensor, metadata: object, sparse_info: object, af: object
) -> None:
    """metadata (a scheduling table) and sparse_info (block lists of arbitrary_func's mask) are
    accepted and not read; checked only for their kind, so a wrong object is still an error."""
    if metadata is not None:
        md = check_tensor(op, "metadata", metadata)
        check_dtype(op, "metadata", md, L.OFFSET_DTYPES)
        check_same_device(op, q=q, metadata=md)
    if sparse_info is None:
        return
    lists = list(sparse_info)  # type: ignore[call-overload]
    if len(lists) == 1 and check_tensor(op, "sparse_info[0]", lists[0]).numel() == 0:
        return  # Rec SDK's adapter's own placeholder, [empty(0)]
    if len(lists) not in (0, SPARSE_LISTS):
        raise ValueError(
            f"{op}: argument 'sparse_info' must hold Rec SDK's {SPARSE_LISTS} int32 block lists "
            f"(mask_cnt, mask_offset, mask_idx, full_cnt, full_offset, full_idx); got {len(lists)}"
        )
    if lists and af is None:
        raise ValueError(
            f"{op}: argument 'sparse_info' describes the blocks of arbitrary_func's mask; "
            "it needs 'arbitrary_func'"
        )
    for n, t in enumerate(lists):
        check_dtype(op, f"sparse_info[{n}]", check_tensor(op, f"sparse_info[{n}]", t), (I32,))
        check_same_device(op, q=q, **{f"sparse_info[{n}]": t})


def resolve(
    op: str,
    names: tuple[str, str, str, str],
    q: object,
    k: object,
    v: object,
    s_q: int,
    s_k: int,
    seq_offset_q: object,
    seq_offset_k: object,
    rab: torch.Tensor | None,
    mask: torch.Tensor | None,
    window: tuple[int, int] | None,
    counts: tuple[torch.Tensor | None, torch.Tensor | None],
    group: int,
    arbitrary_func: torch.Tensor | None,
    scale: float | None,
    alpha: float | None,
    metadata: object = None,
    sparse_info: object = None,
) -> V2Call:
    """Every metadata check of one call; ``names``: the op's spellings of
    (max q length, max k length, q offsets, k offsets)."""
    q, k, v = check_qkv(op, q, k, v)
    off_q = L.check_offsets(op, seq_offset_q, q, names[2])
    off_k = L.check_offsets(op, seq_offset_k, q, names[3])
    if off_k.numel() != off_q.numel():
        raise ValueError(
            f"{op}: argument '{names[3]}' must have {names[2]}'s {off_q.numel()} elements; "
            f"got {off_k.numel()}"
        )
    for name, s in ((names[0], s_q), (names[1], s_k)):
        if s <= 0 or s > MAX_SEQ_LEN:
            raise ValueError(
                f"{op}: argument '{name}' must be in [1, {MAX_SEQ_LEN}] (a padded length; Rec "
                f"SDK's longest sequence); got {s}"
            )
    batch = off_q.numel() - 1
    nc, nt = counts
    got = L.check_counts(op, batch, q, num_context=nc, num_target=nt)
    nc, nt = got["num_context"], got["num_target"]
    if group < 0:
        raise ValueError(f"{op}: argument 'target_group_size' must be >= 0; got {group}")
    if arbitrary_func is not None:
        if window is not None or nc is not None or nt is not None:
            raise ValueError(
                f"{op}: argument 'arbitrary_func' is the whole mask: it takes no window "
                "(window sizes -1, -1) and no num_context / num_target"
            )
        _check_intervals(op, arbitrary_func, q, batch, s_q)
    if nc is not None or nt is not None:
        if window != (-1, 0):
            raise ValueError(
                f"{op}: arguments 'num_context' / 'num_target' need the causal mask "
                f"(window_size_left, window_size_right) = (-1, 0); got {window}"
            )
        if group < 1:
            raise ValueError(
                f"{op}: argument 'target_group_size' must be >= 1 with num_context / "
                f"num_target; got {group}"
            )
    _check_hints(op, q, metadata, sparse_info, arbitrary_func)
    want = [batch, q.size(1), s_q, s_k]
    if window is not None:  # wider than any sequence = unbounded: keeps int32 arithmetic safe
        window = tuple(min(w, s_q + s_k) for w in window)  # type: ignore[assignment]
    return V2Call(
        op, q, k, v, off_q, off_k, s_q, s_k, _check_square(op, "rab", rab, q, want),
        _check_square(op, "mask", mask, q, want), window, nc, nt, group, arbitrary_func,
        scale if scale else 1.0 / s_q, 1.0 if alpha is None else float(alpha),
    )  # fmt: skip


def _queue_checks(c: V2Call, names: tuple[str, ...], lq: torch.Tensor, lk: torch.Tensor) -> None:
    """The data conditions, queued as one device check (no sync).  The counts: one reduction
    ``min(n_c, n_t, L - n_c, L - n_c - n_t - 1) >= 0`` with ``L = max(L_q, 1)`` (strict, Rec
    SDK's ``num_context + num_target < max_seqlen_q`` per sequence; an empty one takes none);
    ``L - n_c >= 0`` is in the set so that the last difference cannot wrap in int32."""
    checks = L.queue_data_checks(c.op, c.off_q, lq, c.q.size(0), c.s_q, names[2])
    kc = L.queue_data_checks(c.op, c.off_k, lk, c.k.size(0), c.s_k, names[3], "k.size(0)")
    checks.items.extend(kc.items)
    checks.add((lq - lk).max(), None, 0, "every q length must be <= its k length")
    if c.num_context is not None or c.num_target is not None:
        zero = torch.zeros((), dtype=I32, device=lq.device)
        nc = c.num_context if c.num_context is not None else zero
        nt = c.num_target if c.num_target is not None else zero
        room = lq.clamp_min(1) - nc
        parts = [t.expand(lq.shape) for t in (nc, nt, room, room - nt - 1)]
        checks.add(
            torch.stack(parts).min(), 0, None,
            "arguments 'num_context' and 'num_target' must be >= 0 with num_context + "
            "num_target < each q length",
        )  # fmt: skip
    checks.assert_on_device()


def check_data(c: V2Call, names: tuple[str, ...]) -> None:
    """The data checks alone, for a call with no q or no k rows (nothing to gather)."""
    if validation_enabled():
        lq, lk = c.off_q[1:] - c.off_q[:-1], c.off_k[1:] - c.off_k[:-1]
        _queue_checks(c, names, lq, lk)


def problem(
    c: V2Call, names: tuple[str, ...], grad: torch.Tensor | None = None
) -> tuple[Problem, Rows, Rows, torch.Tensor | None]:
    """The padded problem of a checked call, the :class:`Rows` of q and of k (the way back) and
    the padded ``grad``.  Launches: the two gathers (about 10 each), the spans (about 6; 4 more
    for context, 8 for targets), the data checks when on."""
    what = f"the padded layout of {names[0]} = {c.s_q} / {names[1]} = {c.s_k} rows a sequence"
    with allocation_of(c.op, what):
        qs = [c.q, *([grad] if grad is not None else [])]
        (qp, *gp), rows_q = padded_rows(qs, c.off_q, c.s_q)
        (kp, vp), rows_k = padded_rows([c.k, c.v], c.off_k, c.s_k)
    lq, lk = rows_q.lengths, rows_k.lengths
    if validation_enabled():
        _queue_checks(c, names, lq, lk)
    shift = lk - lq  # query row i sits at key position i + L_k - L_q (q aligned to k's end)
    dev = qp.device
    if c.intervals is not None:
        spans = build_spans(c.s_q, c.s_k, dev, lq, lk, intervals=c.intervals)
    elif c.window is None:
        spans = build_spans(c.s_q, c.s_k, dev, lq, lk, window=(-1, -1))
    else:
        # Rec SDK v2 counts context rows by query row (i < n_c), build_spans by key position
        # (i + shift < n_c'): n_c' = n_c + shift is the same rule
        nc = c.num_context + shift if c.num_context is not None else None
        spans = build_spans(
            c.s_q, c.s_k, dev, lq, lk, shift=shift, window=c.window, num_context=nc,
            num_target=c.num_target, group=max(c.group, 1),
        )  # fmt: skip
    p = Problem(qp, kp, vp, spans, mask=c.mask, bias=c.rab, scale=c.scale, alpha=c.alpha)
    return p, rows_q, rows_k, (gp[0] if gp else None)
