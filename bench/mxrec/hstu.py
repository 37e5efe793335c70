"""``python -m bench hstu``: HSTU attention (``mxrec::hstu_jagged.equal``) against a naive one.

Shape: ``B = 8`` sequences, ``H = 4`` heads, ``D = 128``, float32, the built-in causal mask
(``mask_type 0``, scale ``1 / S``), ``S = max_seq_len`` in 256, 512, 1024, 2048; the lengths are
``S`` for the first sequence and uniform in ``[S / 2, S]`` for the others (seed 0).  Two passes:
the forward (``torch.ops.mxrec.hstu_jagged`` with ``max_seq_len`` given) and forward + backward
(autograd: ``out.backward(w)``, gradients of q, k and v).

The naive reference runs in the same process on the same simulated npu tensors: it pads the jagged
rows to ``[B, S, H, D]`` (``index_copy``), materialises the full ``[B, H, S, S]`` scores
(``einsum``), applies ``silu``, the scale and the causal / length mask, multiplies by v and gathers
the jagged rows back; its backward is torch's autograd through those ops.  Ours must equal it
(max error over out, dq, dk, dv at most 1e-4 of the largest value) before anything is timed.

Columns, per pass and implementation: wall ms on the simulated npu (CPU kernels under the
simulator: the median of ``--repeats`` runs, ours and naive interleaved), the peak extra device
memory of one call (``torch.npu.max_memory_allocated`` over what was allocated before it: output,
saved tensors, temporaries, gradients), and the device cost of one call, counted by
:mod:`fbgemm_npu.testing.counters` and priced by :mod:`fbgemm_npu.testing.cost_910b` (launches,
AI-CPU, syncs + stalls, MB moved, projected 910B us; docs/hardware.md, "Cost model": launches and
bytes, no compute time, so a matmul-bound call costs more on a real 910B than it shows).

``--max-seq-len N`` (the seed's limit: 20480) is the long mode: one forward + backward of ours at
``S = N``, ``--batch`` (default 1) full sequences of ``--heads`` (default 2) heads, its peak memory
printed against the one score tensor it never builds; the naive reference runs beside it only
while its score tensor stays under 1 GiB.  Results: bench/results/hstu.md (the sweep) and
bench/results/hstu_long.md (``--max-seq-len 20480``), both written by the command.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.harness import COST_HEAD, COST_RULE, cost_cells, machine, seeded
from fbgemm_npu.native._index import warm_caches
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.cost_910b import Cost

__all__ = ["Inputs", "add_arguments", "main", "make_inputs", "measure", "naive"]

SWEEP = (256, 512, 1024, 2048)
NAIVE_LIMIT = 1 << 30  # bytes of one float32 [B, H, S, S] score tensor the naive side may build
TOL = 1e-4  # of max |naive|: the float32 results must agree before they are timed


@dataclass
class Inputs:
    """One problem on one device: jagged ``q, k, v, w [T, H, D]`` (``w`` the output gradient),
    ``offsets [B + 1]``, ``dest [T]`` (row ``b * S + position`` of each token in the padded
    layout, for the naive side) and ``lengths [B, 1, 1]``."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    w: torch.Tensor
    offsets: torch.Tensor
    dest: torch.Tensor
    lengths: torch.Tensor
    s: int

    @property
    def leaves(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.q, self.k, self.v


def make_inputs(
    lengths: list[int], s: int, heads: int, dim: int, device: str, seed: int = 0
) -> Inputs:
    """Random float32 inputs (seeded) for ``lengths``; q, k, v require grad."""
    g = seeded(seed)
    t = sum(lengths)
    q, k, v, w = (torch.randn(t, heads, dim, generator=g) for _ in range(4))
    offsets = torch.tensor([0, *lengths]).cumsum(0)
    dest = torch.cat([b * s + torch.arange(n) for b, n in enumerate(lengths)])
    lens = torch.tensor(lengths).view(-1, 1, 1)
    q, k, v = (x.to(device).requires_grad_() for x in (q, k, v))
    return Inputs(q, k, v, w.to(device), offsets.to(device), dest.to(device), lens.to(device), s)


def draw_lengths(batch: int, s: int, seed: int = 0) -> list[int]:
    """The first sequence ``s`` long, the others uniform in ``[s / 2, s]``."""
    rest = torch.randint(s // 2, s + 1, (batch - 1,), generator=seeded(seed)).tolist()
    return [s, *rest][:batch]


def ours(x: Inputs) -> torch.Tensor:
    """Our op through the dispatcher (autograd kernel included): ``[T, H, D]``."""
    return torch.ops.mxrec.hstu_jagged(x.q, x.k, x.v, max_seq_len=x.s, seq_offset=x.offsets)


def naive(x: Inputs) -> torch.Tensor:
    """Full materialisation: padded ``[B, S, H, D]``, scores ``[B, H, S, S]``, ``silu / S``
    times the causal mask of the valid rows, times v, back to the jagged rows."""
    b, s = x.offsets.numel() - 1, x.s
    h, d = x.q.shape[1:]

    def pad(t: torch.Tensor) -> torch.Tensor:
        return t.new_zeros(b * s, h, d).index_copy(0, x.dest, t).view(b, s, h, d)

    qp, kp, vp = pad(x.q), pad(x.k), pad(x.v)
    scores = torch.einsum("bihd,bjhd->bhij", qp, kp)
    i = torch.arange(s, device=x.q.device)
    mask = (i.view(1, s, 1) >= i.view(1, 1, s)) & (i.view(1, s, 1) < x.lengths)  # [B, S, S]
    p = torch.nn.functional.silu(scores) * (1.0 / s) * mask.unsqueeze(1)
    out = torch.einsum("bhij,bjhd->bihd", p, vp)
    return out.reshape(b * s, h, d).index_select(0, x.dest)


def _forward(fn: Callable[[Inputs], torch.Tensor]) -> Callable[[Inputs], object]:
    def run(x: Inputs) -> object:
        with torch.no_grad():
            return fn(x)

    return run


def _step(fn: Callable[[Inputs], torch.Tensor]) -> Callable[[Inputs], object]:
    def run(x: Inputs) -> object:
        for t in x.leaves:
            t.grad = None
        out = fn(x)
        out.backward(x.w)
        return out, *(t.grad for t in x.leaves)

    return run


def _check(a: Inputs, b: Inputs) -> float:
    """Run ours on ``a`` and naive on ``b`` (the same values): the largest error over out, dq,
    dk, dv relative to the largest naive value; raises past :data:`TOL`."""
    got, want = _step(ours)(a), _step(naive)(b)
    err = 0.0
    for name, x, y in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        rel = ((x - y).abs().max() / (y.abs().max() + 1e-30)).item()
        if rel > TOL:
            raise AssertionError(f"bench hstu: ours and naive differ in {name}: {rel:.2e}")
        err = max(err, rel)
    return err


@dataclass
class Row:
    """One pass of one implementation: median ms, peak extra MiB, the counted device cost."""

    s: int
    tokens: int
    pass_: str
    impl: str
    ms: float
    peak_mib: float
    cost: Cost
    unsupported: list[str]


def _once(call: Callable[[Inputs], object], x: Inputs) -> tuple[float, Cost, list[str]]:
    """One counted call: (peak extra MiB, its cost, the unsupported ops it ran)."""
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    with counters.count() as c:
        result = call(x)
    torch.npu.synchronize()
    peak = (torch.npu.max_memory_allocated() - base) / 2**20
    del result
    return peak, Cost.of(c.events), sorted(set(c.unsupported))


PASSES = {"forward": _forward, "forward+backward": _step}


def measure(
    lengths: list[int],
    s: int,
    heads: int,
    dim: int,
    repeats: int,
    with_naive: bool = True,
    passes: tuple[str, ...] = tuple(PASSES),
) -> tuple[list[Row], float | None]:
    """Rows of ``passes`` (ours, then naive when ``with_naive``) and ours' error vs naive."""
    warm_caches("npu", max(1 << 16, 2 * len(lengths) * s))
    impls = {"ours": ours, **({"naive": naive} if with_naive else {})}
    inputs = {name: make_inputs(lengths, s, heads, dim, "npu") for name in impls}
    err = _check(inputs["ours"], inputs["naive"]) if with_naive else None
    rows = []
    for pass_ in passes:
        calls = {name: PASSES[pass_](fn) for name, fn in impls.items()}
        counted = {name: _once(call, inputs[name]) for name, call in calls.items()}  # + warm-up
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(repeats):  # interleaved: machine noise hits both alike
            for name, call in calls.items():
                torch.npu.synchronize()
                start = time.perf_counter()
                call(inputs[name])
                torch.npu.synchronize()
                times[name].append(time.perf_counter() - start)
        for name in calls:
            peak, cost, unsupported = counted[name]
            ms = statistics.median(times[name]) * 1e3
            rows.append(Row(s, sum(lengths), pass_, name, ms, peak, cost, unsupported))
    return rows, err


def table(rows: list[Row], batch: int, heads: int) -> str:
    """The Markdown table: naive's ms and peak over ours' in the rows of ours."""
    head = (
        "| max_seq_len | tokens | scores MiB | pass | impl | ms | naive ms / ours | peak MiB | "
        f"naive peak / ours {COST_HEAD} unsupported |\n"
        f"|---:|---:|---:|---|---|---:|---:|---:|---:|{COST_RULE}---|\n"
    )
    naive_of = {(r.s, r.pass_): r for r in rows if r.impl == "naive"}
    lines = []
    for r in rows:
        ref = naive_of.get((r.s, r.pass_))
        ratio = peak_ratio = "-"
        if ref is not None and r.impl == "ours":
            ratio = f"{ref.ms / r.ms:.2f}"
            peak_ratio = f"{ref.peak_mib / max(r.peak_mib, 1e-9):.1f}"
        scores = batch * heads * r.s * r.s * 4 / 2**20
        lines.append(
            f"| {r.s} | {r.tokens} | {scores:.0f} | {r.pass_} | {r.impl} | {r.ms:.1f} | {ratio} | "
            f"{r.peak_mib:.1f} | {peak_ratio} |{cost_cells(r.cost)} "
            f"{', '.join(r.unsupported) or '-'} |\n"
        )
    return head + "".join(lines)


def _header(what: str, batch: int, heads: int, dim: int, repeats: int, kind: str) -> str:
    return (
        f"HSTU attention, mxrec::hstu_jagged.equal, {what}; B={batch} H={heads} D={dim} float32, "
        f"causal, scale 1/max_seq_len; npu device: {kind}; {torch.get_num_threads()} CPU "
        f"thread(s) on {machine()} at the end of the run.  ms: wall time of one call on the "
        f"simulated npu (CPU kernels), median of {repeats}, ours and naive interleaved.  naive: "
        "the jagged rows padded to [B, S, H, D], the full [B, H, S, S] scores (scores MiB: one "
        "such float32 tensor), silu, the causal mask, matmul, back to the rows; backward by "
        "torch autograd; ours equals it to 1e-4 (max error over out, dq, dk, dv: ERR).  peak "
        "MiB: the simulator's peak device memory of one call over what was allocated before it. "
        " Device cost: one call on npu, counted (AI-CPU: launches a 910B runs on its AI CPU; "
        "syncs + stalls: host waits) and priced: 910B us, the projected time (docs/hardware.md, "
        '"Cost model": launches and bytes moved, no compute time).\n\n'
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m bench hstu``."""
    p.add_argument("--repeats", type=int, default=None, help="default 3; long mode 1")
    p.add_argument("--out", type=Path, default=None, help="default bench/results/hstu.md "
                   "(the sweep) or bench/results/hstu_long.md (--max-seq-len)")  # fmt: skip
    p.add_argument("--sizes", type=int, nargs="+", default=list(SWEEP), help="the sweep's S")
    p.add_argument("--max-seq-len", type=int, default=None,
                   help="long mode: one forward + backward of ours at this S (the seed's limit: "
                   "20480), --batch full sequences")  # fmt: skip
    p.add_argument("--batch", type=int, default=None, help="B (default 8; long mode 1)")
    p.add_argument("--heads", type=int, default=None, help="H (default 4; long mode 2)")
    p.add_argument("--dim", type=int, default=128, help="D")


def main(args: argparse.Namespace) -> int:
    """Run the sweep (or the long mode), print the table and write it to the report file."""
    from fbgemm_npu.testing import simulate

    kind = simulate()
    long = args.max_seq_len is not None
    batch = args.batch or (1 if long else 8)
    heads = args.heads or (2 if long else 4)
    repeats = args.repeats or (1 if long else 3)
    rows, errs = [], []
    if long:
        s = args.max_seq_len
        with_naive = batch * heads * s * s * 4 <= NAIVE_LIMIT
        rows, err = measure(
            [s] * batch, s, heads, args.dim, repeats, with_naive, ("forward+backward",)
        )
        errs.append(err)
        what = f"long mode, max_seq_len {s}, every sequence full, forward + backward"
        if not with_naive:
            gib = batch * heads * s * s * 4 / 2**30
            what += f" (naive not run: its score tensor would be {gib:.1f} GiB)"
    else:
        for s in args.sizes:
            print(f"[hstu] max_seq_len {s}", flush=True)
            found, err = measure(draw_lengths(batch, s), s, heads, args.dim, repeats)
            rows.extend(found)
            errs.append(err)
        what = "lengths: the first max_seq_len, the others uniform in [max/2, max] (seed 0)"
    known = [e for e in errs if e is not None]
    err_text = f"{max(known):.1e}" if known else "not compared"
    text = _header(what, batch, heads, args.dim, repeats, kind).replace("ERR", err_text)
    text += table(rows, batch, heads)
    ours_fb = [r for r in rows if r.impl == "ours" and r.pass_ == "forward+backward"]
    for r in ours_fb if long else []:
        scores = batch * heads * r.s * r.s * 4 / 2**20
        text += (
            f"\nmax_seq_len {r.s}: forward + backward peak {r.peak_mib:.1f} MiB over the inputs; "
            f"one [B, H, S, S] float32 score tensor would be {scores:.0f} MiB.\n"
        )
    print(text)
    default = "hstu_long.md" if long else "hstu.md"
    out = args.out or Path("bench/results") / default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0
