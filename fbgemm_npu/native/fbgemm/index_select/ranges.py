"""Ranges and segment sums: ``fbgemm::offsets_range``, ``lengths_range`` (+ ``lengths_range_out``)
and ``segment_sum_csr`` on npu.

* ``offsets_range(offsets, range_size)``: ``out[j] = j - offsets[s]`` for ``offsets[s] <= j <
  offsets[s + 1]`` (the last segment runs to ``range_size``), i.e. the position of every element
  inside its segment.
* ``lengths_range(t_in, shape)``: the same from lengths: ``cat([arange(l) for l in t_in])``; with
  ``shape`` the output size is ``prod(shape)`` (no sync) and the output is still 1-D.
* ``segment_sum_csr(batch_size, csr_seg, values)``: ``out[s] = sum(values[csr_seg[s] *
  batch_size : csr_seg[s + 1] * batch_size])``.

The ranges repeat each segment's start over the segment (``repeat_interleave`` with
``output_size``: no sync, linear work) and subtract it from the positions; the sum sends every
element to its segment with one ``searchsorted`` and adds with one ``index_add_``.  Semantics
measured on upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0):

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

``segment_sum_csr`` of float16 / bfloat16 adds the float32 accumulator's two casts (over the
catalogue's target).  ``lengths_range`` without ``shape`` reads the output size (the data's sum)
back to the host.  Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as nnf

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
    ``(range_size,)`` of ``offsets``' dtype.  Launches: the ends' pad, the lengths' ``sub``,
    ``repeat_interleave`` of the starts, ``arange``, ``sub``.  Launches and syncs: ``BUDGETS`` in
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
    # segment lengths (the last runs to range_size), then each segment's start repeated over
    # it: repeat_interleave with output_size (no sync; linear work, unlike a searchsorted)
    ends = nnf.pad(offsets[1:], (0, 1), value=range_size)
    with allocation_of(op, f"the output of 'range_size' = {range_size} elements"):
        starts = torch.repeat_interleave(offsets, ends - offsets, output_size=range_size)
        positions = torch.arange(range_size, dtype=offsets.dtype, device=offsets.device)
        return positions - starts


def _lengths_range(
    op: str, t_in: torch.Tensor, shape: Sequence[int] | None, out: torch.Tensor | None
) -> torch.Tensor:
    n = t_in.numel()
    size = None if shape is None else math.prod(shape)
    if size is not None and size < 0:
        raise ValueError(f"{op}: argument 'shape' must describe a non-negative size, got {shape}")
    device = t_in.device
    checks = DataChecks(op)
    validate = validation_enabled()
    if n == 0:
        if size not in (None, 0):
            raise ValueError(
                f"{op}: argument 'shape' ({list(shape or [])}) must have size 0 for empty lengths"
            )
        total = 0
        complete = None
    else:
        # complete offsets [0, cumsum(t_in)]: the starts and, last, the total
        complete = nnf.pad(torch.cumsum(t_in, 0, dtype=t_in.dtype), (1, 0))
        if validate:
            checks.add(t_in.amin(), 0, None, "argument 't_in' must hold non-negative lengths")
            checks.add(complete.amin(), 0, None, _u.sum_fits("t_in", t_in.dtype))
        if size is None:
            total = checks.read_with([complete[-1]])[0]
        else:
            total = size
            if validate:
                what = f"argument 'shape' (size {size}) must match the sum of the lengths"
                checks.add(complete[-1], size, size, what)
                checks.assert_on_device()
    if out is not None:
        out.resize_((total,))
    positions = torch.arange(total, dtype=t_in.dtype, device=device)
    if complete is None or total == 0:
        return positions if out is None else out.copy_(positions)
    # each segment's start repeated over it (total == sum(t_in): checked above)
    starts = torch.repeat_interleave(complete[:-1], t_in, output_size=total)
    return torch.sub(positions, starts, out=out)


def lengths_range_npu(t_in: torch.Tensor, shape: Sequence[int] | None = None) -> torch.Tensor:
    """``cat([arange(l) for l in t_in])`` (1-D, ``t_in``'s dtype int32/int64).

    Launches: ``cumsum``, the leading-zero pad, ``repeat_interleave`` of the starts, ``arange``,
    ``sub``; ``shape`` None reads the size back to the host.  Launches and syncs: ``BUDGETS`` in
    ``budgets.py`` (docs/ops.md).
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
    output ``(S,)`` of ``values``' dtype.  Every element is sent to its segment (a ``searchsorted``
    of its position against the scaled boundaries) and summed with one ``index_add_`` into ``S + 2``
    buckets (the first and last collect the elements before and after the segments).  Integers wrap
    as upstream's do; float16 / bfloat16 accumulate in float32.  Launches: ``mul``, ``arange``,
    ``searchsorted``, ``zeros``, ``index_add_``, then the inner buckets copied out: a ``clone``,
    or for half types the cast back (with the cast of the values into the float32 accumulator).
    Launches and syncs: ``BUDGETS`` in ``budgets.py`` (docs/ops.md).
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
    bounds = bounds_in * batch_size
    positions = torch.arange(flat.numel(), dtype=bounds.dtype, device=flat.device)
    bucket = torch.searchsorted(bounds, positions, right=True)  # 0: before, S + 1: after
    src = flat.to(acc) if acc != flat.dtype else flat
    sums = torch.zeros(n_seg + 2, dtype=acc, device=flat.device).index_add_(0, bucket, src)
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
