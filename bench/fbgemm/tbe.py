"""``python -m bench tbe``: our TBE lookup against upstream's on the same CPU.

Shape (upstream's benchmark defaults, ``split_table_batched_embeddings_benchmark.py device``):
T=8 tables of E=100000 rows, D=128, batch B=512, bag size L=20, EXACT_ROWWISE_ADAGRAD, fp32.

Both sides run ``split_embedding_codegen_lookup_rowwise_adagrad_function_pt2`` with *the same*
arguments, captured from upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` built on the CPU
(torchrec's construction: ``EmbeddingLocation.HOST``, ``ComputeDevice.CPU``): upstream through
the dispatcher (its CPU kernels), ours by calling our AutogradPrivateUse1 kernel function -- the
tensor program our npu kernel runs -- directly on those CPU tensors.  Two measurements, each the
median of ``--repeats`` interleaved runs: forward, and forward + backward + fused optimizer.

Achieved bandwidth is counted as upstream's benchmark counts it: forward reads
``B * sum(D) * L * bytes_per_weight``; forward + backward moves 3x that (read, gradient, update).
Launches and syncs are one forward and one backward of the same TBE on the npu device (after
the plan-building first call), counted by :mod:`fbgemm_npu.testing.counters`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, EmbeddingLocation
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)

from bench.harness import COST_HEAD, COST_RULE, cost_cells, machine
from fbgemm_npu.native.fbgemm.tbe import KERNELS
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.cost_910b import Cost

__all__ = ["Shape", "main", "run"]

OP = "split_embedding_codegen_lookup_rowwise_adagrad_function_pt2"


@dataclass(frozen=True)
class Shape:
    T: int = 8
    E: int = 100_000
    D: int = 128
    B: int = 512
    L: int = 20

    def __str__(self) -> str:
        return f"T={self.T} E={self.E} D={self.D} B={self.B} L={self.L} fp32 rowwise_adagrad"


def _module(shape: Shape, device: str) -> SplitTableBatchedEmbeddingBagsCodegen:
    specs = [(shape.E, shape.D, EmbeddingLocation.HOST, ComputeDevice.CPU)] * shape.T
    return SplitTableBatchedEmbeddingBagsCodegen(
        specs,
        optimizer=O.EXACT_ROWWISE_ADAGRAD,
        learning_rate=0.1,
        eps=0.1,
        bounds_check_mode=BoundsCheckMode.NONE,
        device=torch.device(device),
    )


def _inputs(shape: Shape, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(42)
    n = shape.T * shape.B * shape.L
    indices = torch.randint(0, shape.E, (n,), generator=gen)
    offsets = torch.arange(0, n + 1, shape.L)
    grad = torch.randn(shape.B, shape.T * shape.D, generator=gen)
    return indices.to(device), offsets.to(device), grad.to(device)


def capture_kwargs(m: SplitTableBatchedEmbeddingBagsCodegen, indices: Any, offsets: Any) -> dict:
    """The keyword arguments upstream's invoker passes to the pt2 op for this batch."""
    captured: dict[str, Any] = {}
    ns = torch.ops.fbgemm
    real = getattr(ns, OP)

    def record(**kwargs: Any) -> torch.Tensor:
        captured.update(kwargs)
        return real(**kwargs)

    setattr(ns, OP, record)  # the invoker looks the op up on torch.ops.fbgemm at call time
    try:
        m(indices, offsets)
    finally:
        setattr(ns, OP, real)
    return captured


def _median_ms(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm-up
        fn()
    for _ in range(repeats):  # interleaved, so machine noise hits both sides alike
        for k, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def npu_counts(shape: Shape) -> tuple[counters.Counter, counters.Counter]:
    """One forward and one backward (+ optimizer) of the module on npu, counted."""
    m = _module(shape, "npu")
    indices, offsets, grad = _inputs(shape, "npu")
    out = m(indices, offsets)  # the first call builds the plan
    out.backward(grad)
    with counters.count() as fwd:
        out = m(indices, offsets)
    with counters.count() as bwd:
        out.backward(grad)
    return fwd, bwd


def run(shape: Shape, repeats: int) -> list[dict[str, Any]]:
    """Rows of the result table: forward and forward+backward+optimizer."""
    m = _module(shape, "cpu")
    indices, offsets, grad = _inputs(shape, "cpu")
    kw = capture_kwargs(m, indices, offsets)
    upstream_op = getattr(torch.ops.fbgemm, OP)
    ours_op = KERNELS[f"fbgemm::{OP}"]["AutogradPrivateUse1"]

    def fwd(op: Callable[..., torch.Tensor]) -> Callable[[], Any]:
        return lambda: op(**kw)

    def step(op: Callable[..., torch.Tensor]) -> Callable[[], Any]:
        return lambda: op(**kw).backward(grad)

    # Same outputs before timing: the comparison is meaningless if the kernels disagree.
    torch.testing.assert_close(ours_op(**kw), upstream_op(**kw), rtol=1e-4, atol=1e-4)
    f_ms = _median_ms({"ours": fwd(ours_op), "upstream": fwd(upstream_op)}, repeats)
    s_ms = _median_ms({"ours": step(ours_op), "upstream": step(upstream_op)}, repeats)
    fwd_c, bwd_c = npu_counts(shape)
    read = 4 * shape.B * shape.T * shape.D * shape.L  # upstream's count: fp32 rows read
    step_launches = fwd_c.launches + bwd_c.launches
    step_syncs = fwd_c.syncs + bwd_c.syncs
    fwd_cost = Cost.of(fwd_c.events)
    step_cost = fwd_cost + Cost.of(bwd_c.events)
    measured = [
        ("forward", f_ms, read, fwd_c.launches, fwd_c.syncs, fwd_cost),
        ("forward+backward+optimizer", s_ms, 3 * read, step_launches, step_syncs, step_cost),
    ]
    rows = []
    for name, ms, moved, launches, syncs, cost in measured:
        rows.append(
            {
                "case": name,
                "ours_ms": ms["ours"],
                "upstream_ms": ms["upstream"],
                "ratio": ms["ours"] / ms["upstream"],
                "ours_gbs": moved / ms["ours"] / 1e6,
                "upstream_gbs": moved / ms["upstream"] / 1e6,
                "launches": launches,
                "syncs": syncs,
                "cost": cost,
                "unsupported": sorted(set(fwd_c.unsupported + bwd_c.unsupported)),
            }
        )
    return rows


def table(rows: list[dict[str, Any]], shape: Shape, repeats: int, kind: str) -> str:
    head = (
        f"TBE lookup, {shape}; npu device: {kind}; {torch.get_num_threads()} CPU threads on "
        f"{machine()} at the end of the run.  Times: CPU wall time of both kernels on the "
        f"same CPU tensors, median of {repeats} interleaved runs; GB/s as upstream's benchmark "
        "counts it (forward B*sum(D)*L*4 bytes, forward+backward 3x); device cost: one call "
        "on npu (forward: the lookup; backward: gradient aggregation and fused optimizer), "
        "counted (AI-CPU: launches a 910B runs on its AI CPU; syncs + stalls: host waits) and "
        'priced: 910B us, the projected time (docs/hardware.md, "Cost model").\n\n'
        f"| case | ours ms | upstream ms | ratio | ours GB/s | upstream GB/s {COST_HEAD} "
        f"unsupported |\n|---|---:|---:|---:|---:|---:|{COST_RULE}---|\n"
    )
    body = "".join(
        f"| {r['case']} | {r['ours_ms']:.2f} | {r['upstream_ms']:.2f} | {r['ratio']:.2f} | "
        f"{r['ours_gbs']:.2f} | {r['upstream_gbs']:.2f} |{cost_cells(r['cost'])} "
        f"{', '.join(r['unsupported']) or '-'} |\n"
        for r in rows
    )
    return head + body


def main(repeats: int, out: Path, shape: Shape | None = None, threads: int = 0) -> int:
    """Run, print and write the table; ``threads > 0`` sets torch's intra-op thread count (both
    sides alike: on an oversubscribed machine torch's parallel sort slows down 30x)."""
    from fbgemm_npu.testing import simulate

    if threads > 0:
        torch.set_num_threads(threads)
    kind = simulate()
    shape = shape or Shape()
    text = table(run(shape, repeats), shape, repeats, kind)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0
