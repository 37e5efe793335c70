"""Opcheck samples of the quantize_8bit family (``fbgemm_npu/native/fbgemm/quantize_8bit/``),
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``.
Row widths are multiples of 4: upstream's Meta kernels round the width up to 4 bytes where its
CPU kernels do not (``sparse_ops.py``: ``ncols_aligned``), so other widths would fail the fake
check on upstream's side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _rows(d: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(14)
    return (torch.randn(3, 8, generator=g) * 4).to(dtype).to(d)


def _fused(d: str) -> torch.Tensor:
    """Fused rows of ``_rows`` (data, then float32 scale and bias), built on the host."""
    x = _rows("cpu")
    mn, mx = x.aminmax(dim=-1, keepdim=True)
    q = ((x - mn) * (255.0 / (mx - mn))).round().to(torch.uint8)
    return torch.cat([q, torch.cat([(mx - mn) / 255.0, mn], -1).view(torch.uint8)], -1).to(d)


def _float(d: str) -> list[Sample]:
    return [((_rows(d),), {}), ((_rows(d).view(3, 2, 4),), {})]


def _half(d: str) -> list[Sample]:
    return [((_rows(d, torch.float16),), {})]


def _float_or_half(d: str) -> list[Sample]:
    return [((_rows(d),), {}), ((_rows(d, torch.float16),), {})]


def _float_out(d: str) -> list[Sample]:
    return [((torch.empty(0, dtype=torch.uint8, device=d), _rows(d)), {})]


def _to_float(d: str) -> list[Sample]:
    return [((_fused(d),), {}), ((_fused(d).view(3, 1, 16),), {})]


def _to_float_or_half(d: str) -> list[Sample]:
    q = _fused(d)
    return [((q,), {}), ((q, 1), {}), ((q, 5, False), {}), ((q, 0, False, False), {})]


def _to_float_out(d: str) -> list[Sample]:
    return [((torch.empty(0, device=d), _fused(d)), {})]


def _mixed_dim(d: str) -> list[Sample]:
    q = _fused("cpu")  # two tables: widths 4 and 4 (+ 8 bytes each), then one of 8
    rows = torch.cat([q[:, :4], q[:, -8:], q[:, 4:8], q[:, -8:], q], -1)
    offsets = torch.tensor([0, 12, 24, 40], dtype=torch.int32)
    return [((rows.to(d), offsets.to(d), 0), {}), ((rows.to(d), offsets.to(d), 1), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::FloatToFused8BitRowwiseQuantized": _float,
    "fbgemm::HalfToFused8BitRowwiseQuantized": _half,
    "fbgemm::FloatOrHalfToFused8BitRowwiseQuantized": _float_or_half,
    "fbgemm::FloatToFused8BitRowwiseQuantizedOut": _float_out,
    "fbgemm::Fused8BitRowwiseQuantizedToFloat": _to_float,
    "fbgemm::Fused8BitRowwiseQuantizedToHalf": _to_float,
    "fbgemm::Fused8BitRowwiseQuantizedToBfloat16": _to_float,
    "fbgemm::Fused8BitRowwiseQuantizedToFloatOrHalf": _to_float_or_half,
    "fbgemm::Fused8BitRowwiseQuantizedToFloatOut": _to_float_out,
    "fbgemm::Fused8BitRowwiseQuantizedToFloatMixedDim": _mixed_dim,
}
