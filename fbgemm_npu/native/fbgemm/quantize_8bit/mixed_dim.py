"""``fbgemm::Fused8BitRowwiseQuantizedToFloatMixedDim`` on npu: fused 8-bit rows of tables of
different widths, side by side, to float rows.

Upstream has the schema and a CUDA kernel only (``quantize_fused_8bit_rowwise.cu``:
``_fused8bitrowwise_to_float_mixed_dim_gpu``; no CPU kernel, no Meta).  Its math: ``input`` is
uint8 ``[B, C]``, ``D_offsets`` int32 ``[T + 1]`` the column where each table's block starts
(each block ``D_t`` data bytes then its float32 scale and bias, ``D_offsets[t + 1] -
D_offsets[t] = D_t + 8``); the output is ``[B, C - 8 T]`` float32 (``output_dtype`` 0) or
float16 (1; others refused), zeros but where ``out[b, D_offsets[t] - 8 t + i] = fma(input[b,
D_offsets[t] + i], scale_tb, bias_tb)`` (float32, rounded to float16 for that output).
``T = 0``: zeros ``[B, C]``.

On npu each output column ``j`` finds its table ``t(j)`` by segment ids (an int32 ``index_add``
of marks at the tables' output starts ``O_t = D_offsets[t] - 8 t``, then ``cumsum``: no
``searchsorted``), reads its byte at ``j + 8 t(j)`` and its table's scale and bias (the ``[B, T,
8]`` bytes gathered once, viewed as float32: no shifts), and runs the fused multiply-add in
float64 as ``Fused8BitRowwiseQuantizedToFloat`` does (``dequantize.py``: upstream's one
rounding, but for float64's rare halfway case).  Columns outside ``[O_0, O_T)`` are 0.  Data
checks, queued: ``D_offsets`` in ``[0, C]`` with steps of at least 8 (upstream reads out of
bounds otherwise); every index is clamped, so bad offsets never reach past the buffers.
Launches: budgets.py.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    allocation_of,
    check_same_device,
    check_tensor,
    dtype_name,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached, segment_ids
from fbgemm_npu.native.fbgemm.quantize_8bit._common import check_rows, require

__all__ = ["KERNELS", "fused8bit_to_float_mixed_dim_npu"]

MIXED_DIM = "fbgemm::Fused8BitRowwiseQuantizedToFloatMixedDim"
QPARAMS = 8  # float32 scale and bias per table and row
OUTPUT_DTYPES = {0: torch.float32, 1: torch.float16}  # upstream's CUDA kernel: FP32, FP16


def _checked(
    input: object, D_offsets: object, output_dtype: int
) -> tuple[torch.Tensor, torch.Tensor, int, torch.dtype]:
    op = MIXED_DIM
    x = check_rows(op, "input", input, (torch.uint8,))
    require(x.dim() == 2, op, f"argument 'input' must be 2-D, got a {x.dim()}-D tensor")
    d = check_tensor(op, "D_offsets", D_offsets).detach()
    require(
        d.dtype == torch.int32,
        op,
        f"argument 'D_offsets' must have dtype int32, got {dtype_name(d.dtype)}",
    )
    require(
        d.dim() == 1 and d.numel() >= 1,
        op,
        "argument 'D_offsets' must be 1-D with at least 1 element (T + 1 table offsets), got "
        f"shape {tuple(d.shape)}",
    )
    check_same_device(op, input=x, D_offsets=d)
    require(
        output_dtype in OUTPUT_DTYPES,
        op,
        f"argument 'output_dtype' must be 0 (FP32) or 1 (FP16), got {output_dtype}",
    )
    tables = d.numel() - 1
    width = x.shape[1] - QPARAMS * tables
    require(
        width >= 0,
        op,
        f"argument 'input' has {x.shape[1]} columns, fewer than the {QPARAMS * tables} of "
        f"{tables} tables' scales and biases",
    )
    return x, d, width, OUTPUT_DTYPES[output_dtype]


def fused8bit_to_float_mixed_dim_npu(
    input: torch.Tensor, D_offsets: torch.Tensor, output_dtype: int
) -> torch.Tensor:
    """Fused 8-bit rows of ``T`` tables of mixed widths to float32 / float16 ``[B, C - 8 T]``.

    Math (module docstring): ``O = D_offsets - 8 arange(T + 1)``; ``t(j) = cumsum(marks at
    O_1 .. O_{T-1})[j]``; ``out[:, j] = addcmul(bias_t, q[:, j + 8 t], scale_t)`` in float64
    where ``O_0 <= j < O_T``, else 0.  Launches: budgets.py (checks: ``aminmax`` and the
    steps' ``add``, ``ge``, ``all``, queued).
    """
    x, d, width, dtype = _checked(input, D_offsets, output_dtype)
    # a stride-0 input of 2**40 rows passes every check: its output cannot be allocated
    with allocation_of(MIXED_DIM, f"the output [{x.shape[0]}, {width}] of 'input'"):
        return _mixed_dim(x, d, width, dtype)


def _mixed_dim(x: torch.Tensor, d: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """The program of :func:`fused8bit_to_float_mixed_dim_npu` on checked arguments."""
    tables = d.numel() - 1
    rows, cols = x.shape
    if rows == 0 or width == 0:
        return torch.empty(rows, width, dtype=dtype, device=x.device)
    if tables == 0:  # upstream's kernel returns at once: its zeros
        return torch.zeros(rows, width, dtype=dtype, device=x.device)
    if validation_enabled():
        checks = DataChecks(MIXED_DIM)
        lo, hi = torch.aminmax(d)
        checks.add(lo, 0, None, "argument 'D_offsets' must be non-negative")
        checks.add(hi, None, cols, f"argument 'D_offsets' must be at most input.size(1) = {cols}")
        checks.require(
            torch.ge(d[1:], d[:-1] + QPARAMS).all(),
            "argument 'D_offsets' must grow by at least 8 (a table's scale and bias) per table",
        )
        checks.assert_on_device()
    dev = x.device
    steps = arange_cached(tables + 1, dev, torch.int32)
    starts = torch.sub(d, steps, alpha=QPARAMS)  # O_t: where table t's output columns start
    table = segment_ids(starts, width)  # t(j) = #{t >= 1 : O_t <= j}, int32 (no searchsorted)
    j = arange_cached(width, dev, torch.int32)
    valid = torch.ge(j, starts[0]).logical_and_(torch.lt(j, starts[tables]))
    column = torch.add(j, table, alpha=QPARAMS).clamp_(0, cols - 1)
    # every table's scale and bias bytes, gathered once: [B, T, 8] -> float32 [B, T, 2]
    qp_cols = torch.add(d[1:, None], arange_cached(QPARAMS, dev, torch.int32)).sub_(QPARAMS)
    qp = x.index_select(1, qp_cols.view(-1).clamp_(0, cols - 1))
    sb = qp.view(rows, tables, QPARAMS).view(torch.float32).to(torch.float64)
    sb = sb.index_select(1, table.clamp_(0, tables - 1))  # [B, width, 2]
    # the FMA in float64: q * scale exact, the add the one rounding (dequantize.py)
    y = torch.addcmul(sb[..., 1], x.index_select(1, column).to(torch.float64), sb[..., 0])
    y = torch.where(valid, y.to(torch.float32), 0.0)
    return y.to(dtype)


def fused8bit_to_float_mixed_dim_meta(
    input: torch.Tensor, D_offsets: torch.Tensor, output_dtype: int
) -> torch.Tensor:
    """Meta kernel (upstream has none): ``[B, C - 8 T]`` of the output dtype."""
    x, _, width, dtype = _checked(input, D_offsets, output_dtype)
    return x.new_empty((x.shape[0], width), dtype=dtype)


KERNELS = {
    MIXED_DIM: {
        "PrivateUse1": fused8bit_to_float_mixed_dim_npu,
        "Meta": fused8bit_to_float_mixed_dim_meta,
    }
}
