"""Float rows to fused 8-bit rows on npu: ``fbgemm::FloatToFused8BitRowwiseQuantized`` (+``Out``),
``HalfToFused8BitRowwiseQuantized``, ``FloatOrHalfToFused8BitRowwiseQuantized``.

Upstream's CPU kernel (fbgemm-gpu-cpu 1.8.0: ``quantize_ops_cpu.cpp`` calling fbgemm's
``FloatOrHalfToFused8BitRowwiseQuantizedSBFloat``, its AVX2 form on x86), per row ``x`` of the
last dim (every leading dim a row), all in float32: ``min``, ``max``, ``range = max - min``,
``scale = range / 255``, ``bias = min``, ``inv = 255 / (range + 1e-8)``, and the data bytes
``q = nearbyint((x - min) * inv)`` (round half to even; in ``[0, 255]``: ``x - min <= range``,
and a NaN product -- an infinite range times 0 -- becomes 0 as AVX2's conversion gives).  The
output row is ``n`` data bytes then the 8 bytes of float32 ``scale`` and ``bias`` (little end
first, upstream's ``reinterpret_cast``): ``[..., n + 8]`` uint8.  A float16 input is widened to
float32 first (exact).  An empty row (``n == 0``) holds upstream's start values: ``scale = -inf``
(``(-FLT_MAX - FLT_MAX) / 255``), ``bias = FLT_MAX``.

On npu: ``aminmax`` over the last dim, then the same float32 steps as ATen ops; the scale and
bias reach their bytes by ``view(torch.uint8)`` of a float32 tensor (no shifts, which a 910B
runs on its AI CPU), the data bytes by a float-to-uint8 copy of integral values.  Inputs:
float32 (``FloatTo...``), float16 (``HalfTo...``), either (``FloatOrHalfTo...``); upstream reads
any other dtype's memory as its own (``FloatTo...`` on float16 reads past the buffer), ours
refuses it naming the op and ``t``.  A non-contiguous input is quantized as its values say
(upstream reads its memory in storage order).  Upstream's min / max start at ``FLT_MAX`` /
``-FLT_MAX``, so a row all +inf stores ``bias = FLT_MAX`` (scale inf), and so does ours (the
min clamped to ``FLT_MAX``, the max to ``-FLT_MAX``).  NaN inputs are not matched
(upstream's vector ``min`` / ``max`` drop or keep a NaN by its lane).  Launches: budgets.py.
"""

from __future__ import annotations

import torch

from fbgemm_npu.native._checks import allocation_of
from fbgemm_npu.native.fbgemm.quantize_8bit._common import check_output, check_rows

__all__ = [
    "KERNELS",
    "float_or_half_to_fused8bit_npu",
    "float_to_fused8bit_npu",
    "float_to_fused8bit_out_npu",
    "half_to_fused8bit_npu",
    "quantize_rows_into",
]

FLOAT = "fbgemm::FloatToFused8BitRowwiseQuantized"
FLOAT_OUT = "fbgemm::FloatToFused8BitRowwiseQuantizedOut"
HALF = "fbgemm::HalfToFused8BitRowwiseQuantized"
FLOAT_OR_HALF = "fbgemm::FloatOrHalfToFused8BitRowwiseQuantized"
EPSILON = 1e-8  # upstream's kEpsilon: a zero range gives inv = 255 / 1e-8, q = 0
FLT_MAX = torch.finfo(torch.float32).max


def out_shape(x: torch.Tensor) -> list[int]:
    """``[..., n + 8]``: the data bytes and the float32 scale and bias of each row."""
    return [*x.shape[:-1], x.shape[-1] + 8]


def quantize_rows_into(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Write the fused 8-bit rows of float32 / float16 ``x`` into the uint8 ``out`` of shape
    :func:`out_shape` and return it.

    Math (module docstring): ``mn, mx = aminmax(x, -1)`` clamped to ``[-FLT_MAX, FLT_MAX]``
    (upstream's start values), ``r = mx - mn``, ``out[..., n:] =
    bytes([r / 255, mn])``, ``out[..., :n] = nan_to_num(round((x - mn) * (255 / (r +
    1e-8))))``.  Launches: the float32 cast (float16 only), ``aminmax``, 2 ``clamp_``, ``sub``,
    ``div``,
    ``cat``, the byte ``copy_``, ``add``, ``full`` (the 255 divided), ``div``, ``sub``,
    ``mul_``, ``round_``, ``nan_to_num_``, the uint8 ``copy_``: 15 (16 for float16); an empty
    row: 2 fills; no rows: none.
    """
    n = x.shape[-1]
    if out.numel() == 0:
        return out
    if n == 0:  # upstream's start values: min = FLT_MAX, max = -FLT_MAX
        sb = out.view(torch.float32)
        sb[..., 0].fill_(float("-inf"))
        sb[..., 1].fill_(FLT_MAX)
        return out
    x = x.float()  # a float16 row widened (exact); float32: no launch
    mn, mx = torch.aminmax(x, dim=-1, keepdim=True)
    # upstream's min / max start at FLT_MAX / -FLT_MAX: a row all +inf (-inf) keeps them
    mn.clamp_(max=FLT_MAX)
    mx.clamp_(min=-FLT_MAX)
    r = mx - mn
    # scale and bias as upstream stores them: float32 bytes, little end first
    out[..., n:].copy_(torch.cat([r / 255.0, mn], dim=-1).view(torch.uint8))
    # inv = 255 / (r + eps) divided, not 255 * reciprocal (a different rounding)
    d = r + EPSILON
    inv = torch.div(torch.full_like(d, 255.0), d)
    v = torch.sub(x, mn).mul_(inv).round_()
    # inf * 0 (an infinite range) is NaN: 0 as upstream's float-to-int conversion gives
    out[..., :n].copy_(v.nan_to_num_(nan=0.0))
    return out


def _quantize(op: str, t: object, dtypes: tuple[torch.dtype, ...]) -> torch.Tensor:
    x = check_rows(op, "t", t, dtypes)
    # a stride-0 input of 2**40 rows passes every check: its output cannot be allocated
    with allocation_of(op, f"the output {out_shape(x)} of 't'"):
        out = torch.empty(out_shape(x), dtype=torch.uint8, device=x.device)
        return quantize_rows_into(out, x)


def float_to_fused8bit_npu(t: torch.Tensor) -> torch.Tensor:
    """``FloatToFused8BitRowwiseQuantized``: float32 ``[..., n]`` to uint8 ``[..., n + 8]``
    (module docstring); 15 launches."""
    return _quantize(FLOAT, t, (torch.float32,))


def half_to_fused8bit_npu(t: torch.Tensor) -> torch.Tensor:
    """``HalfToFused8BitRowwiseQuantized``: float16 ``[..., n]`` to uint8 ``[..., n + 8]``
    (module docstring); 16 launches (the float32 cast first)."""
    return _quantize(HALF, t, (torch.float16,))


def float_or_half_to_fused8bit_npu(t: torch.Tensor) -> torch.Tensor:
    """``FloatOrHalfToFused8BitRowwiseQuantized``: float32 or float16 rows (upstream refuses
    bfloat16); 15 launches, 16 for float16."""
    return _quantize(FLOAT_OR_HALF, t, (torch.float32, torch.float16))


def float_to_fused8bit_out_npu(output: torch.Tensor, input: torch.Tensor) -> torch.Tensor:
    """``FloatToFused8BitRowwiseQuantizedOut``: the rows of float32 ``input`` written into the
    uint8 ``output``, resized to ``[..., n + 8]`` as upstream's ``resize_`` does, and returned.
    15 launches (the same steps, written in place)."""
    x = check_rows(FLOAT_OUT, "input", input, (torch.float32,))
    out = check_output(FLOAT_OUT, output, torch.uint8, x)
    with allocation_of(FLOAT_OUT, f"the output {out_shape(x)} of 'input'"):
        out.resize_(out_shape(x))
        return quantize_rows_into(out, x)


def float_to_fused8bit_out_meta(output: torch.Tensor, input: torch.Tensor) -> torch.Tensor:
    """Meta kernel (upstream has none): ``output`` resized to ``[..., n + 8]``."""
    x = check_rows(FLOAT_OUT, "input", input, (torch.float32,))
    out = check_output(FLOAT_OUT, output, torch.uint8, x)
    return out.resize_(out_shape(x))


KERNELS = {
    FLOAT: {"PrivateUse1": float_to_fused8bit_npu},
    HALF: {"PrivateUse1": half_to_fused8bit_npu},
    FLOAT_OR_HALF: {"PrivateUse1": float_or_half_to_fused8bit_npu},
    FLOAT_OUT: {"PrivateUse1": float_to_fused8bit_out_npu, "Meta": float_to_fused8bit_out_meta},
}
