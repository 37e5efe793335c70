"""Shared pieces of the jagged family: argument checks, padding values and the dense index.

A jagged tensor with ``k`` jagged dims is ``values`` (``N`` rows) plus ``k`` offsets tensors.
``offsets[0]`` has ``B + 1`` entries; the rows of level ``d`` are the entries of ``offsets[d]``
minus one.  Its padded dense form has shape ``[B, L_1, ..., L_k, (D)]``.  Upstream's kernels walk,
for every dense position ``(b, j_1, ..., j_k)``::

    r = b
    for d in range(k):
        begin, end = offsets[d][r], offsets[d][r + 1]
        if j_d >= end - begin: the position is padding
        r = begin + j_d
    value row = r

:func:`dense_index` computes that walk for all positions at once, level by level: per level an
``add`` of a cached int64 ``arange`` and a compare build ``[..., L_d]`` indices and the padding
mask, and for levels after the first one ``index_select`` of ``(begin, end)`` pairs (an
``unfold`` view of the offsets).  Nothing loops over batch or rows; the launch count grows with
``k`` only.  Every index op runs on a 910B's AI Core for int32 and int64 offsets alike
(docs/hardware.md): int64 ``add`` / ``ge`` / ``clamp`` / ``where`` / ``remainder``, no
``masked_fill_`` or ``constant_pad_nd`` of int64.  Gathers read clamped rows
(:func:`read_rows`) and set the padding afterwards (:func:`fill_padding`); scatters write into
a spare row (:func:`write_rows`): no read or write leaves its tensor, whatever the data, so a
call whose (deferred) data check fails is memory-safe until the check is read.

Input checks follow the policy of :mod:`fbgemm_npu.native._checks`: metadata checks always, data
checks as one device-side check per call.  Upstream reads and writes whatever the
offsets point to without bounds checks, so the data check here is exactly "every position
upstream would touch lies inside the tensor it touches" plus upstream's own check that
``offsets[d].numel() - 1`` equals the last entry of ``offsets[d - 1]``.  Inputs upstream
handles without touching memory out of bounds (decreasing offsets, a last offset below
``values.size(0)``, offsets past the end that truncation never reaches) give upstream's result.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    INDEX_DTYPES,
    check_dtype,
    check_ndim,
    check_on_device,
    check_tensor,
    dtype_name,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32

__all__ = [
    "JAGGED_DTYPES",
    "MAX_JAGGED_DIMS",
    "READ_CHECK",
    "WRITE_CHECK",
    "Run",
    "assert_no_bad",
    "beyond_rows",
    "check_max_lengths",
    "check_offsets",
    "check_values",
    "checked_dense_index",
    "dense_index",
    "fill_padding",
    "int32_bad",
    "numel_of",
    "padding_scalar",
    "read_rows",
    "record_or_run",
    "write_rows",
]

# Upstream's jagged kernels (CPU and CUDA, FBGEMM_DISPATCH_ALL_TYPES) take exactly these.
JAGGED_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int32,
    torch.int64,
)
# Upstream dispatches 1..5 jagged dims (JAGGED_TENSOR_DISPATCH_DIMS, CUDA's StackArray) and raises
# beyond; ours is generic, but refuses what upstream refuses.
MAX_JAGGED_DIMS = 5

# What the data check of assert_no_bad says when offsets point outside the tensor read / written.
_INT32_NOTE = (
    ", or an offset is < 0 or >= 2**31 (upstream's kernels read offsets as 32-bit ints: such "
    "rows are not what they say)"
)
READ_CHECK = (
    "offsets point outside the values: a non-padding position would read a row < 0 or past the "
    "last one, or offsets[d + 1].numel() != offsets[d][-1] + 1" + _INT32_NOTE
)
WRITE_CHECK = (
    "offsets point outside the output: a position would write a row < 0 or >= the output's "
    "rows, or offsets[d + 1].numel() != offsets[d][-1] + 1" + _INT32_NOTE
)

_INT_MIN = {torch.int32: -(2**31), torch.int64: -(2**63)}


def numel_of(shape: Sequence[int]) -> int:
    """Product of ``shape`` (1 for ``()``)."""
    return math.prod(shape)


def padding_scalar(value: float, dtype: torch.dtype) -> int | float:
    """``padding_value`` (a double in upstream's schema) as upstream stores it in ``dtype``.

    Upstream casts with ``static_cast<scalar_t>(double)``: floats round to nearest (half types go
    through float first, as ``c10::Half(float)`` does); integers truncate toward zero.  An integer
    cast of NaN or of a value out of range is undefined behaviour in C++; the x86-64 build that is
    our oracle yields the dtype's minimum (``cvttsd2si``), and so do we.
    """
    if dtype.is_floating_point:
        as_float = _to_float32(value)
        if dtype == torch.float32:
            return as_float
        return torch.tensor(as_float, dtype=torch.float32).to(dtype).item()
    lo = _INT_MIN[dtype]
    if math.isnan(value) or not (lo <= value < -lo):
        return lo
    return int(value)


def _to_float32(value: float) -> float:
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:  # struct refuses finite doubles beyond float32's range: they round to inf
        return math.copysign(math.inf, value)


def check_offsets(op: str, arg: str, offsets: object, device: torch.device) -> list[torch.Tensor]:
    """Metadata checks of an offsets list; returns it as a list.

    One to five 1-D int32/int64 tensors of one dtype, each with at least one entry, on ``device``.
    Upstream segfaults on an empty list and raises for the rest.
    """
    if not isinstance(offsets, (list, tuple)):
        raise ValueError(f"{op}: argument '{arg}' must be a list of Tensors")
    if not 1 <= len(offsets) <= MAX_JAGGED_DIMS:
        raise ValueError(
            f"{op}: argument '{arg}' must hold 1 to {MAX_JAGGED_DIMS} offsets tensors (one per "
            f"jagged dim), got {len(offsets)}"
        )
    out = []
    for d, o in enumerate(offsets):
        name = f"{arg}[{d}]"
        o = check_tensor(op, name, o)
        check_ndim(op, name, o, (1,))
        check_dtype(op, name, o, INDEX_DTYPES)
        if o.dtype != offsets[0].dtype:
            raise ValueError(
                f"{op}: argument '{name}' has dtype {dtype_name(o.dtype)} but '{arg}[0]' has "
                f"{dtype_name(offsets[0].dtype)}; all offsets must share one dtype"
            )
        if o.numel() == 0:
            raise ValueError(f"{op}: argument '{name}' must have at least one entry (B + 1)")
        if o.device != device:
            raise RuntimeError(
                f"{op}: argument '{name}' is on {o.device} but the data is on {device}; "
                "they must be on the same device"
            )
        out.append(o)
    return out


def check_values(op: str, arg: str, values: object, min_ndim: int = 1) -> torch.Tensor:
    """A tensor of a jagged dtype with at least ``min_ndim`` dims."""
    t = check_tensor(op, arg, values)
    check_dtype(op, arg, t, JAGGED_DTYPES)
    if t.dim() < min_ndim:
        raise ValueError(
            f"{op}: argument '{arg}' must have at least {min_ndim} dim(s), got a {t.dim()}-D "
            f"tensor of shape {tuple(t.shape)}"
        )
    return t


def check_max_lengths(op: str, arg: str, max_lengths: Sequence[int], k: int) -> list[int]:
    """One non-negative length per jagged dim."""
    lengths = [int(v) for v in max_lengths]
    if len(lengths) != k:
        raise ValueError(
            f"{op}: argument '{arg}' must have one entry per jagged dim ({k}), got {len(lengths)}"
        )
    for d, v in enumerate(lengths):
        if v < 0:
            raise ValueError(f"{op}: argument '{arg}[{d}]' must be >= 0, got {v}")
    return lengths


def dense_index(
    offsets: Sequence[torch.Tensor],
    max_lengths: Sequence[int],
    bad: list[torch.Tensor] | None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Value row and padding mask of every dense position ``[B, L_1, ..., L_k]``.

    Returns ``(idx, pad)``: ``idx`` (int64) is the value row a non-padding position reads or
    writes; at padding positions (``pad``, bool) it holds anything, so callers make it safe
    (:func:`read_rows`, :func:`write_rows`).  ``None`` when a level after the first has no rows
    at all: every position is then padding (and any non-padding position upstream would visit is
    reported in ``bad``).

    The index is int64 for int32 offsets too, at no launch: the cached int64 ``arange`` added to
    the row starts promotes them.  An int32 ``start + j`` would wrap for a padding position of a
    row that starts near 2**31 and turn it into a non-padding one; int64 holds every sum, and a
    910B runs int64 ``add`` / ``ge`` / ``clamp`` / ``where`` on its AI Core (its int64
    ``masked_fill_`` on the AI CPU, docs/hardware.md: none is used).

    ``bad`` (when not ``None``) receives tensors whose nonzero entries flag inputs upstream would
    mishandle: an offset outside ``[0, 2**31)`` (:func:`int32_bad`), an intermediate row index
    outside ``[0, rows of the next level)`` and ``offsets[d][-1] != offsets[d + 1].numel() - 1``.
    The caller adds the check on the final rows.  Launches: ``add`` and ``ge`` per level (the
    ``arange`` is cached up to 2**16 positions: :func:`_positions`); a further level adds a
    ``clamp_``, the ``index_select`` of the ``(begin, end)`` pairs and a ``logical_or_`` (and,
    with the checks, :func:`int32_bad`, a subtract, a ``where`` and a ``ge``); the first
    level's check is :func:`int32_bad`.
    Intermediate indices are clamped before they are used, so no read leaves its tensor, whatever
    the data and whether or not the checks run.
    """
    o0 = offsets[0]
    start, end = o0[:-1], o0[1:]
    idx: torch.Tensor | None = None
    pad: torch.Tensor | None = None
    for d, (o, length) in enumerate(zip(offsets, max_lengths, strict=True)):
        if bad is not None:
            bad.append(int32_bad(o))
        if d > 0:
            assert idx is not None and pad is not None
            n = o.numel() - 1
            if bad is not None:
                bad.append(offsets[d - 1][-1:] - n)  # upstream: numel(offsets[d]) == last + 1
                bad.append(beyond_rows(idx, pad, n))
            if n == 0:  # no rows below: the deeper levels are still checked, as upstream does
                if bad is not None:
                    for e in range(d + 1, len(offsets)):
                        bad.append(int32_bad(offsets[e]))
                        bad.append(offsets[e - 1][-1:] - (offsets[e].numel() - 1))
                return None
            cur = idx.clamp_(0, n - 1)  # padding positions gather any pair: they stay padding
            pairs = o.unfold(0, 2, 1).index_select(0, cur.reshape(-1))
            pairs = pairs.view(*cur.shape, 2)
            start, end = pairs[..., 0], pairs[..., 1]
        idx = start.unsqueeze(-1) + _positions(length, o0.device)
        beyond = idx >= end.unsqueeze(-1)
        pad = beyond if pad is None else beyond.logical_or_(pad.unsqueeze(-1))
    assert idx is not None and pad is not None
    return idx, pad


# Dense lengths up to this read the shared cached arange; a longer one builds its own (one launch
# more), so that one huge max_length does not leave a cache of its size behind for good.
_CACHED_POSITIONS = 1 << 16


def _positions(length: int, device: torch.device) -> torch.Tensor:
    """``arange(length)`` in int64: a view of the shared cache up to :data:`_CACHED_POSITIONS`."""
    if length <= _CACHED_POSITIONS:
        return arange_cached(length, device)
    return torch.arange(length, dtype=torch.int64, device=device)


def beyond_rows(idx: torch.Tensor, pad: torch.Tensor, n: int) -> torch.Tensor:
    """Nonzero where a non-padding position's row is ``>= n`` (all of them when ``n == 0``): a
    ``where`` (cached zero) and a ``ge``; ``~pad`` for ``n == 0``.

    A row below 0 needs an offset below 0, which :func:`int32_bad` reports."""
    if n == 0:
        return ~pad
    return torch.where(pad, filled_i32(1, 0, idx.device), idx) >= n


def read_rows(
    idx: torch.Tensor, pad: torch.Tensor, n: int, bad: list[torch.Tensor] | None
) -> torch.Tensor:
    """The rows a gather from ``n > 0`` rows reads: ``idx`` clamped into ``[0, n)`` in place (one
    ``clamp_``), so that no read leaves the tensor whatever the data; the caller sets the padding
    positions of what it gathered.  ``bad`` gets :func:`beyond_rows` (taken before the clamp)."""
    if bad is not None:
        bad.append(beyond_rows(idx, pad, n))
    return idx.clamp_(0, n - 1)


def write_rows(
    idx: torch.Tensor, pad: torch.Tensor, total: int, bad: list[torch.Tensor] | None
) -> torch.Tensor:
    """The rows a scatter into ``total + 1`` rows writes, padding positions at the spare row
    ``total``: ``where(pad, -1, idx)`` (a cached -1) and its ``remainder`` by ``total + 1``, which
    sends -1 to ``total`` and keeps every row in the buffer whatever the data.

    ``bad`` gets one ``ge``: ``where(pad, -1, idx) >= total`` is false exactly at padding
    positions and rows in ``[0, total)`` (a row below 0 needs an offset below 0, which
    :func:`int32_bad` reports)."""
    marked = torch.where(pad, filled_i32(1, -1, idx.device), idx)
    if bad is not None:
        bad.append(marked >= total)
    return marked.remainder_(total + 1)


def int32_bad(o: torch.Tensor) -> torch.Tensor:
    """Nonzero where an offset lies outside ``[0, 2**31)``: one launch (``lt`` for int32,
    ``floor_divide`` for int64).

    Upstream's kernels read offsets as ``int`` and subtract them there: a row whose ends leave
    that range is truncated or wraps (``end - begin`` of ``8`` and ``-2**31 + 7`` is positive),
    so its result is not the row the offsets describe; no well-formed offsets leave it.
    """
    return o < 0 if o.dtype == torch.int32 else o // 2**31


def checked_dense_index(
    op: str,
    offsets: Sequence[torch.Tensor],
    max_lengths: Sequence[int],
    total: int,
    what: str,
    write: bool = False,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(rows, pad)`` of a tensor of ``total`` value rows, with the data check that every
    position upstream would touch lies inside it (``what`` names the failure, e.g. ``"argument
    'offsets': " + READ_CHECK``); ``None`` when every position is padding.

    ``write=False``: ``rows`` of a gather (:func:`read_rows`, ``total > 0``), padding positions
    at some row; ``write=True``: of a scatter into ``total + 1`` rows (:func:`write_rows`),
    padding positions at the spare row ``total``.  Launches: those of :func:`dense_index`, the
    rows' own and :func:`assert_no_bad` (none of the checks' with ``FBGEMM_NPU_VALIDATE=0``)."""
    bad: list[torch.Tensor] | None = [] if validation_enabled() else None
    index = dense_index(offsets, max_lengths, bad)
    if index is not None:
        idx, pad = index
        rows = write_rows(idx, pad, total, bad) if write else read_rows(idx, pad, total, bad)
        index = rows, pad
    assert_no_bad(op, bad, what)
    return index


def fill_padding(out: torch.Tensor, pad: torch.Tensor, value: int | float) -> torch.Tensor:
    """``out`` (``[P]`` or ``[P, D]``, gathered) with ``value`` at the ``P`` positions ``pad``
    (``[P]``) sets: one ``masked_fill_`` in place; for int64 (whose ``masked_fill_`` a 910B runs
    on its AI CPU) a ``where``, whose scalar costs a fill launch of its own (the budgets'
    ``int64_values`` paths)."""
    mask = pad.view(-1, *([1] * (out.dim() - 1)))
    if out.dtype != torch.int64:
        return out.masked_fill_(mask, value)
    return torch.where(mask, int(value), out)


def assert_no_bad(op: str, bad: list[torch.Tensor] | None, what: str) -> None:
    """One device-side check that every tensor in ``bad`` is all zeros.

    Launches: ``cat`` (only for several tensors), ``any``, ``logical_not``, and what
    :func:`~fbgemm_npu.native._checks.check_on_device` adds.
    """
    if not bad or not validation_enabled():
        return
    flat = bad[0].reshape(-1) if len(bad) == 1 else torch.cat([b.reshape(-1) for b in bad])
    check_on_device(op, flat.any().logical_not_(), what)


# The npu kernel of a jagged <-> dense op, called below autograd: (values or dense, offsets) -> out.
Run = Callable[[torch.Tensor, list[torch.Tensor]], torch.Tensor]


def record_or_run(
    fn: type[torch.autograd.Function], x: torch.Tensor, run: Run, offsets: Sequence[torch.Tensor]
) -> torch.Tensor:
    """The ``AutogradPrivateUse1`` body of a jagged <-> dense op differentiable in ``x``:
    ``fn.apply(x, run, *offsets)`` when ``x`` needs a gradient, else ``run`` below autograd.

    Each ``fn`` runs the op's own npu kernel below autograd (so errors name the op the user
    called and the counters see it) and its backward calls the fbgemm backward op on npu: the npu
    path never depends on upstream's C++ autograd."""
    if needs_grad(x):
        return fn.apply(x, run, *offsets)
    return below_autograd(run, x, list(offsets))
