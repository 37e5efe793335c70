"""Opcheck samples of the quantize_nbit family (upstream's fused N-bit "SBHalf" row-wise
quantize ops), merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh
on ``device``.  No op has autograd (upstream registers none)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]
P = "fbgemm::"


def _x(d: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(4, 16, generator=torch.Generator().manual_seed(0)).to(dtype).to(d)


def _float(d: str) -> list[Sample]:
    return [((_x(d), 4), {}), ((_x(d), 2), {}), ((_x(d).t().contiguous()[:8].t(), 8), {})]


def _half(d: str) -> list[Sample]:
    return [((_x(d, torch.float16), 4), {}), ((_x(d, torch.float16), 2), {})]


def _float_or_half(d: str) -> list[Sample]:
    return [((_x(d), 4), {}), ((_x(d, torch.float16), 8), {})]


def _min_max(d: str) -> list[Sample]:
    out = []
    for dtype, bit_rate in ((torch.float32, 4), (torch.float16, 2)):
        x = _x(d, dtype)
        bounds = torch.stack([x.amin(1) - 1, x.amax(1) + 1], 1)
        out.append(((x, bit_rate, bounds), {}))
    return out


def _rows(d: str, bit_rate: int = 4) -> torch.Tensor:
    return torch.ops.fbgemm.FloatToFusedNBitRowwiseQuantizedSBHalf(_x("cpu"), bit_rate).to(d)


def _to_float(d: str) -> list[Sample]:
    return [((_rows(d), 4), {}), ((_rows(d, 2), 2), {})]


def _to_float_or_half(d: str) -> list[Sample]:
    # no scale_bias_last: upstream's fake kernel (sparse_ops.py) takes no such parameter, so a
    # traced call that passes it fails before reaching ours (an upstream limitation)
    return [((_rows(d), 4), {}), ((_rows(d), 4, 1), {}), ((_rows(d, 8), 8, 0), {})]


def _front(d: str) -> list[Sample]:
    return [((_rows(d), 4, 0), {}), ((_rows(d, 2), 2, 1), {}), ((_rows(d), 4, 5), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    P + "FloatToFusedNBitRowwiseQuantizedSBHalf": _float,
    P + "HalfToFusedNBitRowwiseQuantizedSBHalf": _half,
    P + "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalf": _float_or_half,
    P + "FloatOrHalfToFusedNBitRowwiseQuantizedSBHalfWithRowwiseMinMax": _min_max,
    P + "FusedNBitRowwiseQuantizedSBHalfToFloat": _to_float,
    P + "FusedNBitRowwiseQuantizedSBHalfToHalf": _to_float,
    P + "FusedNBitRowwiseQuantizedSBHalfToFloatOrHalf": _to_float_or_half,
    P + "FusedNBitRowwiseQuantizedSBHalfFrontToFloatOrHalf": _front,
}
