"""An HSTU sequential recommender trained on npu with Rec SDK's ops, sharded by torchrec: the proof.

    python -m fbgemm_npu.examples.hstu [--processes 2] [--steps 20] [--batch-size 8] [--layers 3]
                                       [--sharding-type row_wise|...|all] [--dropout 0.1] ...

A generative-recommenders-style HSTU (:mod:`fbgemm_npu.examples.hstu_model`): jagged user
histories of (item, action, timestamp) events in a ``KeyedJaggedTensor``, one embedding per
token from torchrec's ``EmbeddingCollection``, per layer the U/V/Q/K projection by
``mxrec::in_linear_silu``, relative time and position bias by ``mxrec::relative_attn_bias_time``
/ ``_pos``, HSTU attention by ``mxrec::hstu_jagged``, the output block by
``mxrec::norm_multiply_dropout`` (``mxrec::ln_mul`` without dropout); a sampled-softmax
next-item loss.  ``DistributedModelParallel`` shards the tables over the ranks (row-wise AdaGrad
fused into their backward), AdamW updates the dense part (:mod:`~fbgemm_npu.examples.hstu_train`).
The global batch (``--batch-size`` users per rank) is split across the ranks, so N processes
learn what 1 process learns.  Without an Ascend NPU the run uses fbgemm_npu's simulated npu
device and says so.

Then the same model is trained from the same weights on the same data on the CPU (our CPU
kernels of the mxrec ops, upstream fbgemm's of the TBE), and the command exits 1 unless

* every npu loss of every rank is within ``ATOL + RTOL * |cpu|`` (1e-5 + 1e-4 |loss|, the DLRM
  job's) of the CPU loss of that step: the mxrec ops are one tensor program on both devices, but
  torch's layer_norm and silu backward decompose on the npu device and fuse on the CPU (~1e-7),
  and a 910B's matmuls sum in their own order.  Dropout (``--dropout``, default 0.1 where the
  check can reproduce it) draws its masks from torch's generator: the simulated npu shares the
  CPU's, so the masks are the same; a real NPU's generator is not the CPU's, so there the default
  is 0 (``ln_mul``) and ``--dropout P`` needs ``--no-cpu-check``;
* the loss went down (the global loss, the mean over the ranks: the last 5 steps' mean below the
  first 5's);
* fbgemm_npu's share of every npu step on every rank has no AI-CPU launch, no sync and no stall
  (:mod:`~fbgemm_npu.examples.dlrm_steps`), each step's loss read by ``fbgemm_npu.check(loss)``
  (a deferred data check that failed raises there), and the trace of step 0 has every fbgemm /
  mxrec op on our npu kernel and no float tensor leaving the device; nothing is off the device.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["ATOL", "RTOL", "SHARDING_TYPES", "config", "launch", "main", "parse_args", "report"]

ATOL = 1e-5  # |loss_npu - loss_cpu| <= ATOL + RTOL * |loss_cpu| (module docstring: why not 0)
RTOL = 1e-4
# the sharding types torchrec's EmbeddingCollectionSharder offers, but data-parallel: that one
# trains on npu, but its CPU reference run fails in upstream fbgemm_gpu 1.8.0, whose CPU dense
# TBE ignores pooling NONE (one pooled row per bag: torchrec's split of the ids' rows fails)
SHARDING_TYPES: tuple[str, ...] = ("row_wise", "table_wise", "column_wise")
DEFAULT_DROPOUT = 0.1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from fbgemm_npu.examples.hstu_model import HSTUConfig

    d = HSTUConfig()
    p = argparse.ArgumentParser(
        prog="python -m fbgemm_npu.examples.hstu",
        description="Train an HSTU recommender with DistributedModelParallel on npu; check vs CPU.",
    )
    add = p.add_argument
    add("--processes", type=int, default=1, help="ranks to spawn (default 1)")
    add(
        "--sharding-type",
        default=d.sharding_type,
        choices=[*SHARDING_TYPES, "auto", "all"],
        help="sharding type of both tables; 'auto': the planner chooses; 'all': each in turn",
    )
    add("--steps", type=int, default=d.steps)
    add("--batch-size", type=int, default=d.batch_size, help="users per rank per step")
    add(
        "--max-items", type=int, default=d.max_items, help="events per user at most (2 tokens each)"
    )
    add("--num-items", type=int, default=d.num_items, help="rows of the item table")
    add("--dim", type=int, default=d.dim, help="model width, a multiple of 4 and of --heads")
    add("--heads", type=int, default=d.heads)
    add("--layers", type=int, default=d.layers, help="HSTU layers")
    add("--negatives", type=int, default=d.negatives, help="sampled negatives per target")
    add(
        "--dropout",
        type=float,
        default=None,
        help=f"norm_multiply_dropout's ratio (0: ln_mul); default {DEFAULT_DROPOUT} where the CPU "
        "check can draw the same masks (simulated npu, or --no-cpu-check), else 0",
    )
    add("--lr", type=float, default=d.lr, help="AdamW's, the dense parameters")
    add("--emb-lr", type=float, default=d.emb_lr, help="row-wise AdaGrad's, the embeddings")
    add("--seed", type=int, default=d.seed)
    add("--no-cpu-check", action="store_true", help="skip the CPU reference run")
    add("--no-trace", action="store_true", help="skip the trace of the first step")
    add(
        "--no-step-counts",
        action="store_true",
        help="do not count steps after the first (times the npu run without the counters)",
    )
    add("--atol", type=float, default=ATOL, help="loss tolerance, absolute")
    add("--rtol", type=float, default=RTOL, help="loss tolerance, relative")
    add("--timeout", type=float, default=900, help="seconds before ranks are killed")
    add("--verbose", action="store_true", help="show torchrec's logs and warnings")
    args = p.parse_args(argv)
    positive = (
        args.processes,
        args.steps,
        args.batch_size,
        args.heads,
        args.layers,
        args.negatives,
    )
    if min(positive) < 1 or args.max_items < 2 or args.num_items < 2:
        p.error("--processes, --steps, --batch-size, --heads, --layers, --negatives must be >= 1; "
                "--max-items, --num-items >= 2")  # fmt: skip
    if args.dim < 4 or args.dim % 4 or args.dim % args.heads:
        p.error("--dim must be a positive multiple of 4 (the TBE's) and of --heads")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        p.error("--dropout must be in [0, 1)")
    return args


def sharding_types(args: argparse.Namespace) -> list[str]:
    return list(SHARDING_TYPES) if args.sharding_type == "all" else [args.sharding_type]


def config(args: argparse.Namespace, sharding_type: str) -> Any:
    from fbgemm_npu.examples.hstu_model import HSTUConfig

    return HSTUConfig(
        batch_size=args.batch_size, steps=args.steps, max_items=args.max_items,
        num_items=args.num_items, dim=args.dim, heads=args.heads, layers=args.layers,
        negatives=args.negatives, dropout=args.dropout or 0.0, lr=args.lr, emb_lr=args.emb_lr,
        seed=args.seed, sharding_type=sharding_type,
    )  # fmt: skip


def _resolve_dropout(args: argparse.Namespace, kind: str) -> None:
    """``--dropout`` by default: 0.1 where the CPU run can draw the npu run's masks, else 0."""
    reproducible = kind == "simulated" or args.no_cpu_check
    if args.dropout is None:
        args.dropout = DEFAULT_DROPOUT if reproducible else 0.0
    elif args.dropout > 0 and not reproducible:
        raise SystemExit(
            "hstu: --dropout > 0 with the CPU check needs the CPU's generator on npu (the "
            "simulated device); torch_npu's draws other masks: add --no-cpu-check, or --dropout 0"
        )


def launch(args: argparse.Namespace) -> list[Any]:
    """Run every rank (in this process when ``--processes 1``) and collect their reports."""
    import torch

    from fbgemm_npu.examples.dlrm import _activate_device, _free_port, _quiet
    from fbgemm_npu.examples.hstu_spawn import run_rank, spawn

    _quiet(args.verbose)
    kind = _activate_device()
    if args.processes > torch.npu.device_count() and kind != "simulated":
        raise SystemExit(
            f"hstu: --processes {args.processes} needs as many npu devices; "
            f"{torch.npu.device_count()} present"
        )
    _resolve_dropout(args, kind)
    block = "norm_multiply_dropout" if args.dropout > 0 else "ln_mul"
    print(f"{args.processes} process(es) x {args.batch_size} users x <= {args.max_items} events "
          f"(2 tokens each), D {args.dim}, {args.heads} heads, {args.layers} HSTU layers, "
          f"{args.negatives} sampled negatives, dropout {args.dropout:g} ({block})")  # fmt: skip
    port = _free_port()
    if args.processes == 1:
        return run_rank(0, 1, port, args)
    return spawn(args, port, kind)


def global_losses(reports: list[Any], which: str = "npu") -> list[float]:
    """The global batch's loss of every step: the mean of the ranks' losses (equal batches)."""
    ranks = [getattr(r, f"{which}_losses") for r in reports]
    return [sum(step) / len(ranks) for step in zip(*ranks, strict=True)]


def went_down(losses: list[float], window: int = 5) -> bool:
    """The mean of the last ``window`` losses is below the mean of the first ``window``."""
    w = max(1, min(window, len(losses) // 2))
    return len(losses) >= 2 and sum(losses[-w:]) < sum(losses[:w])


def _check_run(args: argparse.Namespace, st: str, reps: list[Any]) -> tuple[bool, list[str]]:
    """The checks of one sharding type's run over its ranks (module docstring); lines to print."""
    from fbgemm_npu.examples.dlrm import within_tolerance
    from fbgemm_npu.examples.dlrm_steps import step_lines
    from fbgemm_npu.testing.cost_910b import Cost

    name, r0 = f"hstu {st}", reps[0]
    npu = global_losses(reps)
    lines = [f"[{name}] npu  loss {npu[0]:.6f} -> {npu[-1]:.6f}  "
             f"{r0.npu_samples_per_s:>9,.1f} samples/s (users)"]  # fmt: skip
    ok = down = went_down(npu)
    if not args.no_cpu_check:
        cpu = global_losses(reps, "cpu")
        lines.append(f"[{name}] cpu  loss {cpu[0]:.6f} -> {cpu[-1]:.6f}  "
                     f"{r0.cpu_samples_per_s:>9,.1f} samples/s (users)")  # fmt: skip
        lines.append(f"    step  {'npu loss':>9} {'cpu loss':>9}  (the global batch's)")
        rows = enumerate(zip(npu, cpu, strict=True))
        lines += [f"    {i:>4}  {a:>9.6f} {b:>9.6f}" for i, (a, b) in rows]
        agree = all(
            within_tolerance(r.npu_losses, r.cpu_losses, args.atol, args.rtol) for r in reps
        )
        diff = max(r.max_diff() for r in reps)
        lines.append(f"[{name}] max |npu - cpu| {diff:.2e} (every rank, every step): "
                     f"{'OK' if agree else 'MISMATCH'}")  # fmt: skip
        ok &= agree
    lines.append(f"[{name}] loss went down: {'OK' if down else 'NO'}")
    costs = [Cost(**c) for r in reps for c in r.step_costs]
    clean = all(c.ai_cpu == c.syncs == c.stalls == 0 for c in costs)
    verdict = (
        ("OK" if clean else "FAILED") if costs else "not counted (--no-trace, --no-step-counts)"
    )
    lines.append(f"[{name}] fbgemm_npu's share of every counted npu step: 0 AI-CPU, 0 syncs, "
                 f"0 stalls: {verdict}")  # fmt: skip
    ok &= clean
    if r0.trace_ok is not None:
        traced = all(r.trace_ok for r in reps)
        lines.append(f"[{name}] trace of step 0: fbgemm / mxrec ops all on our npu kernels, no "
                     f"float tensor left the device: {'OK' if traced else 'FAILED'}")  # fmt: skip
        bad = [r for r in reps if not r.trace_ok] or [r0]
        lines += ["    " + line for line in bad[0].trace_summary.splitlines()]
        ok &= traced
    lines += step_lines(name, reps)
    foreign = [f for r in reps for f in r.foreign]
    if foreign:
        lines.append(f"[{name}] model state off its device: {foreign[:5]}")
        ok = False
    return ok, lines


def report(args: argparse.Namespace, reports: list[Any]) -> bool:
    """Print the outcome of every run; True when every check passed."""
    from fbgemm_npu.examples.dlrm_steps import LEGEND

    tol = f"|npu - cpu| <= {args.atol:g} + {args.rtol:g}*|cpu| at every step on every rank"
    print(f"\nloss check: {tol}" if not args.no_cpu_check else "\nloss check: skipped")
    print(LEGEND)
    ok = True
    for st in dict.fromkeys(r.sharding_type for r in reports):
        reps = sorted((r for r in reports if r.sharding_type == st), key=lambda r: r.rank)
        good, lines = _check_run(args, st, reps)
        ok &= good
        print("\n" + "\n".join(lines))
    print("\nPASSED" if ok else "\nFAILED")
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return 0 if report(args, launch(args)) else 1


if __name__ == "__main__":
    sys.exit(main())
