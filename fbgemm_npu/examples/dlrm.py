"""The main job: torchrec's DLRM, sharded with DistributedModelParallel, trained on npu.

    python -m fbgemm_npu.examples.dlrm [--processes 2] [--sharding-type row_wise|all|auto]
                                       [--model dlrm|dcn] [--batch-size 64] [--steps 20]
                                       [--qcomms fp32|fp16|bf16] ...

Trains torchrec's own ``DLRM`` (or ``DLRM_DCN``) over an ``EmbeddingBagCollection`` on random
Criteo-shaped batches (13 dense, 26 sparse features), wrapped in ``DistributedModelParallel`` on
the ``npu`` device with row-wise adagrad fused into the embedding backward, through
``TrainPipelineSparseDist``; then trains the same model from the same weights on the same data on
the CPU with upstream fbgemm, and checks that the losses agree.  ``--processes N`` spawns N ranks
joined by the ``hccl`` backend (on the simulated device: fbgemm_npu's gloo-staged stand-in).
Without an Ascend NPU (torch_npu not installed) the run uses fbgemm_npu's simulated npu device and
says so.  Prints loss and samples/s of both runs and, for every npu step, what fbgemm_npu's
code asked of the device (launches, AI-CPU launches, syncs + stalls, bytes) with the step time a
910B would take for it (:mod:`fbgemm_npu.examples.dlrm_steps`); exits 1 when a loss differs by
more than the tolerance, or when a traced step ran an ``fbgemm::`` op off our npu kernels.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import math
import os
import socket
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RankReport", "main", "parse_args", "qcomms_sharders", "run_rank", "within_tolerance"]

# |loss_npu - loss_cpu| <= ATOL + RTOL * |loss_cpu|, step by step: float32 sums in another order.
ATOL = 1e-5
RTOL = 1e-4


@dataclass
class RankReport:
    """One rank's outcome for one sharding type (picklable, sent back to the launcher)."""

    sharding_type: str
    rank: int
    model: str = "dlrm"
    npu_losses: list[float] = field(default_factory=list)
    cpu_losses: list[float] = field(default_factory=list)
    npu_samples_per_s: float = float("nan")
    cpu_samples_per_s: float = float("nan")
    foreign: list[str] = field(default_factory=list)
    trace_ok: bool | None = None
    trace_summary: str = ""
    plan: str = ""
    steps: list[int] = field(default_factory=list)  # the counted npu steps (dlrm_steps.py)
    step_costs: list[dict[str, int]] = field(default_factory=list)  # fbgemm_npu's share, a Cost
    step_whole: list[dict[str, int]] = field(default_factory=list)  # every op on the device

    def max_diff(self) -> float:
        diffs = [abs(a - b) for a, b in zip(self.npu_losses, self.cpu_losses, strict=False)]
        return max(diffs) if diffs else float("nan")


def within_tolerance(
    npu: list[float], cpu: list[float], atol: float = ATOL, rtol: float = RTOL
) -> bool:
    """Whether every npu loss equals the CPU loss of the same step within the tolerance."""
    return len(npu) == len(cpu) > 0 and all(
        math.isfinite(a) and abs(a - b) <= atol + rtol * abs(b)
        for a, b in zip(npu, cpu, strict=True)
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from fbgemm_npu.examples.dlrm_train import PIPELINES, SHARDING_TYPES

    p = argparse.ArgumentParser(
        prog="python -m fbgemm_npu.examples.dlrm",
        description="Train torchrec's DLRM with DistributedModelParallel on npu; check vs CPU.",
    )
    p.add_argument("--processes", type=int, default=1, help="ranks to spawn (default 1)")
    p.add_argument(
        "--sharding-type",
        default="table_wise",
        choices=[*SHARDING_TYPES, "auto", "all"],
        help="sharding type of every table; 'auto': the planner chooses; 'all': each in turn",
    )
    p.add_argument(
        "--model", default="dlrm", choices=["dlrm", "dcn", "all"], help="DLRM, DLRM_DCN or both"
    )
    p.add_argument("--batch-size", type=int, default=64, help="samples per rank per step")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--num-embeddings", type=int, default=1000, help="rows per table")
    p.add_argument("--embedding-dim", type=int, default=16, help="a multiple of 4")
    p.add_argument("--tables", type=int, default=26, help="sparse features, one table each")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--pipeline",
        default="sparse_dist",
        choices=PIPELINES,
        help="torchrec train pipeline: TrainPipelineSparseDist, TrainPipelineBase, or none",
    )
    p.add_argument(
        "--qcomms",
        default="fp32",
        choices=["fp32", "fp16", "bf16"],
        help="torchrec QCommsConfig precision of the pooled all-to-all / reduce-scatter, fwd + bwd",
    )
    p.add_argument("--no-cpu-check", action="store_true", help="skip the CPU reference run")
    p.add_argument("--no-trace", action="store_true", help="skip the trace of the first step")
    p.add_argument(
        "--no-step-counts", action="store_true", help="count only the first step (times the run)"
    )
    p.add_argument("--kernel", choices=["tensor", "triton", "auto"], help="$FBGEMM_NPU_KERNEL")
    p.add_argument("--atol", type=float, default=ATOL, help="loss tolerance, absolute")
    p.add_argument("--rtol", type=float, default=RTOL, help="loss tolerance, relative")
    p.add_argument("--timeout", type=float, default=900, help="seconds before ranks are killed")
    p.add_argument("--verbose", action="store_true", help="show torchrec's logs and warnings")
    args = p.parse_args(argv)
    if args.processes < 1 or args.batch_size < 1 or args.steps < 1 or args.tables < 1:
        p.error("--processes, --batch-size, --steps and --tables must be positive")
    if args.embedding_dim < 4 or args.embedding_dim % 4:
        p.error("--embedding-dim must be a positive multiple of 4 (FBGEMM's TBE needs it)")
    return args


def _config(args: argparse.Namespace, model: str, sharding_type: str) -> Any:
    from fbgemm_npu.examples.dlrm_train import RunConfig

    return RunConfig(
        model=model,
        sharding_type=sharding_type,
        num_sparse=args.tables,
        num_embeddings=args.num_embeddings,
        embedding_dim=args.embedding_dim,
        batch_size=args.batch_size,
        steps=args.steps,
        lr=args.lr,
        seed=args.seed,
        pipeline=args.pipeline,
        qcomms=args.qcomms,
    )


def qcomms_sharders(precision: str, device: Any) -> list[Any] | None:
    """An ``EmbeddingBagCollectionSharder`` whose pooled comms (fwd and bwd) run at ``precision``
    through torchrec's ``get_qcomm_codecs_registry``; ``None`` (torchrec's defaults) for fp32.

    On the CPU (gloo) torchrec itself turns BF16 into FP16, so the CPU reference of a bf16 run
    quantizes to FP16: its losses still agree within the example's tolerance.
    """
    if precision == "fp32":
        return None
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.fbgemm_qcomm_codec import (
        CommType,
        QCommsConfig,
        get_qcomm_codecs_registry,
    )

    prec = CommType(precision)
    config = QCommsConfig(forward_precision=prec, backward_precision=prec)
    registry = get_qcomm_codecs_registry(config, device=device)
    return [EmbeddingBagCollectionSharder(qcomm_codecs_registry=registry)]


def _runs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(model, sharding type) of every run asked for, in order."""
    from fbgemm_npu.examples.dlrm_train import SHARDING_TYPES

    models = ["dlrm", "dcn"] if args.model == "all" else [args.model]
    types = list(SHARDING_TYPES) if args.sharding_type == "all" else [args.sharding_type]
    return [(m, t) for m in models for t in types]


def _progress(enabled: bool, total: int, desc: str) -> Any:
    """A tqdm bar on rank 0 (a silent stand-in elsewhere)."""

    class _Silent:
        def update(self, n: int = 1) -> None: ...
        def set_postfix_str(self, s: str) -> None: ...
        def close(self) -> None: ...

    if not enabled:
        return _Silent()
    from tqdm import tqdm

    tty = sys.stdout.isatty()  # a log file gets a line every few seconds, not every redraw
    return tqdm(
        total=total, desc=desc, unit="step", file=sys.stdout, mininterval=0.1 if tty else 5.0
    )


def _quiet(verbose: bool) -> None:
    """Hide torch's and torchrec's deprecation chatter and planner logs (``--verbose`` shows)."""
    if verbose:
        return
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.")
    for name in ("torchrec", "torch.fx", "torch.distributed"):
        logging.getLogger(name).setLevel(logging.ERROR)


def run_rank(rank: int, world: int, port: int, args: argparse.Namespace) -> list[RankReport]:
    """One rank: for each (model, sharding type), the npu run and the CPU run."""
    import torch
    import torch.distributed as dist
    import torchrec.distributed  # noqa: F401 - seconds of imports, before any progress bar starts

    _quiet(args.verbose)
    if rank >= torch.npu.device_count():  # the simulator's FBGEMM_NPU_SIM_DEVICES is at most 8
        raise RuntimeError(
            f"dlrm: rank {rank} of {world} trains on npu:{rank}, but this process has "
            f"{torch.npu.device_count()} npu devices"
        )
    device = torch.device("npu", rank)
    torch.npu.set_device(device)
    # every rank runs on this host, as torchrun would say (restored below: 1 process is in-process)
    local_world_before = os.environ.get("LOCAL_WORLD_SIZE")
    os.environ["LOCAL_WORLD_SIZE"] = str(world)
    try:
        dist.init_process_group(
            backend="cpu:gloo,npu:hccl",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=args.timeout),
        )
        return [_run_one(args, model, st, device) for model, st in _runs(args)]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        if local_world_before is None:
            os.environ.pop("LOCAL_WORLD_SIZE", None)
        else:
            os.environ["LOCAL_WORLD_SIZE"] = local_world_before


def _run_one(args: argparse.Namespace, model: str, sharding_type: str, device: Any) -> RankReport:
    """Train on ``device`` (tracing step 0), then on the CPU with the npu run's plan."""
    from fbgemm_npu.examples import dlrm_train

    cfg = _config(args, model, sharding_type)
    return npu_then_cpu(args, cfg, device, dlrm_train.train, model, sharding_type)


def npu_then_cpu(
    args: argparse.Namespace, cfg: Any, device: Any, train: Any, model: str, sharding_type: str
) -> RankReport:
    """One rank's report (DLRM and HSTU jobs): ``train`` on ``device``, every step counted and
    step 0 traced, then on the CPU with the npu run's plan (the same sharding)."""
    import torch
    import torch.distributed as dist

    from fbgemm_npu.examples.dlrm_steps import StepRecorder

    rank = dist.get_rank()
    rep = RankReport(sharding_type=sharding_type, rank=rank, model=model)
    hook = StepRecorder(device.type, trace_first=not args.no_trace, count=not args.no_step_counts)
    npu_plan = None
    for dev in (device, torch.device("cpu")):
        if dev.type == "cpu" and args.no_cpu_check:
            continue
        bar = _progress(rank == 0, cfg.steps, f"{model} {sharding_type} on {dev.type}")

        def progress(step: int, loss: float, bar: Any = bar) -> None:
            bar.update()
            bar.set_postfix_str(f"loss {loss:.5f}")

        on_npu = dev.type != "cpu"
        step_hook = hook if on_npu else None
        result = train(cfg, dev, plan=npu_plan, progress=progress, step_hook=step_hook)
        bar.close()
        if on_npu:
            rep.npu_losses, rep.npu_samples_per_s = result.losses, result.samples_per_s
            npu_plan, rep.plan = result.plan, str(result.plan)
        else:
            rep.cpu_losses, rep.cpu_samples_per_s = result.losses, result.samples_per_s
        rep.foreign += [f"{dev.type} run: {f}" for f in result.foreign_tensors]
    if hook.traced:
        rep.trace_ok, rep.trace_summary = hook.traced[0].ok, hook.traced[0].summary()
    rep.steps, rep.step_costs, rep.step_whole = hook.steps, hook.ours, hook.whole
    return rep


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _activate_device(quiet: bool = False) -> str:
    """Import fbgemm_npu and make ``npu`` usable: the real device, else the simulated one."""
    import fbgemm_npu

    kind = fbgemm_npu.device_kind()
    if kind == "none":
        os.environ["FBGEMM_NPU_SIMULATE"] = "1"  # spawned ranks inherit it
        from fbgemm_npu.testing import simulate

        kind = simulate()
    if not quiet:
        import torch

        if kind == "real":
            print(f"device: Ascend NPU (torch_npu), {torch.npu.device_count()} device(s)")
        else:
            print(
                "device: SIMULATED npu (fbgemm_npu.testing) - torch_npu is not installed, so every "
                "npu kernel runs on the host CPU; npu samples/s measure the simulator, not an NPU"
            )
    return kind


def launch(args: argparse.Namespace) -> list[RankReport]:
    """Run every rank (in this process when ``--processes 1``) and collect their reports."""
    import torch

    _quiet(args.verbose)
    if getattr(args, "kernel", None):  # tensor programs or Triton kernels; every rank inherits it
        os.environ["FBGEMM_NPU_KERNEL"] = args.kernel
    kind = _activate_device()
    if args.processes > torch.npu.device_count() and kind != "simulated":
        raise SystemExit(
            f"dlrm: --processes {args.processes} needs as many npu devices; "
            f"{torch.npu.device_count()} present"
        )
    port = _free_port()
    if args.processes == 1:
        return run_rank(0, 1, port, args)
    from fbgemm_npu.examples.dlrm_spawn import spawn

    return spawn(args, port, kind)


def report(args: argparse.Namespace, reports: list[RankReport]) -> bool:
    """Print the outcome of every run; True when every check passed."""
    from fbgemm_npu.examples.dlrm_steps import LEGEND, step_lines
    from fbgemm_npu.native._triton import mode

    ok = True
    shape = f"{args.tables} tables x {args.num_embeddings} rows x {args.embedding_dim}"
    print(
        f"\n{args.processes} process(es), batch {args.batch_size}/rank, {args.steps} steps, "
        f"{shape}, comms {args.qcomms}, kernels {mode()}"
    )
    tol = f"|npu - cpu| <= {args.atol:g} + {args.rtol:g}*|cpu| at every step on every rank"
    print(f"loss check: {tol}" if not args.no_cpu_check else "loss check: skipped")
    print(LEGEND)
    shown_trace = False
    for model, st in dict.fromkeys((r.model, r.sharding_type) for r in reports):
        reps = sorted(
            (r for r in reports if (r.model, r.sharding_type) == (model, st)), key=lambda r: r.rank
        )
        r0, name = reps[0], f"{model} {st}"
        lines = [
            f"[{name}] npu  loss {r0.npu_losses[0]:.6f} -> {r0.npu_losses[-1]:.6f}  "
            f"{r0.npu_samples_per_s:>9,.0f} samples/s"
        ]
        if not args.no_cpu_check:
            good = all(
                within_tolerance(r.npu_losses, r.cpu_losses, args.atol, args.rtol) for r in reps
            )
            diff = max(r.max_diff() for r in reps)
            lines.append(
                f"[{name}] cpu  loss {r0.cpu_losses[0]:.6f} -> {r0.cpu_losses[-1]:.6f}  "
                f"{r0.cpu_samples_per_s:>9,.0f} samples/s (upstream fbgemm)"
            )
            lines.append(f"[{name}] max |npu - cpu| {diff:.2e}: {'OK' if good else 'MISMATCH'}")
            ok &= good
        if r0.trace_ok is not None:
            traced_ok = all(r.trace_ok for r in reps)
            lines.append(
                f"[{name}] trace of step 0: fbgemm ops all on our npu kernels, no model tensor "
                f"left the device: {'OK' if traced_ok else 'FAILED'}"
            )
            if not traced_ok or not shown_trace:
                bad = [r for r in reps if not r.trace_ok] or [r0]
                lines += ["    " + line for line in bad[0].trace_summary.splitlines()]
                shown_trace = True
            ok &= traced_ok
        lines += step_lines(name, reps)
        foreign = [f for r in reps for f in r.foreign]
        if foreign:
            lines.append(f"[{name}] model state off its device: {foreign[:5]}")
            ok = False
        print("\n" + "\n".join(lines))
    print("\nPASSED" if ok else "\nFAILED")
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return 0 if report(args, launch(args)) else 1


if __name__ == "__main__":
    sys.exit(main())
