"""HSTU training with torchrec's DistributedModelParallel: the sharding, optimizers and loop.

The model (:mod:`fbgemm_npu.examples.hstu_model`) is built with its ``EmbeddingCollection`` on
``meta``, the embeddings' optimizer (row-wise AdaGrad) fused into their backward through
``apply_optimizer_in_backward``, and wrapped in ``DistributedModelParallel`` with the plan of
torchrec's planner (every table constrained to ``cfg.sharding_type``; the DLRM job's
:func:`~fbgemm_npu.examples.dlrm_train.make_plan`), which shards the tables over the ranks and
wraps the dense part in DDP; AdamW (``foreach=False``: one update code path on every device)
updates the dense parameters.  Both runs start from the same weights: the unsharded model built
on the CPU from the seed (:func:`reference_state`), copied into every shard
(:func:`~fbgemm_npu.examples.dlrm_train.load_full_state`); the CPU run uses the npu run's plan
with CPU placements.  The generator is reseeded before the first step, so dropout draws the same
masks on the CPU and on the simulated npu (whose ``torch.rand`` draws from the CPU generator).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

import fbgemm_npu
from fbgemm_npu.examples.dlrm_train import (
    RunResult,
    foreign_tensors,
    load_full_state,
    make_plan,
    plan_for_device,
)
from fbgemm_npu.examples.hstu_model import HSTUConfig, batches, build_model

__all__ = ["reference_state", "shard", "train"]


def reference_state(cfg: HSTUConfig) -> dict[str, torch.Tensor]:
    """The initial weights of every run of ``cfg``: the unsharded model, built on the CPU."""
    torch.manual_seed(cfg.seed)
    cpu = torch.device("cpu")
    return {k: v.detach().clone() for k, v in build_model(cfg, cpu, cpu).state_dict().items()}


def shard(cfg: HSTUConfig, device: torch.device, plan: Any | None = None) -> tuple[Any, Any, Any]:
    """(DistributedModelParallel, optimizer, plan) for ``cfg`` on ``device``, weights loaded."""
    from torchrec.distributed import DistributedModelParallel
    from torchrec.optim import RowWiseAdagrad
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    torch.manual_seed(cfg.seed)
    model = build_model(cfg, device, torch.device("meta"))
    apply_optimizer_in_backward(RowWiseAdagrad, model.ec.parameters(), {"lr": cfg.emb_lr})
    if plan is None:
        plan = make_plan(cfg, model, device.type, dist.get_world_size())
    else:
        plan = plan_for_device(plan, device.type)
    dmp = DistributedModelParallel(module=model, device=device, plan=plan)
    load_full_state(dmp, reference_state(cfg))
    dense = KeyedOptimizerWrapper(
        dict(in_backward_optimizer_filter(dmp.named_parameters())),
        lambda params: torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.01, foreach=False),
    )
    return dmp, CombinedOptimizer([dmp.fused_optimizer, dense]), plan


def train(
    cfg: HSTUConfig,
    device: torch.device,
    plan: Any | None = None,
    progress: Callable[[int, float], None] | None = None,
    step_hook: Callable[[int, Callable[[], Any]], Any] | None = None,
) -> RunResult:
    """Train ``cfg.steps`` steps on ``device`` in the current process group; per-rank result.

    Each step's batch is moved to the device before the step (the step itself uploads nothing);
    ``step_hook(step, run_step)`` may wrap a step (the recorder does) and must return its result;
    ``progress(step, loss)`` is called after each step.  ``timed_samples`` counts users.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    dmp, optimizer, plan = shard(cfg, device, plan)
    result = RunResult(device=str(device), rank=rank, world_size=world, plan=plan)
    dmp.train()
    torch.manual_seed(cfg.seed + 2)  # dropout's masks: the same draws on the CPU and the simulator
    start = 0.0
    for step, host_batch in enumerate(batches(cfg, rank, world)):
        if step == 1:  # the first step builds plans and caches: not timed
            _synchronize(device)
            start = time.perf_counter()
        batch = host_batch.to(device)

        def run_step(batch: Any = batch) -> torch.Tensor:
            optimizer.zero_grad()
            loss = dmp(batch)
            loss.backward()
            optimizer.step()
            return loss.detach()

        loss = step_hook(step, run_step) if step_hook is not None else run_step()
        # the step's one read: the loss, and in the same copy the data checks fbgemm_npu's
        # kernels queued during the step (a failed one raises here, naming its op)
        (value,) = fbgemm_npu.check(loss)
        result.losses.append(float(value))
        if progress is not None:
            progress(step, float(value))
        if step >= 1:
            result.timed_samples += host_batch.users
    _synchronize(device)
    if cfg.steps > 1:
        result.seconds = time.perf_counter() - start
    result.foreign_tensors = foreign_tensors(dmp, optimizer, device)
    return result


def _synchronize(device: torch.device) -> None:
    if device.type != "cpu":
        torch.get_device_module(device).synchronize()
