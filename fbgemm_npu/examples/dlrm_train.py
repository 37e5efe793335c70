"""DLRM training with torchrec's DistributedModelParallel: the model, data and loop of the example.

torchrec's own pieces, unchanged: ``torchrec.models.dlrm.DLRM`` / ``DLRM_DCN`` over an
``EmbeddingBagCollection``, ``RandomRecDataset`` (Criteo-shaped: 13 dense, 26 sparse features),
``EmbeddingShardingPlanner``, ``DistributedModelParallel``, row-wise adagrad fused into the TBE
backward through ``apply_optimizer_in_backward``, Adagrad for the dense part and
``TrainPipelineSparseDist``.  The same function trains on ``npu`` (fbgemm_npu) and on ``cpu``
(upstream fbgemm): the CPU run is the reference the npu run is checked against.

Both runs start from the same weights: :func:`reference_state` builds the unsharded model on the
CPU from the seed, and :func:`load_full_state` copies it into every shard of the sharded model,
whatever the sharding type.  The plan is made once, by the planner for npu, and the CPU run uses
the same plan with CPU placements (torchrec's CPU planner offers no row-wise sharding).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from fbgemm_npu.examples.dlrm import qcomms_sharders
from fbgemm_npu.native._pending import check as read_checks

__all__ = [
    "PIPELINES",
    "SHARDING_TYPES",
    "RunConfig",
    "RunResult",
    "build_model",
    "load_full_state",
    "make_plan",
    "reference_state",
    "shard",
    "train",
]

# torchrec's ShardingType values the example offers: the six the issue names, then grid sharding
# (column shards split row-wise across a host's ranks), which torchrec offers cuda as well.
SHARDING_TYPES: tuple[str, ...] = (
    "data_parallel",
    "table_wise",
    "row_wise",
    "column_wise",
    "table_row_wise",
    "table_column_wise",
    "grid_shard",
)
# torchrec's train pipelines the example can drive ("none": forward, backward, step by hand).
# TrainPipelineSemiSync is not among them yet: its losses have not been compared with a CPU run.
PIPELINES: tuple[str, ...] = ("sparse_dist", "base", "none")


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run; the same config gives the same losses on npu and CPU."""

    model: str = "dlrm"  # "dlrm" or "dcn"
    sharding_type: str = "table_wise"  # one of SHARDING_TYPES, or "auto" (the planner chooses)
    num_sparse: int = 26  # Criteo: 26 categorical features, one table each
    num_dense: int = 13  # Criteo: 13 integer features
    num_embeddings: int = 1000  # rows per table
    embedding_dim: int = 16
    batch_size: int = 64  # per rank
    steps: int = 20
    ids_per_feature: int = 3  # max ids in a bag (RandomRecDataset draws 0..this many)
    dense_arch: tuple[int, ...] = (32,)  # + embedding_dim as the last layer
    over_arch: tuple[int, ...] = (32,)  # + 1 as the last layer
    dcn_layers: int = 2
    dcn_low_rank: int = 4
    lr: float = 0.05
    seed: int = 0
    pipeline: str = "sparse_dist"  # one of PIPELINES
    qcomms: str = "fp32"  # precision of the pooled comms, fwd and bwd (dlrm.py --qcomms)

    def table_names(self) -> list[str]:
        return [f"t_cat_{i}" for i in range(self.num_sparse)]

    def feature_names(self) -> list[str]:
        return [f"cat_{i}" for i in range(self.num_sparse)]


@dataclass
class RunResult:
    """What one rank saw: its loss per step, throughput, where the model lives."""

    device: str
    rank: int
    world_size: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the timed steps (all but the first)
    timed_samples: int = 0  # samples (all ranks) in the timed steps
    plan: Any = None  # the ShardingPlan used
    foreign_tensors: list[str] = field(default_factory=list)  # model state off the run's device

    @property
    def samples_per_s(self) -> float:
        return self.timed_samples / self.seconds if self.seconds > 0 else float("nan")


def build_model(cfg: RunConfig, dense_device: torch.device, sparse_device: torch.device) -> Any:
    """``DLRMTrain`` around torchrec's ``DLRM`` / ``DLRM_DCN``; tables on ``sparse_device``."""
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
    from torchrec.models.dlrm import DLRM, DLRM_DCN, DLRMTrain

    tables = [
        EmbeddingBagConfig(
            name=name,
            embedding_dim=cfg.embedding_dim,
            num_embeddings=cfg.num_embeddings,
            feature_names=[feature],
        )
        for name, feature in zip(cfg.table_names(), cfg.feature_names(), strict=True)
    ]
    ebc = EmbeddingBagCollection(tables=tables, device=sparse_device)
    dense_arch = [*cfg.dense_arch, cfg.embedding_dim]
    over_arch = [*cfg.over_arch, 1]
    if cfg.model == "dlrm":
        model = DLRM(ebc, cfg.num_dense, dense_arch, over_arch, dense_device=dense_device)
    elif cfg.model == "dcn":
        model = DLRM_DCN(
            ebc,
            cfg.num_dense,
            dense_arch,
            over_arch,
            dcn_num_layers=cfg.dcn_layers,
            dcn_low_rank_dim=cfg.dcn_low_rank,
            dense_device=dense_device,
        )
    else:
        raise ValueError(f"dlrm example: model must be 'dlrm' or 'dcn', got {cfg.model!r}")
    # DLRM_DCN builds its crossnet on the default device: move what is not meta to dense_device
    return _to(DLRMTrain(model), dense_device)


def _to(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """Move every non-meta parameter and buffer to ``device`` (meta tables stay meta)."""
    for sub in module.modules():
        for name, p in list(sub.named_parameters(recurse=False)):
            if p.device.type != "meta" and p.device != device:
                setattr(sub, name, torch.nn.Parameter(p.detach().to(device), p.requires_grad))
        for name, b in list(sub.named_buffers(recurse=False)):
            if b.device.type != "meta" and b.device != device:
                sub._buffers[name] = b.to(device)
    return module


def reference_state(cfg: RunConfig) -> dict[str, torch.Tensor]:
    """The initial weights of every run of ``cfg``: the unsharded model, built on the CPU."""
    torch.manual_seed(cfg.seed)
    cpu = torch.device("cpu")
    return {k: v.detach().clone() for k, v in build_model(cfg, cpu, cpu).state_dict().items()}


def make_plan(cfg: RunConfig, model: Any, device_type: str, world_size: int) -> Any:
    """The sharding plan of torchrec's planner, each table constrained to ``cfg.sharding_type``."""
    from torchrec.distributed.planner import EmbeddingShardingPlanner
    from torchrec.distributed.planner.types import (
        KernelConfig,
        ParameterConstraints,
        TopologyFactory,
        TrainerConfig,
    )
    from torchrec.distributed.sharding_plan import get_default_sharders

    constraints = None
    if cfg.sharding_type != "auto":
        if cfg.sharding_type not in SHARDING_TYPES:
            raise ValueError(
                f"dlrm example: sharding type {cfg.sharding_type!r} is not one of "
                f"{', '.join(SHARDING_TYPES)} or 'auto'"
            )
        kernel = "dense" if cfg.sharding_type == "data_parallel" else "fused"
        # column shards of half the dimension, so column-wise sharding really splits columns
        constraints = {
            name: ParameterConstraints(
                sharding_types=[cfg.sharding_type],
                compute_kernels=[kernel],
                min_partition=max(4, cfg.embedding_dim // 2),
            )
            for name in cfg.table_names()
        }
    topology = TopologyFactory.create_topology(
        trainer_config=TrainerConfig(world_size=world_size, local_world_size=world_size),
        kernel_config=KernelConfig(compute_device=device_type),
    )
    planner = EmbeddingShardingPlanner(
        topology=topology,
        batch_size=cfg.batch_size,
        constraints=constraints,
    )
    return planner.collective_plan(model, get_default_sharders(), dist.GroupMember.WORLD)


def plan_for_device(plan: Any, device_type: str) -> Any:
    """``plan`` with every placement moved to ``device_type`` (the ranks stay)."""
    from torchrec.distributed.planner.utils import placement

    plan = copy.deepcopy(plan)
    for module_plan in plan.plan.values():
        for sharding in module_plan.values():
            spec = sharding.sharding_spec
            if spec is None:
                continue
            for shard_md in spec.shards:
                rank = shard_md.placement.rank()
                local = dist.get_world_size()
                shard_md.placement = type(shard_md.placement)(placement(device_type, rank, local))
    return plan


def shard(cfg: RunConfig, device: torch.device, plan: Any | None = None) -> tuple[Any, Any, Any]:
    """(DistributedModelParallel, optimizer, plan) for ``cfg`` on ``device``, weights loaded."""
    from torchrec.distributed import DistributedModelParallel
    from torchrec.optim import RowWiseAdagrad
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    torch.manual_seed(cfg.seed)
    model = build_model(cfg, device, torch.device("meta"))
    apply_optimizer_in_backward(
        RowWiseAdagrad, model.model.sparse_arch.parameters(), {"lr": cfg.lr}
    )
    if plan is None:
        plan = make_plan(cfg, model, device.type, dist.get_world_size())
    else:
        plan = plan_for_device(plan, device.type)
    sharders = qcomms_sharders(cfg.qcomms, device)  # None: torchrec's default sharders
    dmp = DistributedModelParallel(module=model, device=device, plan=plan, sharders=sharders)
    load_full_state(dmp, reference_state(cfg))
    dense = KeyedOptimizerWrapper(
        dict(in_backward_optimizer_filter(dmp.named_parameters())),
        lambda params: torch.optim.Adagrad(params, lr=cfg.lr),
    )
    return dmp, CombinedOptimizer([dmp.fused_optimizer, dense]), plan


@torch.no_grad()
def load_full_state(dmp: Any, full: dict[str, torch.Tensor]) -> None:
    """Copy the unsharded ``full`` state into ``dmp``'s (sharded or replicated) tensors in place."""
    from torch.distributed._shard.sharded_tensor import ShardedTensor

    state = dmp.state_dict()
    missing = sorted(set(full) - set(state))
    if missing:
        raise KeyError(f"dlrm example: the sharded model has no {missing[:3]}...")
    for key, target in state.items():
        src = full[key]
        if isinstance(target, ShardedTensor):
            for local in target.local_shards():
                offsets, sizes = local.metadata.shard_offsets, local.metadata.shard_sizes
                part = src[tuple(slice(o, o + s) for o, s in zip(offsets, sizes, strict=True))]
                local.tensor.copy_(part.to(local.tensor.device))
        elif isinstance(target, torch.Tensor):
            target.copy_(src.to(target.device))


def batches(cfg: RunConfig, rank: int, world: int = 1) -> Iterator[Any]:
    """Rank ``rank``'s slice of every step's global batch; batches on the CPU.

    A step's global batch is ``world * cfg.batch_size`` samples of torchrec's ``RandomRecDataset``
    (Criteo-shaped) seeded by ``cfg.seed`` alone, and rank ``r`` trains on samples
    ``r * B .. (r + 1) * B - 1``.  So the data of a step does not depend on how it is split: N
    ranks of batch B see the samples of one process of batch N * B, and as torchrec divides the
    embedding gradients and DDP averages the dense ones by the world size, both follow the
    gradient of the same global mean loss (the mean of the ranks' losses).
    """
    from torchrec.datasets.random import RandomRecDataset

    dataset = RandomRecDataset(
        keys=cfg.feature_names(),
        batch_size=cfg.batch_size * world,
        hash_size=cfg.num_embeddings,
        ids_per_feature=cfg.ids_per_feature,
        num_dense=cfg.num_dense,
        manual_seed=cfg.seed * 1000,
        num_batches=cfg.steps,
        num_generated_batches=min(cfg.steps, 256),  # a fresh batch every step (up to 256)
        min_ids_per_feature=0,
    )
    if world == 1:
        return iter(dataset)
    return (_samples(b, slice(rank * cfg.batch_size, (rank + 1) * cfg.batch_size)) for b in dataset)


def _samples(batch: Any, rows: slice) -> Any:
    """The samples ``rows`` of a torchrec ``Batch``: dense rows, labels and their KJT bags."""
    from torchrec.datasets.utils import Batch
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    kjt = batch.sparse_features
    lengths = kjt.lengths().view(len(kjt.keys()), -1)  # [keys, samples], key-major like values
    mine = torch.zeros(lengths.shape, dtype=torch.bool)
    mine[:, rows] = True
    keep = mine.flatten().repeat_interleave(kjt.lengths())  # each value's bag is one of ours
    weights = kjt.weights_or_none()
    sparse = KeyedJaggedTensor(
        keys=kjt.keys(),
        values=kjt.values()[keep],
        lengths=lengths[:, rows].flatten(),
        weights=None if weights is None else weights[keep],
    )
    return Batch(batch.dense_features[rows], sparse, batch.labels[rows])


def foreign_tensors(dmp: Any, optimizer: Any, device: torch.device) -> list[str]:
    """Names of parameters, buffers, state and optimizer state not on ``device``'s type."""
    from torch.distributed._shard.sharded_tensor import ShardedTensor

    out = []

    def check(name: str, t: Any) -> None:
        if isinstance(t, ShardedTensor):
            for i, s in enumerate(t.local_shards()):
                check(f"{name}[shard {i}]", s.tensor)
        elif isinstance(t, torch.Tensor) and t.device.type != device.type and t.numel() > 0:
            out.append(f"{name} on {t.device}")

    for name, t in dmp.state_dict().items():
        check(name, t)
    for name, p in dmp.named_parameters():
        check(name, p)
    for name, state in optimizer.state_dict()["state"].items():
        for k, v in state.items() if isinstance(state, dict) else []:
            if isinstance(v, torch.Tensor) and v.dim() > 0:  # dim 0: Adagrad's host step count
                check(f"optimizer {name}.{k}", v)
    return out


def train(
    cfg: RunConfig,
    device: torch.device,
    plan: Any | None = None,
    progress: Callable[[int, float], None] | None = None,
    step_hook: Callable[[int, Callable[[], Any]], Any] | None = None,
) -> RunResult:
    """Train ``cfg.steps`` steps on ``device`` in the current process group; per-rank result.

    ``progress(step, loss)`` is called after each step; ``step_hook(step, run_step)`` may wrap a
    step (the trace does), and must call ``run_step()`` and return its result.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    dmp, optimizer, plan = shard(cfg, device, plan)
    result = RunResult(device=str(device), rank=rank, world_size=world, plan=plan)
    data = batches(cfg, rank, world)
    dmp.train()
    if cfg.pipeline != "none":
        pipeline = _pipeline(cfg.pipeline, dmp, optimizer, device)

        def run_step() -> Any:
            return pipeline.progress(data)
    else:

        def run_step() -> Any:
            batch = next(data).to(device)
            optimizer.zero_grad()
            out = dmp(batch)
            out[0].backward()
            optimizer.step()
            return out

    start = 0.0
    for step in range(cfg.steps):
        if step == 1:  # the first step builds plans and caches: not timed
            _synchronize(device)
            start = time.perf_counter()
        out = step_hook(step, run_step) if step_hook is not None else run_step()
        # the step's one read: the loss, and in the same copy the data checks fbgemm_npu's
        # kernels queued during the step (a failed one raises here, naming its op)
        (loss,) = read_checks(out[0].detach())
        result.losses.append(loss)
        if progress is not None:
            progress(step, loss)
    _synchronize(device)
    if cfg.steps > 1:
        result.seconds = time.perf_counter() - start
        result.timed_samples = (cfg.steps - 1) * cfg.batch_size * world
    result.foreign_tensors = foreign_tensors(dmp, optimizer, device)
    return result


def _pipeline(name: str, dmp: Any, optimizer: Any, device: torch.device) -> Any:
    """torchrec's train pipeline ``name`` (see :data:`PIPELINES`) around ``dmp``."""
    from torchrec.distributed.train_pipeline import train_pipelines as tp

    classes = {"sparse_dist": tp.TrainPipelineSparseDist, "base": tp.TrainPipelineBase}
    if name not in classes:
        raise ValueError(f"dlrm example: pipeline must be one of {PIPELINES}, got {name!r}")
    return classes[name](dmp, optimizer, device)


def _synchronize(device: torch.device) -> None:
    if device.type != "cpu":
        torch.get_device_module(device).synchronize()
