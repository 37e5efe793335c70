"""Float / half rows to upstream's fused N-bit rows with a half scale and bias ("SBHalf"):
``fbgemm::FloatToFusedNBitRowwiseQuantizedSBHalf``, ``HalfToFusedNBitRowwiseQuantizedSBHalf``,
``FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf`` and its ``WithRowwiseMinMax`` form.

Math, per row ``x`` of ``C`` values (fbgemm's ``FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf``,
bit for bit; float32 arithmetic, ``M = 2 ** bit_rate - 1``)::

    bias  = half(min(x))                  # the minimum rounded to half first
    mn    = float(bias)
    scale = float(half((max(x) - mn) / M));  scale = 1 where scale == 0
    q     = clamp(round_half_even((x - mn) * (1 / scale)), 0, M)
    row   = pack(q) ++ bytes(half(scale)) ++ bytes(bias)

``WithRowwiseMinMax`` takes ``min(x)`` / ``max(x)`` from ``rowwise_min_max[:, 0]`` / ``[:, 1]``.
Upstream's ``range == 0 ? 1`` is the ``scale == 0`` rule (``0 / M`` is 0) and its ``isinf(1 /
scale)`` rule never fires (a nonzero half is at least ``2**-24``), so neither costs a launch.
A product that is NaN (an infinite input or range: ``inf * 0``) or ``2**31`` and more is code 0,
as upstream's AVX2 path converts it (``cvtps_epi32`` gives ``INT_MIN``, saturated to 0); only
``rowwise_min_max`` that does not bound its row reaches ``2**31`` (upstream's scalar path, used
for 8-bit and the last ``C % 32`` columns, wraps such a ``long`` to ``int`` instead).  A row with
no columns stores scale ``-inf`` and bias ``+inf`` (upstream's ``FLT_MAX`` start values), and
the maximum is at least ``-FLT_MAX`` (so a row of ``-inf`` has scale ``inf``, as upstream's 2 / 4 /
8-bit kernels give; its reference kernel for the other rates stores NaN there, as the half
``0x7FFF`` it also stores for a row of ``+inf``, where ours has torch's cast of the NaN,
``0xFE00``, as the 2 / 4 / 8-bit kernels: both NaN, the dequantized values NaN either way; and
that kernel leaves a column-free row's scale and bias unwritten).  NaN inputs and
a minimum that is both ``+0`` and ``-0`` follow torch's ``aminmax``, not upstream's lane order.

Dtypes: ``Float...`` float32, ``Half...`` float16, ``FloatOrHalf...`` both (upstream's ``Float``
/ ``Half`` kernels read any other dtype's memory as theirs; ours refuse it by name).  ``input``
2-D with ``C`` a multiple of ``2 * (8 // bit_rate)`` (upstream's alignment check), ``bit_rate``
in 1..8.  Output ``[R, C // (8 // bit_rate) + 4]`` uint8.

Launches (``budgets.py``): ``aminmax``, ``clamp_min``; the bias cast, its float cast, ``sub``,
``div``, the scale's half cast, ``eq`` + ``masked_fill_``, its float cast, ``reciprocal``;
``sub``, ``mul``, ``lt`` + ``where`` (NaN and ``2**31``), ``round_``, ``clamp_``, the int32
cast; the pack (``mul``, ``sum``, uint8 cast; none for ``bit_rate >= 5``); ``stack`` of scale
and bias, ``cat``.  Half input: its float32 cast.  No sync, no AI-CPU op.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import allocation_of, check_tensor
from fbgemm_npu.native.fbgemm.quantize_nbit._common import (
    SCALE_BIAS_BYTES,
    check_bit_rate,
    check_input,
)
from fbgemm_npu.native.fbgemm.quantize_nbit._pack import codes_per_byte, pack_codes

__all__ = [
    "KERNELS",
    "float_or_half_to_fused_nbit_npu",
    "float_or_half_to_fused_nbit_with_rowwise_min_max_fake",
    "float_or_half_to_fused_nbit_with_rowwise_min_max_npu",
    "float_to_fused_nbit_npu",
    "half_to_fused_nbit_npu",
    "quantize_rows",
]

FLOAT = "fbgemm::FloatToFusedNBitRowwiseQuantizedSBHalf"
HALF = "fbgemm::HalfToFusedNBitRowwiseQuantizedSBHalf"
FLOAT_OR_HALF = "fbgemm::FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf"
MIN_MAX = "fbgemm::FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax"
INT_LIMIT = 2.0**31  # products from here on are code 0 (upstream's cvtps_epi32 saturation)
FLT_MAX = torch.finfo(torch.float32).max


def _output_columns(op: str, cols: int, bit_rate: int) -> int:
    per = codes_per_byte(bit_rate)
    if cols % (2 * per) != 0:
        raise RuntimeError(
            f"{op}: argument 'input' must have a multiple of {2 * per} columns at bit_rate "
            f"{bit_rate} (upstream: ncols needs to be multiple of 2 Bytes (half type size) to "
            f"make the address aligned), got {cols}"
        )
    return cols // per + SCALE_BIAS_BYTES


def quantize_rows(
    x: torch.Tensor, bit_rate: int, min_max: torch.Tensor | None = None
) -> torch.Tensor:
    """The fused rows of 2-D float32 / float16 ``x`` (module docstring); ``min_max`` ``[R, 2]``
    replaces each row's minimum and maximum.  Checked arguments only."""
    rows, cols = x.shape
    per = codes_per_byte(bit_rate)
    levels = 2**bit_rate - 1
    if rows == 0:
        return torch.empty(0, cols // per + SCALE_BIAS_BYTES, dtype=torch.uint8, device=x.device)
    values = x.to(torch.float32)
    if min_max is not None:
        bounds = min_max.to(torch.float32)
        lo, hi = bounds[:, 0], bounds[:, 1]
    elif cols == 0:  # upstream's start values, never replaced
        lo = torch.full((rows,), FLT_MAX, device=x.device)
        hi = torch.full((rows,), -FLT_MAX, device=x.device)
    else:
        lo, hi = torch.aminmax(values, dim=1)
        # upstream's AVX2 maximum starts at -FLT_MAX: a row of -inf has that maximum (range inf)
        hi = hi.clamp_min(-FLT_MAX)
    bias = lo.to(torch.float16)
    lo = bias.to(torch.float32)
    scale = torch.div(hi - lo, levels).to(torch.float16)
    scale.masked_fill_(scale == 0, 1.0)
    inverse = torch.reciprocal(scale.to(torch.float32))
    scaled = (values - lo.unsqueeze(1)).mul_(inverse.unsqueeze(1))
    # NaN (inf * 0) and products past int32 are code 0, as upstream's AVX2 conversion
    codes = torch.where(scaled < INT_LIMIT, scaled, 0.0).round_().clamp_(0, levels)
    packed = pack_codes(codes.to(torch.int32), bit_rate)
    scale_bias = torch.stack([scale, bias], dim=1).view(torch.uint8)
    return torch.cat([packed, scale_bias], dim=1)


def _quantize(
    op: str,
    input: torch.Tensor,
    bit_rate: int,
    allowed: tuple[torch.dtype, ...],
    error: type[Exception] = RuntimeError,
) -> torch.Tensor:
    x = check_input(op, input, allowed, error).detach()
    bit_rate = check_bit_rate(op, bit_rate)
    out_cols = _output_columns(op, x.size(1), bit_rate)
    with allocation_of(op, f"the output [{x.size(0)}, {out_cols}] of 'input'"):
        return quantize_rows(x, bit_rate)


def float_to_fused_nbit_npu(input: torch.Tensor, bit_rate: int) -> torch.Tensor:
    """``FloatToFusedNBitRowwiseQuantizedSBHalf``: float32 rows to fused N-bit rows (module
    docstring: math, launches)."""
    return _quantize(FLOAT, input, bit_rate, (torch.float32,))


def half_to_fused_nbit_npu(input: torch.Tensor, bit_rate: int) -> torch.Tensor:
    """``HalfToFusedNBitRowwiseQuantizedSBHalf``: float16 rows (module docstring)."""
    return _quantize(HALF, input, bit_rate, (torch.float16,))


def float_or_half_to_fused_nbit_npu(input: torch.Tensor, bit_rate: int) -> torch.Tensor:
    """``FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf``: float32 or float16 rows; another dtype
    raises ``NotImplementedError`` as upstream's dispatch macro does (module docstring)."""
    return _quantize(
        FLOAT_OR_HALF, input, bit_rate, (torch.float32, torch.float16), NotImplementedError
    )


def _check_min_max(op: str, x: torch.Tensor, rowwise_min_max: object) -> torch.Tensor:
    mm = check_tensor(op, "rowwise_min_max", rowwise_min_max)
    if mm.dim() != 2 or mm.size(0) != x.size(0) or mm.size(1) != 2:
        raise RuntimeError(
            f"{op}: argument 'rowwise_min_max' must be a 2D tensor with shape "
            f"[num_rows(input), 2] = [{x.size(0)}, 2], got {tuple(mm.shape)}"
        )
    if mm.dtype != x.dtype:
        raise RuntimeError(
            f"{op}: argument 'rowwise_min_max' must have the dtype of 'input' ({x.dtype}), "
            f"got {mm.dtype}"
        )
    if mm.device != x.device:
        raise RuntimeError(
            f"{op}: argument 'rowwise_min_max' must be on the device of 'input' ({x.device}), "
            f"got {mm.device}"
        )
    return mm.detach()


def _min_max_bit_rate(op: str, bit_rate: int) -> int:
    # upstream reads rowwise_min_max only in its 2 / 4 / 8-bit kernels; its reference kernel for
    # the other rates ignores it (measured): refused rather than silently ignored
    if check_bit_rate(op, bit_rate) not in (2, 4, 8):
        raise RuntimeError(
            f"{op}: argument 'bit_rate' must be 2, 4 or 8 with 'rowwise_min_max' (upstream "
            f"ignores the bounds at other rates), got {bit_rate}"
        )
    return bit_rate


def float_or_half_to_fused_nbit_with_rowwise_min_max_npu(
    input: torch.Tensor, bit_rate: int, rowwise_min_max: torch.Tensor
) -> torch.Tensor:
    """``...WithRowwiseMinMax``: as ``FloatOrHalf...`` with each row's minimum and maximum
    given (``[R, 2]``, the input's dtype), ``bit_rate`` 2, 4 or 8: no ``aminmax``, the bounds'
    float cast for half."""
    op = MIN_MAX
    x = check_input(op, input, (torch.float32, torch.float16), NotImplementedError).detach()
    mm = _check_min_max(op, x, rowwise_min_max)
    bit_rate = _min_max_bit_rate(op, bit_rate)
    out_cols = _output_columns(op, x.size(1), bit_rate)
    with allocation_of(op, f"the output [{x.size(0)}, {out_cols}] of 'input'"):
        return quantize_rows(x, bit_rate, mm)


def float_or_half_to_fused_nbit_with_rowwise_min_max_fake(
    input: torch.Tensor, bit_rate: int, rowwise_min_max: torch.Tensor
) -> torch.Tensor:
    """Meta kernel (upstream has none for this op): the output's shape and dtype."""
    op = MIN_MAX
    x = check_input(op, input, (torch.float32, torch.float16), NotImplementedError)
    _check_min_max(op, x, rowwise_min_max)
    out_cols = _output_columns(op, x.size(1), _min_max_bit_rate(op, bit_rate))
    return x.new_empty((x.size(0), out_cols), dtype=torch.uint8)


KERNELS = {
    FLOAT: {"PrivateUse1": float_to_fused_nbit_npu},
    HALF: {"PrivateUse1": half_to_fused_nbit_npu},
    FLOAT_OR_HALF: {"PrivateUse1": float_or_half_to_fused_nbit_npu},
    MIN_MAX: {
        "PrivateUse1": float_or_half_to_fused_nbit_with_rowwise_min_max_npu,
        "Meta": float_or_half_to_fused_nbit_with_rowwise_min_max_fake,
    },
}
