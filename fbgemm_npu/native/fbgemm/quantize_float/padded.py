"""``fbgemm::FloatToPaddedFP8RowwiseQuantized`` on npu: FP8 rowwise per bucket of ``row_dim``
values.

Upstream has no CPU kernel (its Meta kernel, ``sparse_ops.py``, gives the shape); the semantics
are its CUDA kernel's (``quantize_padded_fp8_rowwise.cu``), judged by a reference written from
it (``conformance/specs/fbgemm/quantize_float/reference.py``).  ``t`` float32 / float16 /
bfloat16 of rank >= 1, rows along the last dim (``ncols``), ``row_dim > 0`` a multiple of 4
(upstream's Meta check).  A row is cut into ``nb = ceil(ncols / row_dim)`` buckets, the last
one ``pad = nb * row_dim - ncols`` short; each bucket is ``row_dim + 8`` bytes: its codes (zeros
past the row's end), the float32 ``scale = max_pos / (1e-20 + max(hi, -lo))`` and an int32
tag.  ``hi`` / ``lo`` are the kernel's sequential ``max`` / ``min`` (``r = r >= v ? r : v``):
a NaN resets the running value, so they are the max / min of the values after the bucket's
last NaN, and NaN when the bucket ends in one.  Tag: ``pad`` for the last bucket; before it the
kernel's skip count, ``b - (nb - 1)`` when the input has one row and ``-((ncols - b row_dim) //
row_dim)`` otherwise.  HFP8 as ``FloatToFP8RowwiseQuantized`` (forward: E4M3 bias 15, 0.9375;
backward: E5M2 bias 31, 0.875).  No row or no column: zeros.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as fn

from fbgemm_npu.native._checks import check_dtype, check_tensor
from fbgemm_npu.native._index import arange_cached
from fbgemm_npu.native.fbgemm.quantize_float import _hfp8
from fbgemm_npu.native.fbgemm.quantize_float.fp8_rowwise import EPSILON, fp8_format

__all__ = ["KERNELS", "float_to_padded_fp8_rowwise_npu"]

TO_PADDED = "fbgemm::FloatToPaddedFP8RowwiseQuantized"


def _tags(nrows: int, ncols: int, row_dim: int, nb: int, device: torch.device) -> torch.Tensor:
    """The int32 tag of each bucket (module docstring): 3 or 5 launches and the fill."""
    b = arange_cached(nb, device, torch.int32)
    if nrows == 1:
        tags = torch.sub(b, nb - 1)
    else:
        tags = torch.mul(b, -row_dim).add_(ncols).floor_divide_(row_dim).neg_()
    tags[-1:].fill_(nb * row_dim - ncols)
    return tags


def float_to_padded_fp8_rowwise_npu(t: torch.Tensor, forward: bool, row_dim: int) -> torch.Tensor:
    """Padded rowwise FP8 (module docstring).  Launches: the float32 cast (float16 / bfloat16),
    the pad to ``nb * row_dim`` columns, ``isnan``, its int32 cast, ``cumsum``, ``sum``, ``sub``,
    the kept mask (``eq``, ``logical_and``), the two ``where`` fills and reductions, the kept
    count and the NaN case (``sum``, ``eq``, 2 ``where``), ``neg``, ``maximum``, ``add``,
    ``full_like``, ``div_``, the product, ``_hfp8.ENCODE_LAUNCHES`` (21), the zero output, the
    tag program and three copies: budgets.py."""
    op = TO_PADDED
    x = check_dtype(
        op, "t", check_tensor(op, "t", t), (torch.float32, torch.float16, torch.bfloat16)
    ).detach()
    if x.dim() < 1:
        raise ValueError(f"{op}: argument 't' must have at least 1 dimension, got a 0-D tensor")
    if not (isinstance(row_dim, int) and row_dim > 0 and row_dim % 4 == 0):
        raise ValueError(
            f"{op}: argument 'row_dim' must be a positive multiple of 4, got {row_dim}"
        )
    ebits, bias, max_pos = fp8_format(forward)
    ncols = x.size(-1)
    nb = (ncols + row_dim - 1) // row_dim
    lead = tuple(x.shape[:-1])
    nrows = math.prod(lead)
    out = torch.zeros((*lead, nb * (row_dim + 8)), dtype=torch.uint8, device=x.device)
    if x.numel() == 0:
        return out
    xf = x if x.dtype == torch.float32 else x.float()
    xp = fn.pad(xf, (0, nb * row_dim - ncols)).view(*lead, nb, row_dim)
    nan = torch.isnan(xp).to(torch.int32)
    # NaNs at or after each position within its bucket: total - (inclusive prefix) + own
    after = torch.sum(nan, -1, keepdim=True) - torch.cumsum(nan, -1, dtype=torch.int32)
    # the values the sequential min / max still see: no NaN after them, not NaN themselves;
    # the pad columns are zeros, not NaN, and are excluded by position through the fills
    kept = torch.logical_and(after == 0, nan == 0)
    if nb * row_dim > ncols:
        kept[..., -1, row_dim - (nb * row_dim - ncols) :] = False
    hi = torch.where(kept, xp, -math.inf).amax(-1, keepdim=True)
    lo = torch.where(kept, xp, math.inf).amin(-1, keepdim=True)
    none = torch.sum(kept, -1, keepdim=True) == 0  # the bucket ends in a NaN: NaN bounds
    m = torch.maximum(hi, lo.neg_())
    m = torch.where(none, math.nan, m)
    scale = torch.full_like(m, max_pos).div_(m.add_(EPSILON))
    codes = _hfp8.encode(xp * scale, ebits, bias, max_pos)
    body = out.view(*lead, nb, row_dim + 8)
    body[..., : row_dim - 0].copy_(codes)
    if nb * row_dim > ncols:  # the kernel writes no code past the row's end
        body[..., -1, row_dim - (nb * row_dim - ncols) : row_dim].fill_(0)
    body[..., row_dim : row_dim + 4].copy_(scale.view(torch.uint8))
    tags = _tags(nrows, ncols, row_dim, nb, x.device)
    body[..., row_dim + 4 :].copy_(tags.view(torch.uint8).view(nb, 4))
    return out


KERNELS = {TO_PADDED: {"PrivateUse1": float_to_padded_fp8_rowwise_npu}}
