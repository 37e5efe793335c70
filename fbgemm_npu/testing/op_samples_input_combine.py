"""Inputs of the input_combine family (``fbgemm_npu/native/fbgemm/input_combine/``): random
per-table TBE inputs that upstream's CPU kernels define (:func:`tables`), and the opcheck samples
merged into :mod:`fbgemm_npu.testing.op_samples` (``BUILDERS``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass
class Tables:
    """Per-table lists as the ops take them (CPU tensors)."""

    indices: list[torch.Tensor]
    offsets: list[torch.Tensor]
    lengths: list[torch.Tensor]
    weights: list[torch.Tensor]
    include_last: torch.Tensor
    batch_size: int  # at least every table's bag count (the padding ops' B)


def tables(
    seed: int,
    n_tables: int = 3,
    max_batch: int = 4,
    *,
    padded: bool = False,
    min_batch: int = 0,
) -> Tables:
    """``n_tables`` tables of ``min_batch..max_batch`` bags of 0-3 indices each, int32 / int64
    mixed, weights on some tables; ``include_last`` random, or (``padded``) all set with extra
    indices past some tables' last offset and every table's last offset at least 1 (upstream
    trims such inputs; it mishandles a last offset of 0, ``combine.py``)."""
    g = torch.Generator().manual_seed(seed)
    idx, offs, lens, ws, flags = [], [], [], [], []
    for t in range(n_tables):
        b = int(torch.randint(min_batch, max_batch + 1, (1,), generator=g))
        b = max(b, 1) if padded else b
        lengths = torch.randint(0, 4, (b,), generator=g)
        if padded:  # a last offset of at least 1
            lengths[0] = lengths[0].clamp(min=1)
        n = int(lengths.sum())
        extra = int(torch.randint(0, 3, (1,), generator=g)) if padded else 0
        dtype = torch.int32 if (seed + t) % 2 else torch.int64
        idx.append(torch.randint(-5, 1000, (n + extra,), generator=g).to(dtype))
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        flag = bool(torch.randint(0, 2, (1,), generator=g))
        flag = flag or padded or b == 0  # upstream reads the last offset: never empty
        offs.append((offsets if flag else offsets[:-1]).to(torch.int64 if t % 2 else dtype))
        lens.append(lengths.to(dtype))
        weighted = bool(torch.randint(0, 2, (1,), generator=g))
        ws.append(torch.rand(n + extra, generator=g) if weighted else torch.empty(0))
        flags.append(flag)
    return Tables(idx, offs, lens, ws, torch.tensor(flags), max(max_batch, int(padded)))


def _to(d: str, ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.to(d) for t in ts]


def _combine(d: str) -> list[Sample]:
    a, p = tables(1), tables(2, padded=True)
    return [
        ((_to(d, a.indices), _to(d, a.offsets), _to(d, a.weights), a.include_last.to(d)), {}),
        ((_to(d, p.indices), _to(d, p.offsets), _to(d, p.weights), p.include_last), {}),
    ]


def _with_length(d: str) -> list[Sample]:
    a = tables(3)
    return [((_to(d, a.indices), _to(d, a.lengths), _to(d, a.weights)), {})]


def _padding(d: str) -> list[Sample]:
    a = tables(4, min_batch=1)
    args = (_to(d, a.indices), _to(d, a.offsets), _to(d, a.weights))
    return [
        ((*args, a.include_last.to(d), a.batch_size), {}),
        ((*args, a.include_last, a.batch_size + 2), {}),
    ]


def _padding_with_length(d: str) -> list[Sample]:
    a = tables(5)
    return [((_to(d, a.indices), _to(d, a.lengths), _to(d, a.weights), a.batch_size), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::tbe_input_combine": _combine,
    "fbgemm::tbe_input_combine_with_length": _with_length,
    "fbgemm::padding_fused_tbe_input_combine": _padding,
    "fbgemm::padding_fused_tbe_input_combine_with_length": _padding_with_length,
}
