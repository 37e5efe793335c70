"""Opcheck samples of the quantize_float family (bfloat16, HFP8, FP8 rowwise, padded FP8
rowwise), merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on
``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _x(d: str, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return (torch.randn(*shape, generator=g) * 3).to(d)


def _to_bf16(d: str) -> list[Sample]:
    return [((_x(d, 3, 5),), {}), ((_x(d, 2, 3, 4),), {}), ((_x(d, 6),), {})]


def _from_bf16(d: str) -> list[Sample]:
    return [((_x(d, 3, 5).bfloat16(),), {}), ((_x(d, 2, 2, 3).bfloat16(),), {})]


def _to_hfp8(d: str) -> list[Sample]:
    return [((_x(d, 3, 5), 4, 15, 1.875), {}), ((_x(d, 4, 2), 5, 31, 0.875), {})]


def _from_hfp8(d: str) -> list[Sample]:
    codes = torch.arange(0, 256, 7, dtype=torch.int32).to(torch.uint8).view(1, -1)
    return [((codes.to(d), 4, 15), {}), ((codes.view(-1, 1).to(d), 5, 31), {})]


def _to_fp8(d: str) -> list[Sample]:
    return [((_x(d, 3, 5), True), {}), ((_x(d, 2, 2, 8).half(), False), {})]


def _from_fp8(d: str) -> list[Sample]:
    rows = torch.tensor([[120, 5, 250, 0, 0, 0, 128, 63, 0, 0, 0, 0]] * 2, dtype=torch.uint8)
    return [((rows.to(d), True), {}), ((rows.to(d), False, 1), {}), ((rows.to(d), True, 5), {})]


def _to_padded(d: str) -> list[Sample]:
    return [
        ((_x(d, 3, 10), True, 4), {}),
        ((_x(d, 9), False, 8), {}),
        ((_x(d, 2, 8).half(), True, 8), {}),
    ]


def _from_padded(d: str) -> list[Sample]:
    # three rows of 10 values in buckets of 4 (pad 2); one row of 9 in buckets of 8 (pad 7)
    g = torch.Generator().manual_seed(5)
    codes = torch.randint(0, 256, (3, 3, 4), generator=g, dtype=torch.int32).to(torch.uint8)
    scale = torch.full((3, 3, 1), 0.5).view(torch.uint8)
    tags = torch.tensor([-2, -1, 2], dtype=torch.int32).view(1, 3, 1).expand(3, 3, 1)
    rows = torch.cat([codes, scale, tags.contiguous().view(torch.uint8)], -1).view(3, 36)
    one = torch.cat(
        [
            torch.arange(8, dtype=torch.uint8),
            torch.full((1,), 0.25).view(torch.uint8),
            torch.tensor([7], dtype=torch.int32).view(torch.uint8),
        ]
    ).view(1, 16)
    return [
        ((rows.to(d), True, 4, 10), {}),
        ((rows.to(d), False, 4, 10, 5), {}),
        ((one.to(d), True, 8), {}),  # the output size read from the tags: data-dependent
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::FloatToBfloat16Quantized": _to_bf16,
    "fbgemm::Bfloat16QuantizedToFloat": _from_bf16,
    "fbgemm::FloatToHFP8Quantized": _to_hfp8,
    "fbgemm::HFP8QuantizedToFloat": _from_hfp8,
    "fbgemm::FloatToFP8RowwiseQuantized": _to_fp8,
    "fbgemm::FP8RowwiseQuantizedToFloat": _from_fp8,
    "fbgemm::FloatToPaddedFP8RowwiseQuantized": _to_padded,
    "fbgemm::PaddedFP8RowwiseQuantizedToFloat": _from_padded,
}
