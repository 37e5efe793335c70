"""Time our kernels against upstream's on the same CPU tensors, and count their device cost.

A :class:`Case` gives a family, a name, ``make(device) -> inputs`` and two callables taking the
inputs: ``ours`` (our kernel function, a device-generic tensor program, called directly on CPU
tensors) and ``upstream`` (``torch.ops.fbgemm.*`` on CPU).  Both run in one process, interleaved
repeat by repeat so machine noise hits both alike; the ratio is of the medians.  Launches and syncs
come from running the op through the dispatcher on the npu device under
:mod:`fbgemm_npu.testing.counters` (``npu_call``; defaults to ``upstream``'s call, which dispatches
to our PrivateUse1 kernel for npu tensors).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.testing import counters


@dataclass
class Case:
    """One benchmark: ``make`` builds inputs on a device; ``ours``/``upstream`` consume them."""

    family: str
    name: str
    make: Callable[[str], Any]
    ours: Callable[[Any], Any]
    upstream: Callable[[Any], Any]
    npu_call: Callable[[Any], Any] | None = None
    shape: str = ""


@dataclass
class Row:
    """One measured case: median times of both sides, their ratio, and one npu call's cost."""

    family: str
    name: str
    shape: str
    ours_ms: float
    upstream_ms: float
    ratio: float
    launches: int
    syncs: int
    unsupported: list[str]


def _time(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_case(case: Case, repeats: int = 15, warmup: int = 3) -> Row:
    """Median CPU wall time of ours and upstream, plus the npu launches / syncs of one call."""
    inputs = case.make("cpu")
    for _ in range(warmup):
        case.ours(inputs)
        case.upstream(inputs)
    ours_t, up_t = [], []
    for _ in range(repeats):
        ours_t.append(_time(lambda: case.ours(inputs)))
        up_t.append(_time(lambda: case.upstream(inputs)))
    ours_ms = statistics.median(ours_t) * 1e3
    up_ms = statistics.median(up_t) * 1e3

    npu_inputs = case.make("npu")
    call = case.npu_call or case.upstream
    with counters.count() as c:
        call(npu_inputs)
    return Row(
        case.family,
        case.name,
        case.shape,
        ours_ms,
        up_ms,
        ours_ms / up_ms if up_ms > 0 else float("inf"),
        c.launches,
        c.syncs,
        sorted(set(c.unsupported)),
    )


def table(rows: list[Row]) -> str:
    """The result as a Markdown table (printed and written to the report file)."""
    head = (
        "| family | case | shape | ours ms | upstream ms | ratio "
        "| launches | syncs | unsupported |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---|\n"
    )
    body = "".join(
        f"| {r.family} | {r.name} | {r.shape} | {r.ours_ms:.3f} | {r.upstream_ms:.3f} | "
        f"{r.ratio:.2f} | {r.launches} | {r.syncs} | {', '.join(r.unsupported) or '-'} |\n"
        for r in rows
    )
    return head + body


def seeded(seed: int = 0) -> torch.Generator:
    """A CPU generator with a fixed seed: every case builds the same inputs run after run."""
    return torch.Generator().manual_seed(seed)
