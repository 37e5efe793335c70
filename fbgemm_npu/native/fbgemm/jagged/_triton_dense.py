"""Fused Triton kernels of the jagged <-> padded dense ops, one jagged dim.

With ``offsets`` (``B + 1`` entries, int32 or int64), row ``b`` of the jagged tensor is the
value rows ``[begin_b, end_b)``, ``begin_b = offsets[b]``, ``end_b = offsets[b + 1]``, of which
the dense form keeps ``n_b = clamp(end_b - begin_b, 0, L)`` (longer rows are truncated at the
dense length ``L``; a decreasing pair is an empty row, as upstream's ``j >= end - begin``)::

    to_dense:  out[b, j, :] = values[begin_b + j, :]   if j < n_b   else padding_value
    to_jagged: out[begin_b + j, :] = dense[b, j, :]    for j < n_b  (other rows: 0)

Dtypes: values / dense float32, float16, bfloat16, int32, int64 (copied bit-exactly; the
padding is ``padding_scalar``'s, already in the values' dtype); 1-D values are ``D = 1``.
Strided inputs (offsets too) are read through their strides (no copy); the outputs are contiguous.

Grid: ``(min(B, 65535), cdiv(L, BLOCK_L))``: one program per batch row (looping over rows
``b, b + 65535, ...`` past 65535: Ascend grids stop there) and block of ``BLOCK_L`` dense
positions, ``D`` in tiles of ``BLOCK_D`` (a live tile of at most 4096 elements, 16 KB in
float32, inside a 910B core's 192 KB buffer).  Index math is int32 but the row starts and the
pointer offsets, which reach past 2**31 on big tensors: int64.

Launches: to_dense one kernel, which writes every output element (padding included);
to_jagged a ``zeros`` of the output (rows no position writes: truncated tails, rows outside
every offsets pair) and one scatter kernel, exact whatever the offsets' order (rows two
positions share get one of their values, as the tensor program).  Data checks (``check=True``):
each program writes a flag (an offset outside ``[0, 2**31)``, or a position reading / writing
a row outside the tensor) into its own slot of a ``torch.empty`` buffer, which one ``any`` and
its ``logical_not`` turn into the family's deferred check: 2 launches, where the tensor
program's cost 5-6.  Every load and store is masked to the tensor it touches, whatever the
data, so a call whose check fails is memory-safe until the check is read.

Not handled here (the tensor program serves them; ``supported`` in the callers): more than one
jagged dim, and ``L`` over ``65535 * BLOCK_L`` positions.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fbgemm_npu.native._triton import launch
from fbgemm_npu.native.fbgemm.jagged._utils import assert_no_bad

__all__ = ["MAX_GRID", "to_dense_triton", "to_jagged_triton"]

MAX_GRID = 65535  # the largest grid dim on Ascend (and CUDA's y / z)
_TILE = 4096  # elements of one program's live tile: BLOCK_L * BLOCK_D
_MAX_BLOCK_D = 128
_INT32_END = 2**31


@triton.jit
def _row_bounds(offsets, stride_o, b, L, bad, WIDE: tl.constexpr):
    """``(begin_b as int64, n_b as int32, bad)``, ``bad`` or-ed with the offsets' range check."""
    begin = tl.load(offsets + b * stride_o).to(tl.int64)
    end = tl.load(offsets + (b + 1) * stride_o).to(tl.int64)
    bad = bad | (begin < 0) | (end < 0)
    if WIDE:  # int64 offsets: upstream reads them as int32
        bad = bad | (begin >= 2147483648) | (end >= 2147483648)
    n = tl.minimum(tl.maximum(end - begin, 0), L).to(tl.int32)
    return begin, n, bad


@triton.jit
def _to_dense_kernel(
    values,
    offsets,
    stride_o,
    out,
    flags,
    B,
    N,
    L,
    D,
    stride_n,
    stride_d,
    pad_value,
    BLOCK_L: tl.constexpr,
    BLOCK_D: tl.constexpr,
    WIDE: tl.constexpr,
    CHECK: tl.constexpr,
):
    pid_b = tl.program_id(0)
    pid_l = tl.program_id(1)
    j = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    in_l = j < L
    bad = pid_b < 0  # a scalar False
    for b in range(pid_b, B, tl.num_programs(0)):
        begin, n, bad = _row_bounds(offsets, stride_o, b, L, bad, WIDE)
        rows = begin + j  # int64
        real = in_l & (j < n)
        inside = (rows >= 0) & (rows < N)
        if CHECK:
            bad = bad | (tl.sum((real & ~inside).to(tl.int32), axis=0) > 0)
        read = real & inside
        src = rows * stride_n
        dst = (tl.cast(b, tl.int64) * L + j) * D
        for d0 in range(0, D, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            in_d = d < D
            x = tl.load(
                values + src[:, None] + d[None, :].to(tl.int64) * stride_d,
                mask=read[:, None] & in_d[None, :],
                other=0,
            )
            pad = tl.full((BLOCK_L, BLOCK_D), pad_value, out.dtype.element_ty)
            y = tl.where(real[:, None], x.to(out.dtype.element_ty), pad)
            tl.store(out + dst[:, None] + d[None, :], y, mask=in_l[:, None] & in_d[None, :])
    if CHECK:
        tl.store(flags + pid_b * tl.num_programs(1) + pid_l, bad.to(tl.int32))


@triton.jit
def _to_jagged_kernel(
    dense,
    offsets,
    stride_o,
    out,
    flags,
    B,
    total,
    L,
    D,
    stride_b,
    stride_l,
    stride_d,
    BLOCK_L: tl.constexpr,
    BLOCK_D: tl.constexpr,
    WIDE: tl.constexpr,
    CHECK: tl.constexpr,
):
    pid_b = tl.program_id(0)
    pid_l = tl.program_id(1)
    j = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    in_l = j < L
    bad = pid_b < 0
    for b in range(pid_b, B, tl.num_programs(0)):
        begin, n, bad = _row_bounds(offsets, stride_o, b, L, bad, WIDE)
        rows = begin + j
        real = in_l & (j < n)
        inside = (rows >= 0) & (rows < total)
        if CHECK:
            bad = bad | (tl.sum((real & ~inside).to(tl.int32), axis=0) > 0)
        write = real & inside
        src = tl.cast(b, tl.int64) * stride_b + j.to(tl.int64) * stride_l
        dst = rows * D
        for d0 in range(0, D, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            in_d = d < D
            m = write[:, None] & in_d[None, :]
            x = tl.load(dense + src[:, None] + d[None, :].to(tl.int64) * stride_d, mask=m, other=0)
            tl.store(out + dst[:, None] + d[None, :], x, mask=m)
    if CHECK:
        tl.store(flags + pid_b * tl.num_programs(1) + pid_l, bad.to(tl.int32))


def _blocks(length: int, d: int) -> tuple[int, int]:
    """``(BLOCK_L, BLOCK_D)``: powers of two, ``BLOCK_D`` up to 128, the tile <= 4096."""
    block_d = min(triton.next_power_of_2(max(d, 1)), _MAX_BLOCK_D)
    block_l = min(triton.next_power_of_2(max(length, 1)), _TILE // block_d)
    return block_l, block_d


def _grid(b: int, length: int, block_l: int) -> tuple[int, int]:
    # Ascend limits the grid's product (its coreDim) to MAX_GRID, not each dim: the programs
    # along the batch loop over the rows past it.
    blocks = triton.cdiv(length, block_l)
    return min(b, max(1, MAX_GRID // blocks)), blocks


def _flags(grid: tuple[int, int], device: torch.device, check: bool) -> torch.Tensor:
    # every program writes its slot: torch.empty (no launch) is enough
    return torch.empty(grid[0] * grid[1] if check else 1, dtype=torch.int32, device=device)


def to_dense_triton(
    op: str,
    values: torch.Tensor,
    offsets: torch.Tensor,
    length: int,
    out_shape: tuple[int, ...],
    pad_value: int | float,
    check: bool,
    what: str,
) -> torch.Tensor:
    """``out_shape`` (``[B, L]`` or ``[B, L, D]``, not empty) filled from ``values`` (``[N]`` or
    ``[N, 1.., D]``, not empty): 1 launch, and 2 of the data check when ``check``
    (``what`` names its failure)."""
    b = offsets.numel() - 1
    n = values.size(0)
    d = 1 if values.dim() == 1 else values.size(-1)
    stride_d = 0 if values.dim() == 1 else values.stride(-1)
    out = torch.empty(out_shape, dtype=values.dtype, device=values.device)
    block_l, block_d = _blocks(length, d)
    grid = _grid(b, length, block_l)
    flags = _flags(grid, values.device, check)
    launch(
        "jagged_to_dense",
        _to_dense_kernel,
        grid,
        values,
        offsets,
        offsets.stride(0),
        out,
        flags,
        b,
        n,
        length,
        d,
        values.stride(0),
        stride_d,
        pad_value,
        BLOCK_L=block_l,
        BLOCK_D=block_d,
        WIDE=offsets.dtype == torch.int64,
        CHECK=check,
    )
    if check:
        assert_no_bad(op, [flags], what)
    return out


def to_jagged_triton(
    op: str,
    dense: torch.Tensor,
    offsets: torch.Tensor,
    total: int,
    check: bool,
    what: str,
) -> torch.Tensor:
    """``[total, D]`` from ``dense`` (``[B, L, D]``, not empty): a ``zeros`` and 1 launch, and 2
    of the data check when ``check`` (``what`` names its failure)."""
    b, length, d = dense.shape
    out = torch.zeros((total, d), dtype=dense.dtype, device=dense.device)
    block_l, block_d = _blocks(length, d)
    grid = _grid(b, length, block_l)
    flags = _flags(grid, dense.device, check)
    launch(
        "dense_to_jagged",
        _to_jagged_kernel,
        grid,
        dense,
        offsets,
        offsets.stride(0),
        out,
        flags,
        b,
        total,
        length,
        d,
        *dense.stride(),
        BLOCK_L=block_l,
        BLOCK_D=block_d,
        WIDE=offsets.dtype == torch.int64,
        CHECK=check,
    )
    if check:
        assert_no_bad(op, [flags], what)
    return out
