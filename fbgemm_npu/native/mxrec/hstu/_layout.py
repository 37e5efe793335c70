"""Argument checks of the HSTU ops and the jagged <-> padded layout change around the tile program.

The jagged rows of batch ``b`` are ``seq_offset[b]:seq_offset[b + 1]``; the padded layout has
``S = max_seq_len`` rows per batch.  Both directions are gathers (``index_select``, int32 index
arithmetic, no ``searchsorted``: docs/hardware.md), and every index is clamped into its buffer so
that bad offsets (whose data checks are queued, not waited for) stay memory-safe.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_same_dtype,
    check_tensor,
    join_words,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids

__all__ = [
    "FLOAT_DTYPES",
    "MAX_SEQ_LEN",
    "check_counts",
    "check_mask_args",
    "check_offsets",
    "check_qkv",
    "from_padded",
    "queue_data_checks",
    "to_int32",
    "to_padded",
]

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
OFFSET_DTYPES = (torch.int32, torch.int64)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Rec SDK's documented range of S (recsdk-ops.md 2.3: S in [1, 20480]).  The padded tile program
# costs B * N * S**2 whatever the lengths: a mistyped max_seq_len of 10**6 with a few short
# sequences would run ~10**5 tiles (hours) before any error; past this bound it is refused.
MAX_SEQ_LEN = 20480


def check_qkv(
    op: str, q: object, k: object, v: object, ndim: int, q_rows: bool = True
) -> tuple[torch.Tensor, ...]:
    """q, k, v checked: rank ``ndim``, one float dtype and device, ``N_q % N_k == 0``, ``N_k``
    of k == of v, one ``D_qk`` and, along the token / batch dims, the same sizes (k and v only,
    without ``q_rows``: delta's q has rows of its own)."""
    q, k, v = (check_tensor(op, n, t) for n, t in (("q", q), ("k", k), ("v", v)))
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_ndim(op, name, t, (ndim,))
        check_dtype(op, name, t, FLOAT_DTYPES)
    check_same_dtype(op, q=q, k=k, v=v)
    check_same_device(op, q=q, k=k, v=v)
    lead = ndim - 2
    rows = q.shape[:lead] if q_rows else k.shape[:lead]
    if k.shape[:lead] != rows or v.shape[:lead] != rows:
        raise ValueError(
            f"{op}: arguments 'k' and 'v' must have the leading sizes {list(rows)}; "
            f"got {list(k.shape)} and {list(v.shape)}"
        )
    nq, nk = q.size(-2), k.size(-2)
    if nq == 0:
        raise ValueError(f"{op}: argument 'q' must have at least one head; got {list(q.shape)}")
    if nk == 0 or nq % nk != 0 or v.size(-2) != nk:
        raise ValueError(
            f"{op}: argument 'k' must have a head count dividing q's ({nq}) and equal to v's "
            f"({v.size(-2)}); got {nk}"
        )
    if k.size(-1) != q.size(-1):
        raise ValueError(
            f"{op}: argument 'k' must have q's head dim {q.size(-1)}; got {k.size(-1)}"
        )
    return q, k, v


def check_mask_args(
    op: str,
    q: torch.Tensor,
    batch: int,
    s_max: int,
    mask: torch.Tensor | None,
    attn_bias: torch.Tensor | None,
    mask_type: int,
    s_keys: int | None = None,
) -> None:
    """mask_type in {0, 2, 3} (1, upper triangular, is refused as Rec SDK does); the custom
    mask (required for 3) and attn_bias ``[B, N_q, S, S]`` in q's dtype and device; ``S`` (and
    ``S_k``) at most :data:`MAX_SEQ_LEN`."""
    for name, s in (("max_seq_len", s_max), ("max_seq_len_k", s_keys)):
        if s is not None and s > MAX_SEQ_LEN:
            raise ValueError(
                f"{op}: argument '{name}' must be <= {MAX_SEQ_LEN} (Rec SDK's longest sequence); "
                f"got {s}"
            )
    if mask_type == 1:
        raise ValueError(f"{op}: argument 'mask_type' 1 (upper triangular) is not supported")
    if mask_type not in (0, 2, 3):
        raise ValueError(f"{op}: argument 'mask_type' must be 0, 2 or 3; got {mask_type}")
    if mask_type == 3 and mask is None:
        raise ValueError(f"{op}: argument 'mask' is required with mask_type 3")
    want = [batch, q.size(-2), s_max, s_max if s_keys is None else s_keys]
    for name, t in (("mask", mask if mask_type == 3 else None), ("attn_bias", attn_bias)):
        if t is None:
            continue
        if list(t.shape) != want:
            raise ValueError(f"{op}: argument '{name}' must have shape {want}; got {list(t.shape)}")
        if t.dtype != q.dtype:
            raise ValueError(f"{op}: argument '{name}' must have q's dtype; got {t.dtype}")
        check_same_device(op, q=q, **{name: t})


def check_offsets(
    op: str, seq_offset: object, q: torch.Tensor, name: str = "seq_offset"
) -> torch.Tensor:
    """``name`` (seq_offset): 1-D int32 / int64 with at least 2 elements, on q's device;
    returned as int32 (:func:`to_int32`: an int64 offset past 2**31 cannot wrap into range and
    pass the data checks)."""
    off = check_tensor(op, name, seq_offset)
    check_ndim(op, name, off, (1,))
    check_dtype(op, name, off, OFFSET_DTYPES)
    if off.numel() < 2:
        raise ValueError(
            f"{op}: argument '{name}' must have at least 2 elements; got {off.numel()}"
        )
    check_same_device(op, q=q, **{name: off})
    return to_int32(off)


def to_int32(t: torch.Tensor) -> torch.Tensor:
    """int32 ``t``, int64 ``t`` saturated into int32 (``clamp`` + cast, with the data checks on;
    the plain cast without them).  A plain cast wraps: ``2**32 + 1`` becomes ``1``, a valid
    count or offset, and the data checks (read on int32 values) would pass it.  Every later
    ``.to(torch.int32)`` of the result is free (the index arithmetic casts again)."""
    if t.dtype == torch.int64 and validation_enabled():
        t = t.clamp(INT32_MIN, INT32_MAX)
    return t.to(torch.int32)


def check_counts(
    op: str, batch: int, q: torch.Tensor, **counts: torch.Tensor | None
) -> dict[str, torch.Tensor | None]:
    """num_context / num_target: ``[B]`` int32 / int64 on q's device, as int32 (saturated,
    :func:`to_int32`) or None."""
    out: dict[str, torch.Tensor | None] = {}
    for name, t in counts.items():
        if t is None:
            out[name] = None
            continue
        check_ndim(op, name, t, (1,))
        check_dtype(op, name, t, OFFSET_DTYPES)
        if t.numel() != batch:
            raise ValueError(f"{op}: argument '{name}' must have {batch} elements; got {t.numel()}")
        check_same_device(op, q=q, **{name: t})
        out[name] = to_int32(t)
    return out


def queue_data_checks(
    op: str,
    off: torch.Tensor,
    lengths: torch.Tensor,
    tokens: int,
    s_max: int | None,
    name: str = "seq_offset",
    rows: str = "q.size(0)",
    *,
    bound: str | None = None,
    strict: bool = True,
    **counts: torch.Tensor | None,
) -> DataChecks:
    """The data conditions of int32 offsets ``off`` (:func:`check_offsets`) and their
    ``lengths``: they start at 0, end at ``tokens``, never decrease; lengths at most ``s_max``
    (when given); the int32 counts (:func:`check_counts`) ``>= 0`` with ``num_context +
    num_target < L`` per sequence where one is positive (the issue's rule; Rec SDK's adapter
    also allows ``== L``).

    Sized (``s_max`` given, ``B * s_max < 2**31``), "never decrease" is "every length >= 0":
    one ``aminmax`` gives both bounds of the lengths (no ``ge`` / ``all`` over the offsets).  A
    decreasing int32 pair whose difference wraps to a length in ``[0, s_max]`` cannot pass
    too: the lengths sum to ``T`` plus ``2**32`` per wrap, and a sum in ``[0, B * s_max]`` leaves
    no room for one.  Unsized, :func:`~fbgemm_npu.native._checks.non_decreasing` compares.

    The counts' condition is one reduction, ``min(n_c, n_t, L - n_c, L - n_c - n_t) >= 0``
    (2 ``sub``, ``stack``, ``min``); ``L - n_c >= 0`` is in the set so that ``L - n_c - n_t``
    cannot wrap in int32; ``L`` is in ``[0, tokens]`` whenever the offsets' conditions hold (a
    call's conditions fail together otherwise: one message lists them all).
    ``bound`` names ``s_max``'s argument in the messages (default ``max_seq_len``, and
    ``max_seq_len_k`` for ``seq_offset_k``).
    Launches, sized: ``aminmax`` + the counts' 0, 4 (or 3); unsized: ``ge``, ``all``."""
    checks = DataChecks(op)
    checks.add(off[0], 0, 0, f"argument '{name}' must start at 0")
    checks.add(off[-1], tokens, tokens, f"argument '{name}' must end at {rows} = {tokens}")
    bound = bound or ("max_seq_len_k" if name == "seq_offset_k" else "max_seq_len")
    longest = f"argument '{name}': its sequence lengths must be <= {bound} = {s_max}"
    if s_max is not None and lengths.numel() * s_max < 2**31:
        low, high = torch.aminmax(lengths)
        checks.add(low, 0, None, f"argument '{name}' must be non-decreasing")
        checks.add(high, None, s_max, longest)
    else:
        checks.require(non_decreasing(off), f"argument '{name}' must be non-decreasing")
        if s_max is not None:
            checks.add(lengths.max(), None, s_max, longest)
    given = {n: t for n, t in counts.items() if t is not None}
    names = join_words([f"'{n}'" for n in given], "and")
    if given:  # the issue: num_context + num_target >= the sequence is an error (0 + 0 is not)
        rest, parts = lengths, list(given.values())
        for t in given.values():
            rest = rest - t
            parts.append(rest)
        if strict:  # below the length where a count is given (not for a paged q: its history
            parts[-1] = rest - (rest < lengths).to(rest.dtype)  # is in the cache)
        total = " + ".join(given)
        rule = "below each sequence's length (or 0)" if strict else "<= each sequence's length"
        what = f"argument(s) {names} must be >= 0 with {total} {rule}"
        checks.add(torch.stack(parts).min(), 0, None, what)
    return checks


def to_padded(
    xs: list[torch.Tensor], off: torch.Tensor, s_max: int
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Jagged ``[T, N, D]`` tensors (one dtype) -> padded ``[B, S, N, D]`` (0 past a length),
    and the int32 lengths.  One gather of the concatenated rows: launches int32 casts and index
    arithmetic (about 7), ``cat``, ``index_select``, ``where``."""
    tokens, batch = xs[0].size(0), off.numel() - 1
    dev = off.device
    o = off.to(torch.int32)
    lengths = o[1:] - o[:-1]
    pos = arange_cached(s_max, dev, torch.int32).view(1, -1)
    valid = pos < lengths.view(-1, 1)
    src = (o[:-1].view(-1, 1) + pos).clamp_(0, max(tokens - 1, 0))  # clamped: bad offsets stay safe
    widths = [x[0].numel() for x in xs]
    flat = (
        torch.cat([x.reshape(tokens, -1) for x in xs], 1)
        if len(xs) > 1
        else xs[0].reshape(tokens, -1)
    )
    rows = flat.index_select(0, src.view(-1)).view(batch, s_max, -1)
    rows = torch.where(valid.unsqueeze(-1), rows, 0)
    out, at = [], 0
    for x, w in zip(xs, widths, strict=True):
        out.append(rows[..., at : at + w].view(batch, s_max, *x.shape[1:]))
        at += w
    return out, lengths


def from_padded(x: torch.Tensor, off: torch.Tensor, tokens: int) -> torch.Tensor:
    """Padded ``[B, S, N, D]`` -> jagged ``[T, N, D]``: token ``t`` of batch ``b`` at position
    ``t - seq_offset[b]``.  Launches: segment ids (3), index arithmetic (about 5), a gather."""
    batch, s_max = x.shape[:2]
    o = off.to(torch.int32)
    seg = segment_ids(o, tokens).clamp_(0, batch - 1)
    pos = arange_cached(tokens, off.device, torch.int32) - o.index_select(0, seg)
    flat = (seg * s_max + pos).clamp_(0, batch * s_max - 1)
    return x.reshape(batch * s_max, *x.shape[2:]).index_select(0, flat)
