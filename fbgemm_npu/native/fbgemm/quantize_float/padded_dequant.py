"""``fbgemm::PaddedFP8RowwiseQuantizedToFloat`` on npu: the inverse of
``FloatToPaddedFP8RowwiseQuantized`` (``padded.py``).

Upstream has no CPU kernel (its Meta kernel, ``sparse_ops.py``, checks ``row_dim > 0``, a
multiple of 4, the output dtype, and asks a dynamic size when ``output_last_dim < 0``); the
semantics are its CUDA kernels' (``quantize_padded_fp8_rowwise.cu``), judged by a reference
written from them (``conformance/specs/fbgemm/quantize_float/reference.py``).  ``input`` uint8
of rank >= 1, rows of ``nb`` buckets of ``row_dim + 8`` bytes (codes, float32 scale, int32
tag); each bucket gives its first ``row_dim - max(tag, 0)`` codes ``hfp8_to_float(b) / scale``
(float32, then ``output_dtype``: 0 FP32, 1 FP16, 5 BF16), concatenated along the row.  The
output's last size is ``output_last_dim`` when given (>= 0), else ``ncols - 8 nb - P`` with
``P`` upstream's: for one row the sum of its positive tags, for more rows the first row's walk
(a negative tag skips that many buckets, a positive one is added): that read of the first row's
tags is the op's one sync (with the queued data checks, ``DataChecks.read_with``).

Refused by name where upstream's kernels read past the input or leave output unwritten: a row
size not a multiple of ``row_dim + 8``, a tag above ``row_dim``, a row whose kept count is not
the output's last size (data checks, queued); a row past the output is dropped (its extra values
go to a spare slot), a missing one reads 0.  No row: the last size is ``ncols - 8 nb`` (or
``output_last_dim``), nothing is read.
"""

from __future__ import annotations

import math

import torch

from fbgemm_npu.native._checks import (
    DataChecks,
    check_dtype,
    check_tensor,
    validation_enabled,
)
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.fbgemm.quantize_float import _hfp8
from fbgemm_npu.native.fbgemm.quantize_float.fp8_rowwise import OUTPUT_DTYPES, fp8_format

__all__ = ["KERNELS", "padded_fp8_rowwise_to_float_npu"]

FROM_PADDED = "fbgemm::PaddedFP8RowwiseQuantizedToFloat"


def _walk(tags: list[int], one_row: bool) -> int:
    """Upstream's total pad from the first row's tags (module docstring), on the host."""
    if one_row:
        return sum(t for t in tags if t > 0)
    total, b = 0, 0
    while b < len(tags):
        t = tags[b]
        if t < 0:
            b += -t
        else:
            total += t
            b += 1
    return total


def padded_fp8_rowwise_to_float_npu(
    input: torch.Tensor,
    forward: bool,
    row_dim: int,
    output_last_dim: int = -1,
    output_dtype: int = 0,
) -> torch.Tensor:
    """Dequantize padded rowwise FP8 (module docstring).  Launches: the scale and tag copies,
    ``_hfp8.DECODE_LAUNCHES`` (11), the division, the kept mask (``clamp_min``, ``rsub``,
    ``lt``), the output positions (``cumsum``, ``sub_``, ``lt``, ``logical_and``, the row bases
    ``mul``, ``add``, ``where`` with its fill, the int64 cast), the zero buffer,
    ``index_copy_``; float16 / bfloat16 output: the cast.  ``output_last_dim < 0``: the one
    sync (the first row's tags read)."""
    op = FROM_PADDED
    x = check_dtype(op, "input", check_tensor(op, "input", input), (torch.uint8,)).detach()
    if x.dim() < 1:
        raise ValueError(f"{op}: argument 'input' must have at least 1 dimension, got 0-D")
    if not (isinstance(row_dim, int) and row_dim > 0 and row_dim % 4 == 0):
        raise ValueError(
            f"{op}: argument 'row_dim' must be a positive multiple of 4, got {row_dim}"
        )
    if output_dtype not in OUTPUT_DTYPES:
        raise ValueError(
            f"{op}: argument 'output_dtype' must be 0 (FP32), 1 (FP16) or 5 (BF16), "
            f"got {output_dtype}"
        )
    dtype = OUTPUT_DTYPES[output_dtype]
    ext = row_dim + 8
    ncols = x.size(-1)
    if ncols % ext != 0:
        raise ValueError(
            f"{op}: argument 'input' must have rows of a multiple of row_dim + 8 = {ext} bytes "
            f"(buckets of codes, scale and tag), got {ncols}"
        )
    nb = ncols // ext
    lead = tuple(x.shape[:-1])
    nrows = math.prod(lead)
    rows = x.reshape(nrows, nb, ext)
    if nrows == 0 or nb == 0:
        cols = output_last_dim if output_last_dim >= 0 else ncols - 8 * nb
        return torch.zeros((*lead, cols), dtype=dtype, device=x.device)
    # fresh copies (clone, not contiguous: one row of one bucket is a contiguous slice at any
    # storage offset, which a float32 view refuses), read as float32 / int32
    scale = rows[..., row_dim : row_dim + 4].clone(memory_format=torch.contiguous_format)
    scale = scale.view(torch.float32)  # [R, nb, 1]
    tags = rows[..., row_dim + 4 :].clone(memory_format=torch.contiguous_format)
    tags = tags.view(torch.int32)  # [R, nb, 1]
    checks = DataChecks(op)
    validating = validation_enabled()
    if validating:
        checks.add(tags.amax(), None, row_dim, f"argument 'input' must hold tags <= {row_dim}")
    if output_last_dim >= 0:
        cols = output_last_dim
        if cols > nb * row_dim:  # no row keeps more than its codes: refused before allocating
            raise ValueError(
                f"{op}: argument 'output_last_dim' must be at most the {nb * row_dim} codes a "
                f"row of 'input' holds, got {cols}"
            )
    else:  # the one sync: the first row's tags, with the tag check
        first = checks.read_with(list(tags[0].view(-1).unbind()))
        checks = DataChecks(op)
        cols = ncols - 8 * nb - _walk(first, nrows == 1)
        if cols < 0:
            raise ValueError(f"{op}: argument 'input' has tags that leave {cols} values a row")
    values = _hfp8.decode(rows[..., :row_dim], *fp8_format(forward)[:2]).div_(scale)
    keep = arange_cached(row_dim, x.device, torch.int32) < torch.rsub(tags.clamp_min(0), row_dim)
    place = torch.cumsum(keep.view(nrows, -1), -1, dtype=torch.int32).sub_(1)  # [R, nb*row_dim]
    if validating:  # every row fills its output row exactly: place[:, -1] + 1 values kept
        last = place[:, -1]
        what = f"argument 'input' must keep {cols} values a row (output_last_dim / its tags)"
        checks.add(last.amin(), cols - 1, cols - 1, what)
        checks.add(last.amax(), cols - 1, cols - 1, what)
    checks.assert_on_device()
    ok = torch.logical_and(keep.view(nrows, -1), place < cols)
    base = arange_cached(nrows, x.device, torch.int32).mul(cols).unsqueeze(1)
    slot = torch.where(ok, place.add(base), nrows * cols).to(torch.int64)  # the spare: R cols
    buf = torch.zeros(nrows * cols + 1, dtype=torch.float32, device=x.device)
    # reshape: the values keep a transposed input's strides (a copy then; none if contiguous)
    buf.index_copy_(0, slot.view(-1), values.reshape(-1))
    out = buf[: nrows * cols].view(*lead, cols)
    return out if dtype == torch.float32 else out.to(dtype)


KERNELS = {FROM_PADDED: {"PrivateUse1": padded_fp8_rowwise_to_float_npu}}
