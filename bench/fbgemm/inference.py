"""``python -m bench inference [--quick]``: the IntNBit TBE lookup, ours on npu vs upstream on CPU.

Shape (the TBE bench's, at upstream's inference benchmark table count): T=32 tables of E=100000
rows, D=128, batch B=512, bag size L=20, pooling SUM, FP32 output; one row of the table per
weight type (INT8, INT4, FP16: every table of that type).

Both sides are upstream's ``IntNBitTableBatchedEmbeddingBagsCodegen`` holding the same rows
(random, :func:`fbgemm_npu.testing.op_samples_inference.fill_rows`; row_alignment 16 on both, so
the weight buffers are byte-identical): upstream's on the CPU (its CPU kernel), and the same
class built with ``device=npu`` (its forward calls
``fbgemm::int_nbit_split_embedding_codegen_lookup_function``, our PrivateUse1 kernel).  The two
outputs must agree before anything is timed.  Times: wall time of one forward each, median of
``--repeats`` interleaved runs; on a simulated npu ours is the same tensor program run by the
CPU behind the simulator (its dispatch overhead included).  Device cost: one forward on npu
after the first (which seeds nothing: the module seeds the layout at construction), counted by
:mod:`fbgemm_npu.testing.counters` and priced by :mod:`fbgemm_npu.testing.cost_910b`.
GB/s as upstream's benchmark counts it: ``B * T * L * bytes_per_row`` read.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
    IntNBitTableBatchedEmbeddingBagsCodegen,
)

from bench.harness import COST_HEAD, COST_RULE, cost_cells, machine
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.cost_910b import Cost
from fbgemm_npu.testing.op_samples_inference import fill_rows

__all__ = ["QUICK", "Shape", "TYPES", "main", "run", "table"]

TYPES = (SparseType.INT8, SparseType.INT4, SparseType.FP16)


@dataclass(frozen=True)
class Shape:
    T: int = 32
    E: int = 100_000
    D: int = 128
    B: int = 512
    L: int = 20

    def __str__(self) -> str:
        return f"T={self.T} E={self.E} D={self.D} B={self.B} L={self.L} pooling SUM, FP32 output"


QUICK = Shape(T=3, E=60, D=32, B=4, L=3)  # the test's size: seconds, every path of the real one


def _module(shape: Shape, ty: SparseType, device: str) -> IntNBitTableBatchedEmbeddingBagsCodegen:
    location = EmbeddingLocation.HOST if device == "cpu" else EmbeddingLocation.DEVICE
    specs = [(f"t{k}", shape.E, shape.D, ty, location) for k in range(shape.T)]
    m = IntNBitTableBatchedEmbeddingBagsCodegen(
        specs,
        pooling_mode=PoolingMode.SUM,
        device=torch.device(device),
        output_dtype=SparseType.FP32,
        row_alignment=16,
    )
    m.initialize_weights()
    return m


def modules(shape: Shape, ty: SparseType) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Upstream's module on the CPU with random rows, and the same class on npu with its rows."""
    cpu = _module(shape, ty, "cpu")
    fill_rows(cpu, torch.Generator().manual_seed(0))
    npu = _module(shape, ty, "npu")
    npu.assign_embedding_weights(  # byte-identical rows (same row_alignment)
        [
            (w.to("npu"), None if s is None else s.to("npu"))
            for w, s in cpu.split_embedding_weights()
        ]
    )
    return cpu, npu


def _inputs(shape: Shape) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(42)
    n = shape.T * shape.B * shape.L
    indices = torch.randint(0, shape.E, (n,), generator=gen, dtype=torch.int32)
    offsets = torch.arange(0, n + 1, shape.L, dtype=torch.int32)
    return indices, offsets


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


def _row_bytes(shape: Shape, ty: SparseType) -> int:
    """Bytes of one row as stored: the values, the INT-N rows' half scale + bias."""
    data = shape.D * ty.bit_rate() // 8
    return data + (4 if ty in (SparseType.INT8, SparseType.INT4) else 0)


def run(shape: Shape, repeats: int) -> list[dict[str, Any]]:
    """One row per weight type: times of both sides, GB/s, one npu forward's counted cost."""
    indices, offsets = _inputs(shape)
    ni, no = indices.to("npu"), offsets.to("npu")
    rows = []
    for ty in TYPES:
        cpu, npu = modules(shape, ty)
        want = cpu(indices, offsets)
        got = npu(ni, no)
        # Same outputs before timing: the comparison is meaningless if the kernels disagree.
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-4)
        with counters.count() as c:
            npu(ni, no)
        sides = {"ours": partial(npu, ni, no), "upstream": partial(cpu, indices, offsets)}
        ms = _median_ms(sides, repeats)
        moved = shape.B * shape.T * shape.L * _row_bytes(shape, ty)
        rows.append(
            {
                "case": ty.name,
                "ours_ms": ms["ours"],
                "upstream_ms": ms["upstream"],
                "ratio": ms["ours"] / ms["upstream"],
                "ours_gbs": moved / ms["ours"] / 1e6,
                "upstream_gbs": moved / ms["upstream"] / 1e6,
                "launches": c.launches,
                "syncs": c.syncs,
                "cost": Cost.of(c.events),
                "unsupported": c.unsupported,
            }
        )
        del cpu, npu, sides  # the full size holds ~1 GB per module
    return rows


def table(rows: list[dict[str, Any]], shape: Shape, repeats: int, kind: str) -> str:
    head = (
        f"IntNBit TBE lookup (inference), {shape}; npu device: {kind}; "
        f"{torch.get_num_threads()} CPU threads on {machine()} at the end of the run.  Times: "
        "wall time of one forward of upstream's IntNBitTableBatchedEmbeddingBagsCodegen, ours "
        f"on npu, upstream's on the CPU, median of {repeats} interleaved runs; GB/s as "
        "upstream's benchmark counts it (B*T*L rows read, row bytes as stored); device cost: "
        "one forward on npu, counted (AI-CPU: launches a 910B runs on its AI CPU; syncs + "
        'stalls: host waits) and priced: 910B us, the projected time (docs/hardware.md, "Cost '
        'model").\n\n'
        f"| weights | ours ms | upstream ms | ratio | ours GB/s | upstream GB/s {COST_HEAD} "
        f"unsupported |\n|---|---:|---:|---:|---:|---:|{COST_RULE}---|\n"
    )
    body = "".join(
        f"| {r['case']} | {r['ours_ms']:.2f} | {r['upstream_ms']:.2f} | {r['ratio']:.2f} | "
        f"{r['ours_gbs']:.2f} | {r['upstream_gbs']:.2f} |{cost_cells(r['cost'])} "
        f"{', '.join(r['unsupported']) or '-'} |\n"
        for r in rows
    )
    return head + body


def main(repeats: int, out: Path | None, quick: bool = False) -> int:
    """Run, print and write the table (``--quick``: the test's size, printed, not written)."""
    from fbgemm_npu.testing import simulate

    kind = simulate()
    shape = QUICK if quick else Shape()
    text = table(run(shape, repeats), shape, repeats, kind)
    print(text)
    if out is not None and not quick:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 0
