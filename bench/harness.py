"""Time our kernels against upstream's on the same CPU tensors, and count their device cost.

A :class:`Case` gives a family, a name, ``make(device) -> inputs`` and two callables taking the
inputs: ``ours`` (our kernel function, a device-generic tensor program, called directly on CPU
tensors) and ``upstream`` (``torch.ops.fbgemm.*`` on CPU).  Both run in one process, interleaved
repeat by repeat so machine noise hits both alike; the ratio is of the medians.  The device cost
comes from running the op through the dispatcher on the npu device under
:mod:`fbgemm_npu.testing.counters` (``npu_call``; defaults to ``upstream``'s call, which dispatches
to our PrivateUse1 kernel for npu tensors): launches, the launches a 910B runs on its AI CPU,
syncs + stalls (host waits; a stall is one only a 910B has), the bytes moved, and the projected
910B time of one call, :mod:`fbgemm_npu.testing.cost_910b` (docs/hardware.md, "Cost model").
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.native._index import warm_caches
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.cost_910b import COLUMNS, Cost, cells


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
    cost: Cost = Cost()  # the npu call: launches, AI-CPU, syncs, stalls, bytes (cost_910b)


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
    warm_caches("npu")  # the shared index caches' first fill is not this call's cost
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
        Cost.of(c.events),
    )


# The device-cost columns of every benchmark table (``python -m bench ops`` and ``tbe``).
COST_HEAD = "| " + " | ".join((*COLUMNS, "910B us")) + " |"
COST_RULE = "---:|" * (len(COLUMNS) + 1)


def cost_cells(cost: Cost) -> str:
    """One call's device cost as the Markdown cells under :data:`COST_HEAD`."""
    return " " + " | ".join((*cells(cost), f"{cost.us:.1f}")) + " |"


def machine() -> str:
    """What the times were measured on: the CPU model, its cores, the load average now."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, load average {load}"


def table(rows: list[Row]) -> str:
    """The result as a Markdown table (printed and written to the report file)."""
    head = (
        f"| family | case | shape | ours ms | upstream ms | ratio {COST_HEAD} unsupported |\n"
        f"|---|---|---|---:|---:|---:|{COST_RULE}---|\n"
    )
    body = "".join(
        f"| {r.family} | {r.name} | {r.shape} | {r.ours_ms:.3f} | {r.upstream_ms:.3f} | "
        f"{r.ratio:.2f} |{cost_cells(r.cost)} {', '.join(r.unsupported) or '-'} |\n"
        for r in rows
    )
    return head + body


def seeded(seed: int = 0) -> torch.Generator:
    """A CPU generator with a fixed seed: every case builds the same inputs run after run."""
    return torch.Generator().manual_seed(seed)
