"""Opcheck samples of the quantize_mx family (MX4 quantize / dequantize), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _x(d: str, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return (torch.randn(*shape, generator=g) * 3).to(d)


def _quantize(d: str) -> list[Sample]:
    return [
        ((_x(d, 2, 64), 8, 2, 3, 6.0, 32, None), {}),
        ((_x(d, 3, 20), 8, 2, 3, 6.0, 16, 1), {}),  # padded to 32 per row
        ((_x(d, 48), 8, 2, 3, 6.0, 8, 4), {}),
    ]


def _dequantize(d: str) -> list[Sample]:
    codes = torch.arange(0, 34 * 3, dtype=torch.int32).remainder(256).to(torch.uint8)
    return [((codes.view(3, 34).to(d), 32), {}), ((codes[:90].to(d), 8), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::quantize_mx": _quantize,
    "fbgemm::dequantize_mx": _dequantize,
}
