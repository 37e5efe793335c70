"""The HSTU example's ranks: one rank's runs (:func:`run_rank`), ``--processes N`` (:func:`spawn`).

A rank joins the ``hccl`` process group (on the simulated device: fbgemm_npu's gloo-staged
stand-in), trains on ``npu:rank`` with every npu step counted
(:class:`~fbgemm_npu.examples.dlrm_steps.StepRecorder`, step 0 traced), then on the CPU with the
npu run's plan, and reports both in the DLRM job's
:class:`~fbgemm_npu.examples.dlrm.RankReport`.  ``--processes N`` spawns N such ranks, as the
DLRM job's :mod:`~fbgemm_npu.examples.dlrm_spawn` does (the simulator's children get
``FBGEMM_NPU_SIM_DEVICES`` raised to N); the first rank to fail stops the run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import traceback
from dataclasses import asdict
from typing import Any

__all__ = ["run_rank", "spawn"]


def _run_one(args: argparse.Namespace, sharding_type: str, device: Any) -> Any:
    """Train on ``device`` (step 0 traced, every step counted), then on the CPU."""
    from fbgemm_npu.examples import hstu_train
    from fbgemm_npu.examples.dlrm import npu_then_cpu
    from fbgemm_npu.examples.hstu import config

    cfg = config(args, sharding_type)
    return npu_then_cpu(args, cfg, device, hstu_train.train, "hstu", sharding_type)


def run_rank(rank: int, world: int, port: int, args: argparse.Namespace) -> list[Any]:
    """One rank: for each sharding type asked for, the npu run and the CPU run."""
    import torch
    import torch.distributed as dist
    import torchrec.distributed  # noqa: F401 - seconds of imports, before any progress bar starts

    from fbgemm_npu.examples.dlrm import _quiet
    from fbgemm_npu.examples.hstu import sharding_types

    _quiet(args.verbose)
    if rank >= torch.npu.device_count():
        raise RuntimeError(
            f"hstu: rank {rank} of {world} trains on npu:{rank}, but this process has "
            f"{torch.npu.device_count()} npu devices"
        )
    device = torch.device("npu", rank)
    torch.npu.set_device(device)
    local_world_before = os.environ.get("LOCAL_WORLD_SIZE")
    os.environ["LOCAL_WORLD_SIZE"] = str(world)  # every rank on this host, as torchrun says
    try:
        dist.init_process_group(
            backend="cpu:gloo,npu:hccl",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=args.timeout),
        )
        return [_run_one(args, st, device) for st in sharding_types(args)]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        if local_world_before is None:
            os.environ.pop("LOCAL_WORLD_SIZE", None)
        else:
            os.environ["LOCAL_WORLD_SIZE"] = local_world_before


def _child(rank: int, world: int, port: int, args: argparse.Namespace, queue: Any) -> None:
    from fbgemm_npu.examples.dlrm import _activate_device

    try:
        _activate_device(quiet=True)
        queue.put((rank, [asdict(r) for r in run_rank(rank, world, port, args)], None))
    except BaseException:  # noqa: BLE001 - the launcher reports it
        queue.put((rank, None, traceback.format_exc()))


def spawn(args: argparse.Namespace, port: int, kind: str) -> list[Any]:
    """Run ``args.processes`` HSTU ranks as spawned processes; every rank's ``RankReport``s (the
    DLRM job's launcher: the first rank to fail, die or outlive ``args.timeout`` stops the run)."""
    from fbgemm_npu.examples.dlrm_spawn import spawn_ranks

    return spawn_ranks(_child, args, port, kind, "hstu")
