"""The main job's ``--processes N`` (N > 1): spawn N ranks, one npu device each, and collect.

Rank ``r`` trains on ``npu:r`` (:func:`fbgemm_npu.examples.dlrm.run_rank`), so N ranks need N
devices.  On an Ascend host those are torch_npu's; the simulated device has 2 unless
``FBGEMM_NPU_SIM_DEVICES`` says otherwise (read once per process, when the simulator loads, at
most 8), so the ranks are started with ``FBGEMM_NPU_SIM_DEVICES`` raised to N: every child's
simulator then has ``npu:0 .. npu:N-1``, while this process keeps the devices it has.
"""

from __future__ import annotations

import argparse
import os
import queue as queue_mod
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

__all__ = ["SIM_DEVICES_ENV", "spawn"]

# How many devices the simulator of a process has (npu_sim.cpp, device_count_value()).
SIM_DEVICES_ENV = "FBGEMM_NPU_SIM_DEVICES"


@contextmanager
def _children_devices(kind: str, processes: int) -> Iterator[None]:
    """While children start: on the simulator, at least ``processes`` devices in their env."""
    before = os.environ.get(SIM_DEVICES_ENV)
    if kind == "simulated" and processes > int(before if (before or "").isdigit() else 0):
        os.environ[SIM_DEVICES_ENV] = str(processes)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SIM_DEVICES_ENV, None)
        else:
            os.environ[SIM_DEVICES_ENV] = before


def _child(rank: int, world: int, port: int, args: argparse.Namespace, queue: Any) -> None:
    from fbgemm_npu.examples.dlrm import _activate_device, run_rank

    try:
        _activate_device(quiet=True)
        queue.put((rank, [asdict(r) for r in run_rank(rank, world, port, args)], None))
    except BaseException:  # noqa: BLE001 - the launcher reports it
        queue.put((rank, None, traceback.format_exc()))


def spawn(args: argparse.Namespace, port: int, kind: str) -> list[Any]:
    """Run ``args.processes`` DLRM ranks as spawned processes (:func:`spawn_ranks`)."""
    return spawn_ranks(_child, args, port, kind, "dlrm")


def spawn_ranks(
    child: Callable[..., None], args: argparse.Namespace, port: int, kind: str, job: str
) -> list[Any]:
    """Run ``args.processes`` ranks of ``child`` (``child(rank, world, port, args, queue)``, which
    puts ``(rank, [RankReport as dict], traceback or None)``) as spawned processes; every rank's
    ``RankReport``s.

    ``kind`` is this process's device kind (``real`` / ``simulated``).  The first rank to fail,
    die or outlive ``args.timeout`` stops the run: the others are killed and ``RuntimeError``
    (naming ``job``) carries the failures (a rank's traceback, or its exit code).
    """
    import torch.multiprocessing as mp

    from fbgemm_npu.examples.dlrm import RankReport

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [
        ctx.Process(target=child, args=(r, args.processes, port, args, results), daemon=True)
        for r in range(args.processes)
    ]
    with _children_devices(kind, args.processes):
        for p in procs:
            p.start()
    reports: list[RankReport] = []
    errors: list[str] = []
    pending = set(range(args.processes))
    deadline = time.monotonic() + args.timeout
    try:
        while pending and time.monotonic() < deadline:
            try:
                rank, reps, err = results.get(timeout=1.0)
            except queue_mod.Empty:
                dead = [r for r in pending if not procs[r].is_alive()]
                if dead:  # died without a word (killed, crashed in C++)
                    errors += [f"rank {r}: exited with code {procs[r].exitcode}" for r in dead]
                    break
                continue
            pending.discard(rank)
            if err is not None:
                errors.append(f"rank {rank}:\n{err}")
                break
            reports += [RankReport(**r) for r in reps]
        if pending and not errors:
            errors.append(f"ranks {sorted(pending)}: no result within --timeout {args.timeout:g} s")
    finally:
        for p in procs:
            p.join(timeout=5 if not errors else 0.1)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        raise RuntimeError(f"{job}: a rank failed\n" + "\n".join(errors))
    return reports
