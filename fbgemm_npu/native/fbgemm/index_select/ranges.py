"""Ranges and segment sums: ``fbgemm::offsets_range``, ``lengths_range`` (+ ``lengths_range_out``)
and ``segment_sum_csr`` on npu.

* ``offsets_range(offsets, range_size)``: ``out[j] = j - offsets[s]`` for ``offsets[s] <= j <
  offsets[s + 1]`` (the last segment runs to ``range_size``), i.e. the position of every element
  inside its segment.
* ``lengths_range(t_in, shape)``: the same from lengths: ``cat([arange(l) for l in t_in])``; with
  ``shape`` the output size is ``prod(shape)`` (no sync) and the output is still 1-D.
* ``segment_sum_csr(batch_size, csr_seg, values)``: ``out[s] = sum(values[csr_seg[s] *
  batch_size : csr_seg[s + 1] * batch_size])``.

The ranges subtract each segment's start from the positions; the sum sends every row of
``batch_size`` elements to its segment and adds with one ``index_add``.  Both find segments
without ``searchsorted`` or ``repeat_interleave`` (a 910B runs them on its AI CPU): an int32
``index_add`` at the segment bounds and an int32 ``cumsum``
(:func:`~fbgemm_npu.native.fbgemm.index_select._utils.count_le`), int32 wherever the host bounds
the values below 2**31 from sizes (int64, AI CPU, only above).  Semantics measured on upstream's
CPU kernels (fbgemm-gpu-cpu 1.8.0):

* index dtypes int32 / int64 (the output of the ranges keeps it); ``segment_sum_csr`` values
  float32, float16, bfloat16, int32, int64 (upstream refuses float64); every input is read flat
  (upstream reads ``numel``; ``offsets_range`` and ``lengths_range`` require 1-D, as upstream);
* ``offsets_range``: upstream leaves ``out[:offsets[0]]`` uninitialised and reads out of bounds
  when ``offsets`` decrease or pass ``range_size``: refused here (``offsets`` must start at 0, not
  decrease and end within ``range_size``); empty ``offsets`` with ``range_size > 0`` likewise;
* ``lengths_range``: negative lengths and a ``shape`` whose product is below ``sum(t_in)`` are
  refused by upstream; a product above it leaves upstream's tail uninitialised: refused here too.
  ``lengths_range_out`` resizes ``output`` to the result and requires ``t_in``'s dtype;
* ``segment_sum_csr``: ``batch_size <= 0`` gives zeros (every segment empty), as upstream;
  upstream sums in the values' dtype sequentially (float16 / bfloat16 drift: 3000 x 0.1 gives
  256 / 32): ours accumulates half types in float32.  ``csr_seg`` that decreases (upstream:
  overlapping or empty segments), starts below 0 or ends past ``values`` (upstream reads out of
  bounds) is refused.

``lengths_range`` without ``shape`` reads the output size (the data's sum) back to the host.
Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_dtype,
    check_same_device,
    check_tensor,
    dtype_name,
    non_decreasing,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, filled_i32
from fbgemm_npu.native.fbgemm.index_select import _utils as _u

__all__ = [
    "KERNELS",
    "SEGMENT_VALUE_DTYPES",
    "lengths_range_npu",
    "lengths_range_out_npu",
    "offsets_range_npu",
    "segment_sum_csr_npu",
]

OFFSETS_RANGE = "fbgemm::offsets_range"
LENGTHS_RANGE = "fbgemm::lengths_range"
LENGTHS_RANGE_OUT = "fbgemm::lengths_range_out"
SEGMENT_SUM_CSR = "fbgemm::segment_sum_csr"

SEGMENT_VALUE_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int32,
    torch.int64,
)
_HALF = (torch.float16, torch.bfloat16)


def offsets_range_npu(offsets: torch.Tensor, range_size: int) -> torch.Tensor:
    """``out[j] = j - offsets[s(j)]``, ``s(j)`` the last segment starting at or before ``j``.

    ``offsets`` 1-D int32/int64 (starts of the segments, ``offsets[0] == 0``); output
    ``(range_size,)`` of ``offsets``' dtype.  Launches: the segment of every position
    (:func:`~fbgemm_npu.native.fbgemm.index_select._utils.count_le` of ``offsets[1:]``, 3), the
    starts' gather, ``sub`` from a cached ``arange``: 5.  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
    """
    op = OFFSETS_RANGE
    offsets = _u.check_index_tensor(op, "offsets", offsets)
    _u.check_non_negative(op, "range_size", range_size)
    _u.check_fits(op, "range_size", range_size, offsets.dtype)
    n = offsets.numel()
    if n == 0:
        if range_size > 0:
            raise ValueError(f"{op}: argument 'offsets' is empty but range_size is {range_size}")
        return offsets.new_empty((0,))
    if validation_enabled():
        checks = DataChecks(op)
        checks.add(offsets[0], 0, 0, "argument 'offsets' must start at 0")
        if n > 1:  # compared, not subtracted: int32 steps across 2**31 wrap to valid-looking ones
            checks.require(non_decreasing(offsets), "argument 'offsets' must be non-decreasing")
        what = f"argument 'offsets' must end within range_size ({range_size})"
        checks.add(offsets[-1], None, range_size, what)
        checks.assert_on_device()
    # the segment of every position: the segments starting at or before it, but the first
    with allocation_of(op, f"the output of 'range_size' = {range_size} elements"):
        segment = _u.count_le(offsets[1:], range_size, clamp=validation_enabled())
        positions = arange_cached(range_size, offsets.device, offsets.dtype)
        return positions - offsets.index_select(0, segment)


def _lengths_range(
    op: str, t_in: torch.Tensor, shape: Sequence[int] | None, out: torch.Tensor | None
) -> torch.Tensor:
    n = t_in.numel()
    size = None if shape is None else math.prod(shape)
    if size is not None and size < 0:
        raise ValueError(f"{op}: argument 'shape' must describe a non-negative size, got {shape}")
    if n == 0 and size not in (None, 0):
        raise ValueError(
            f"{op}: argument 'shape' ({list(shape or [])}) must have size 0 for empty lengths"
        )
    checks = DataChecks(op)
    total = 0 if n == 0 else _lengths_total(checks, t_in, size)
    if t_in.dtype == torch.int32 and total >= _u.INT32_LIMIT:
        # int32 lengths sum within int32, as their running sums in upstream's kernels
        if size is not None:
            raise ValueError(
                f"{op}: argument 'shape' (size {size}) must be below 2**31 for int32 't_in' "
                "(int32 lengths sum within int32)"
            )
        raise ValueError(f"{op}: {_u.sum_fits('t_in', torch.int32)}; the sum is {total}")
    whose = "'t_in' (its sum" if size is None else "'shape' (its size"
    with allocation_of(op, f"the output of argument {whose}, {total} elements)"):
        return _ranges_of(checks, t_in, size, total, out)


def _ranges_of(
    checks: DataChecks, t_in: torch.Tensor, size: int | None, total: int, out: torch.Tensor | None
) -> torch.Tensor:
    """The ranges of ``t_in`` (``total`` elements), written into ``out`` when given."""
    if out is not None:
        out.resize_((total,))
    if total == 0:
        if size is not None:  # all lengths in [0, 0] is the whole check
            checks.assert_on_device()
        return t_in.new_empty((0,)) if out is None else out
    # int32 scans when the total fits (host: the size given or read); the starts are the
    # lengths summed at the segment ends (an index_add and a cumsum, no repeat_interleave)
    scan = _u.scan_dtype(total)
    ends = torch.cumsum(t_in, 0, dtype=scan)
    if validation_enabled() and size is not None:
        what = f"argument 'shape' (size {size}) must match the sum of the lengths"
        checks.add(ends[-1], size, size, what)
        # sums of non-negative terms wrap to a negative one first: the last sum alone is no proof
        checks.add(ends.amin(), 0, None, _u.sum_fits("t_in", scan))
        checks.assert_on_device()
    if scan == torch.int32:
        zeros = filled_i32(total + 1, 0, t_in.device)
    else:
        zeros = torch.zeros(total + 1, dtype=scan, device=t_in.device)
    at = ends[:-1].clamp(0, total) if validation_enabled() else ends[:-1]  # bad data: harmless
    marks = torch.index_add(zeros, 0, at, t_in[:-1].to(scan))
    starts = torch.cumsum(marks[:total], 0, dtype=scan)
    positions = arange_cached(total, t_in.device, t_in.dtype if scan == torch.int32 else scan)
    result = torch.sub(positions, starts, out=out)
    return result if out is not None else result.to(t_in.dtype)


def _lengths_total(checks: DataChecks, t_in: torch.Tensor, size: int | None) -> int:
    """The output size: ``size`` (``shape``'s), or the lengths' sum read back to the host (an
    int64 ``sum``, exact: it decides the scans' dtype).  The lengths must be non-negative and,
    read, no larger than the total (else their int64 sum wrapped); given, no larger than
    ``size`` (the int32 scans narrow int64 lengths).  Checks: ``aminmax``, riding on the read
    (or queued in ``checks`` with the scan's, given)."""
    validate = validation_enabled()
    if validate:
        low, high = torch.aminmax(t_in)
        checks.add(low, 0, None, "argument 't_in' must hold non-negative lengths")
        if size is not None:
            what = f"argument 't_in' must hold lengths within the size of 'shape' ({size})"
            checks.add(high, None, size, what)
    if size is not None:
        return size  # checked with the scan's conditions
    got = checks.read_with([t_in.sum(), high] if validate else [t_in.sum()])
    if validate and got[1] > got[0]:
        raise ValueError(f"{checks.op}: {_u.sum_fits('t_in', torch.int64)}")
    return got[0]


def lengths_range_npu(t_in: torch.Tensor, shape: Sequence[int] | None = None) -> torch.Tensor:
    """``cat([arange(l) for l in t_in])`` (1-D, ``t_in``'s dtype int32/int64).

    Launches: ``cumsum`` of the lengths (int32 when the total is below 2**31), their cast, an
    ``index_add`` of them at the segment ends (after a ``clamp``) and its ``cumsum`` (the
    segments' starts), ``sub`` from a cached ``arange``: 6 (int32 ``t_in``: 5, no cast);
    ``shape`` None first reads the size (an int64 ``sum``) back to the host.  Launches and
    syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = LENGTHS_RANGE
    t_in = _u.check_index_tensor(op, "t_in", t_in)
    return _lengths_range(op, t_in, shape, None)


def lengths_range_out_npu(
    output: torch.Tensor, t_in: torch.Tensor, shape: Sequence[int] | None = None
) -> torch.Tensor:
    """:func:`lengths_range_npu` written into ``output`` (resized; ``t_in``'s dtype); returns it.

    Launches and syncs as :func:`lengths_range_npu`.
    """
    op = LENGTHS_RANGE_OUT
    t_in, output = _check_out_args(op, output, t_in)
    return _lengths_range(op, t_in, shape, output)


def _check_out_args(op: str, output: object, t_in: object) -> tuple[torch.Tensor, torch.Tensor]:
    t_in = _u.check_index_tensor(op, "t_in", t_in)
    output = check_tensor(op, "output", output)
    check_same_device(op, output=output, t_in=t_in)
    if output.dtype != t_in.dtype:
        raise ValueError(
            f"{op}: argument 'output' must have t_in's dtype "
            f"({dtype_name(t_in.dtype)}), got {dtype_name(output.dtype)}"
        )
    return t_in, output


def lengths_range_out_fake(
    output: torch.Tensor, t_in: torch.Tensor, shape: Sequence[int] | None = None
) -> torch.Tensor:
    """Fake / Meta kernel of ``lengths_range_out`` (upstream has none; its ``lengths_range``
    fake is the model): ``output`` resized to ``prod(shape)`` or, without ``shape``, to a
    data-dependent size (``new_dynamic_size``; 0 for empty lengths), and returned."""
    op = LENGTHS_RANGE_OUT
    t_in, output = _check_out_args(op, output, t_in)
    if shape is not None:
        size = math.prod(shape)
    elif t_in.numel() == 0:
        size = 0
    else:
        size = _u.dynamic_size(op, "'shape' omitted")
    # the kernel returns ``output`` itself, resized: so does the fake (set_ onto a fresh buffer:
    # resize_ would compare the old size with an unbacked one, a data-dependent guard)
    return output.set_(output.new_empty((size,)))


def segment_sum_csr_npu(
    batch_size: int, csr_seg: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    """``out[s] = sum(flat[csr_seg[s] * batch_size : csr_seg[s + 1] * batch_size])``.

    ``csr_seg`` int32/int64 (read flat, ``S + 1`` boundaries, non-decreasing), ``values`` read flat;
    output ``(S,)`` of ``values``' dtype.  Segments are whole rows of ``batch_size`` elements:
    every row is sent to its segment (``count_le`` of the boundaries: no ``searchsorted``, which a
    910B runs on its AI CPU), the rows are summed, and the sums added with one ``index_add_``
    into ``S + 2`` zeros (the first and last buckets collect the rows before and after the
    segments).  Integers wrap as upstream's do; float16 / bfloat16 accumulate in
    float32 (the rows' ``sum`` casts).  Launches: ``count_le`` (2; 3 validating), the rows'
    ``sum`` (none for ``batch_size`` 1 unless a cast), ``zeros``, ``index_add_``, then the inner
    buckets copied out: a ``clone``, or for half types the cast back: 6.  int64 values add with
    an int64 ``index_add_``, which a 910B runs on its AI CPU (no AI-Core kernel).  Launches and
    syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
    """
    op = SEGMENT_SUM_CSR
    csr = _u.check_index_tensor(op, "csr_seg", csr_seg, ndims=tuple(range(0, 9)))
    values = check_dtype(op, "values", check_tensor(op, "values", values), SEGMENT_VALUE_DTYPES)
    check_same_device(op, csr_seg=csr, values=values)
    bounds_in = csr.reshape(-1)
    flat = values.reshape(-1)
    n_seg = bounds_in.numel() - 1
    if n_seg < 0:
        raise ValueError(f"{op}: argument 'csr_seg' must hold at least one boundary")
    acc = torch.float32 if values.dtype in _HALF else values.dtype
    if batch_size <= 0 or n_seg == 0:  # every segment is empty
        return values.new_zeros((n_seg,))
    if validation_enabled():
        checks = DataChecks(op)
        checks.add(bounds_in[0], 0, None, "argument 'csr_seg' must be non-negative")
        if n_seg > 0:  # compared, not subtracted (int32 steps across 2**31 wrap)
            checks.require(non_decreasing(bounds_in), "argument 'csr_seg' must be non-decreasing")
        what = (
            "the last segment of "
            f"argument 'csr_seg' must end within values ({flat.numel()} elements, "
            f"batch_size {batch_size})"
        )
        checks.add(bounds_in[-1], None, flat.numel() // batch_size, what)
        checks.assert_on_device()
    # segments are whole rows of batch_size elements: the bucket of every row (0: before
    # csr_seg[0], S + 1: from csr_seg[S] on), the rows' sums, one index_add of them
    rows = flat.numel() // batch_size
    bucket = _u.count_le(bounds_in, rows, clamp=validation_enabled())
    part = flat[: rows * batch_size]
    sums_of_rows = part.view(rows, batch_size).sum(1, dtype=acc) if batch_size > 1 else part.to(acc)
    sums = torch.zeros(n_seg + 2, dtype=acc, device=flat.device).index_add_(0, bucket, sums_of_rows)
    # a fresh tensor, not the slice (storage offset 1, a view of the S + 2 buckets): the cast of
    # half types makes one, a clone otherwise
    inner = sums[1 : n_seg + 1]
    return inner.to(values.dtype) if acc != values.dtype else inner.clone()


KERNELS = {
    OFFSETS_RANGE: {"PrivateUse1": offsets_range_npu},
    LENGTHS_RANGE: {"PrivateUse1": lengths_range_npu},
    LENGTHS_RANGE_OUT: {"PrivateUse1": lengths_range_out_npu, "Meta": lengths_range_out_fake},
    SEGMENT_SUM_CSR: {"PrivateUse1": segment_sum_csr_npu},
}
