"""Jagged slices on npu: ``fbgemm::jagged_slice`` and ``fbgemm::jagged_slice_forward``.

``jagged_slice(x_values [N], x_lengths [B], start [B], slice_length)`` (int64 lengths and start,
as upstream's kernel reads them)::

    new_len[b] = min(x_lengths[b] - start[b], slice_length)
    out = cat_b x_values[x_off[b] + start[b] : x_off[b] + start[b] + new_len[b]]   [sum new_len]

(``x_off`` the exclusive cumsum of ``x_lengths``); returns ``(out, new_len)``.  Upstream checks
``0 <= start <= x_lengths`` (always: ours too) and registers only an ``Autograd`` kernel, whose
forward reads four values back (two checks, two sums); ours (``AutogradPrivateUse1``) reads one.
The gradient of ``x_values`` is the incoming gradient at the rows read, 0 elsewhere (upstream's
backward: ``jagged_slice_forward`` with ``fill_zeros``).  A negative ``slice_length`` is refused
(upstream returns uninitialised values for it).

``jagged_slice_forward(x_values, x_lengths, src_start, output_lengths, tgt_start, P,
slice_length, fill_zeros)`` -> ``[P]``: for each ``b`` and ``c < count[b] = min(slice_length,
output_lengths[b] - tgt_start[b], x_lengths[b] - src_start[b])``::

    out[out_off[b] + tgt_start[b] + c] = x_values[x_off[b] + src_start[b] + c]

(``out_off`` the exclusive cumsum of ``output_lengths``), 0 elsewhere; upstream leaves the rest
uninitialised without ``fill_zeros``, ours writes 0 there too.  Computed as a gather over the
``P`` output positions (segment of each, then its ``(first, end, shift)`` triple), no sync.

Dtypes: float32, float16, bfloat16, int32, int64 values (upstream's); index tensors int64.
Data checks (queued; with ``FBGEMM_NPU_VALIDATE=0`` only upstream's own ``start`` checks, read
in the sync): lengths and starts ``>= 0``, lengths and their sums below 2**31 (the int32 scans),
every row read inside ``x_values`` and every row written inside the output (upstream reads and
writes past them).  Rows are clamped, so bad data stays memory-safe.  Launches and syncs:
``BUDGETS`` in ``budgets.py``.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._autograd import below_autograd, needs_grad
from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_ndim,
    check_same_device,
    check_tensor,
    dynamic_size,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids
from fbgemm_npu.native.fbgemm.jagged._segments import (
    check_lengths_data,
    ends_i32,
    segment_rows,
)
from fbgemm_npu.native.fbgemm.jagged._utils import JAGGED_DTYPES, fill_padding

__all__ = ["KERNELS", "jagged_slice_forward_npu", "jagged_slice_npu"]

JAGGED_SLICE = "fbgemm::jagged_slice"
JAGGED_SLICE_FORWARD = "fbgemm::jagged_slice_forward"


def _values(op: str, x_values: object) -> torch.Tensor:
    x = check_ndim(op, "x_values", check_tensor(op, "x_values", x_values), (1,))
    return check_dtype(op, "x_values", x, JAGGED_DTYPES)


def _index(op: str, arg: str, value: object, b: int | None) -> torch.Tensor:
    """A 1-D int64 tensor of ``b`` entries (any count when ``b`` is None)."""
    t = check_ndim(op, arg, check_tensor(op, arg, value), (1,))
    check_dtype(op, arg, t, (torch.int64,))
    if b is not None and t.numel() != b:
        raise ValueError(
            f"{op}: argument '{arg}' has {t.numel()} entries, expected {b} (one per row)"
        )
    return t


def _slice_length(op: str, slice_length: object, least: int | None) -> int:
    if isinstance(slice_length, bool) or not isinstance(slice_length, int):
        raise ValueError(f"{op}: argument 'slice_length' must be an int, got {slice_length!r}")
    if least is not None and slice_length < least:
        raise ValueError(
            f"{op}: argument 'slice_length' must be >= {least}, got {slice_length} (upstream "
            "returns uninitialised values for a negative one)"
        )
    return slice_length


def jagged_slice_npu(
    x_values: torch.Tensor, x_lengths: torch.Tensor, start: torch.Tensor, slice_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, new_len)`` below autograd (module docstring).  Launches: ``sub``, ``clamp`` (the
    new lengths), the bounds of both lengths (:func:`ends_i32`), the per-segment base (``add``,
    ``sub``), the checks' statistics and their read (the one sync), :func:`segment_rows`, one
    ``index_select``."""
    op = JAGGED_SLICE
    x = _values(op, x_values)
    lengths = _index(op, "x_lengths", x_lengths, None)
    s = _index(op, "start", start, lengths.numel())
    check_same_device(op, x_values=x, x_lengths=lengths, start=s)
    length = _slice_length(op, slice_length, 0)
    if lengths.numel() == 0:
        return x.new_empty(0), lengths.clone()
    n = x.numel()
    diff = lengths - s
    new_len = diff.clamp(0, length)  # = upstream's clamp_max once 0 <= start <= x_lengths holds
    in_starts, _ = ends_i32(lengths)
    out_starts, out_ends = ends_i32(new_len)
    first = in_starts + s  # int64: the first row each segment reads
    checks = DataChecks(op)
    checks.add(s.amin(), 0, None, "argument 'start' must be >= 0 (upstream: 'always be positive')")
    checks.add(diff.amin(), 0, None, "argument 'start' must be <= x_lengths (upstream's check)")
    if validation_enabled():  # ours: upstream reads what the lengths say
        check_lengths_data(checks, lengths, "x_lengths")
        beyond = torch.where(new_len > 0, first + new_len, 0).amax()  # one past the last read
        checks.add(
            beyond, None, n, f"argument 'x_lengths': a row read lies past x_values' end ({n})"
        )
    (total,) = checks.read_with([out_ends[-1]])  # the one sync: the output size
    if total == 0 or n == 0:  # (n == 0 with rows to read: only with the checks off)
        return x.new_zeros(total), new_len
    rows = segment_rows(out_starts, first - out_starts, total, n)
    return x.index_select(0, rows), new_len


class _JaggedSlice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lengths, s, slice_length):  # type: ignore[override]
        out, new_len = below_autograd(torch.ops.fbgemm.jagged_slice, x, lengths, s, slice_length)
        ctx.save_for_backward(lengths, s, new_len)
        ctx.n, ctx.slice_length = x.numel(), slice_length
        ctx.mark_non_differentiable(new_len)
        return out, new_len

    @staticmethod
    def backward(ctx, grad, _):  # type: ignore[override]
        lengths, s, new_len = ctx.saved_tensors
        # upstream's backward: jagged_slice_forward (our npu op) scatters segment b of grad back
        # to rows x_off[b] + start[b] + c, zeros elsewhere; sized by x_values, not by grad, so a
        # trace needs no data-dependent size here
        gx = torch.ops.fbgemm.jagged_slice_forward(
            grad, new_len, torch.zeros_like(s), lengths, s, ctx.n, ctx.slice_length, True
        )
        return gx, None, None, None


def _jagged_slice_autograd(
    x_values: torch.Tensor, x_lengths: torch.Tensor, start: torch.Tensor, slice_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if needs_grad(x_values):
        return _JaggedSlice.apply(x_values, x_lengths, start, slice_length)
    return below_autograd(torch.ops.fbgemm.jagged_slice, x_values, x_lengths, start, slice_length)


def _jagged_slice_meta(
    x_values: torch.Tensor, x_lengths: torch.Tensor, start: torch.Tensor, slice_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream registers none: the output size is data (``sum(new_len)``)."""
    n = dynamic_size(JAGGED_SLICE, "the sum of the sliced lengths", x_values.numel())
    return x_values.new_empty(n), torch.empty_like(x_lengths)


def jagged_slice_forward_npu(
    x_values: torch.Tensor,
    x_lengths: torch.Tensor,
    src_start: torch.Tensor,
    output_lengths: torch.Tensor,
    tgt_start: torch.Tensor,
    num_output_rows: int,
    slice_length: int,
    fill_zeros: bool,
) -> torch.Tensor:
    """``[num_output_rows]`` (module docstring).  Launches: the bounds of both lengths, the
    per-segment ``count`` (two ``sub``, ``minimum``, ``clamp``), ``first`` / ``end`` / ``shift``
    (``add``, ``add``, ``add``, ``sub``), their ``stack``, ``segment_ids``, the triple's gather,
    the written test (``lt``, ``ge``, ``logical_or``), the rows (``add``, ``clamp_``), one
    ``index_select`` and the zero fill; checks: the lengths' and starts' statistics, the
    furthest read and write, the queued check."""
    op = JAGGED_SLICE_FORWARD
    x = _values(op, x_values)
    out_lengths = _index(op, "output_lengths", output_lengths, None)
    b = out_lengths.numel()
    lengths = _index(op, "x_lengths", x_lengths, b)
    src = _index(op, "src_start", src_start, b)
    tgt = _index(op, "tgt_start", tgt_start, b)
    check_same_device(
        op, x_values=x, x_lengths=lengths, src_start=src, output_lengths=out_lengths, tgt_start=tgt
    )
    p = int(num_output_rows)
    if p < 0:
        raise ValueError(f"{op}: argument 'num_output_rows' must be >= 0, got {p}")
    length = max(_slice_length(op, slice_length, None), 0)  # a negative one copies nothing
    if b == 0 or p == 0:  # nothing to write, or no row to write it to (checked below if any)
        if b > 0 and validation_enabled():
            _forward_checks(op, x.numel(), p, lengths, out_lengths, src, tgt, length)
        return x.new_zeros(p)
    n = x.numel()
    in_starts, _ = ends_i32(lengths)
    out_starts, _ = ends_i32(out_lengths)
    count = torch.minimum(out_lengths - tgt, lengths - src).clamp_(0, length)
    first = out_starts + tgt  # first output position written
    end = first + count
    shift = in_starts + src - first  # row read = position + shift
    if validation_enabled():
        _forward_checks(op, n, p, lengths, out_lengths, src, tgt, length, (count, end, shift))
    if n == 0:  # nothing can be read (a write here fails the checks): zeros, memory-safe
        return x.new_zeros(p)
    seg = segment_ids(out_starts, p)  # in [0, B): the B - 1 inner starts as bounds
    per = torch.stack((first, end, shift), 1).index_select(0, seg)
    pos = arange_cached(p, x.device)
    rows = (pos + per[:, 2]).clamp_(0, n - 1)
    out = x.index_select(0, rows)
    if x.dtype.is_floating_point:  # masked_fill_ (a product would keep NaN / inf)
        unwritten = torch.lt(pos, per[:, 0]).logical_or_(pos >= per[:, 1])
        return fill_padding(out, unwritten, 0)
    # integers: a product with the written mask (an int64 masked_fill_ is AI CPU, a where
    # costs its scalar's fill): the same launch count for every dtype
    written = torch.ge(pos, per[:, 0]).logical_and_(pos < per[:, 1])
    return out.mul_(written)


def _forward_checks(
    op: str,
    n: int,
    p: int,
    lengths: torch.Tensor,
    out_lengths: torch.Tensor,
    src: torch.Tensor,
    tgt: torch.Tensor,
    length: int,
    parts: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """Queue ``jagged_slice_forward``'s data checks (module docstring)."""
    checks = DataChecks(op)
    check_lengths_data(checks, lengths, "x_lengths")
    check_lengths_data(checks, out_lengths, "output_lengths")
    checks.add(src.amin(), 0, None, "argument 'src_start' must be >= 0")
    checks.add(tgt.amin(), 0, None, "argument 'tgt_start' must be >= 0")
    if parts is None:  # no positions: nothing may be copied
        count = torch.minimum(out_lengths - tgt, lengths - src).clamp_(0, length)
        checks.add(count.amax(), None, 0, "argument 'num_output_rows': rows written past it (0)")
    else:
        count, end, shift = parts
        copied = count > 0
        wrote = torch.where(copied, end, 0).amax()
        checks.add(
            wrote,
            None,
            p,
            f"argument 'output_lengths': a row written lies past num_output_rows ({p})",
        )
        read = torch.where(copied, end + shift, 0).amax()
        checks.add(read, None, n, f"argument 'x_lengths': a row read lies past x_values' end ({n})")
    checks.assert_on_device()


def _jagged_slice_forward_meta(
    x_values: torch.Tensor,
    x_lengths: torch.Tensor,
    src_start: torch.Tensor,
    output_lengths: torch.Tensor,
    tgt_start: torch.Tensor,
    num_output_rows: int,
    slice_length: int,
    fill_zeros: bool,
) -> torch.Tensor:
    """Upstream registers none: ``[num_output_rows]`` of ``x_values``' dtype."""
    return x_values.new_empty(num_output_rows)


KERNELS = {
    JAGGED_SLICE: {
        "PrivateUse1": jagged_slice_npu,
        "AutogradPrivateUse1": _jagged_slice_autograd,
        "Meta": _jagged_slice_meta,
    },
    JAGGED_SLICE_FORWARD: {
        "PrivateUse1": jagged_slice_forward_npu,
        "Meta": _jagged_slice_forward_meta,
    },
}
