"""torchrec's planner on npu (fbgemm_npu.integrations.torchrec_planner), torchrec unchanged.

HBM from the device (env override, default when the device reports none), TopologyFactory, every
sharding type offered and planned with ``rank:r/npu:i`` placements, dense and input storage
reserved in npu HBM.
"""

from __future__ import annotations

import pytest
import torch
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.planner import EmbeddingShardingPlanner
from torchrec.distributed.planner.constants import DDR_CAP
from torchrec.distributed.planner.enumerators import EmbeddingEnumerator
from torchrec.distributed.planner.types import (
    KernelConfig,
    ParameterConstraints,
    Topology,
    TopologyFactory,
    TrainerConfig,
)
from torchrec.distributed.types import ShardingType
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection

from fbgemm_npu.integrations import torchrec_planner

# The six sharding types the issue names; npu is offered them all (and grid, as cuda is).
SIX = [
    ShardingType.DATA_PARALLEL.value,
    ShardingType.TABLE_WISE.value,
    ShardingType.ROW_WISE.value,
    ShardingType.COLUMN_WISE.value,
    ShardingType.TABLE_ROW_WISE.value,
    ShardingType.TABLE_COLUMN_WISE.value,
]


def test_npu_topology_hbm_comes_from_the_device() -> None:
    topo = Topology(world_size=2, compute_device="npu")
    total = torch.npu.mem_get_info()[1]
    assert topo.compute_device == "npu"
    assert [d.storage.hbm for d in topo.devices] == [total, total]
    assert [d.storage.ddr for d in topo.devices] == [DDR_CAP, DDR_CAP]
    assert Topology(world_size=1, compute_device="npu", hbm_cap=123).devices[0].storage.hbm == 123


def test_npu_hbm_env_override_default_and_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(torchrec_planner.HBM_ENV, str(5 * 1024**3))
    assert Topology(world_size=1, compute_device="npu").devices[0].storage.hbm == 5 * 1024**3
    monkeypatch.setenv(torchrec_planner.HBM_ENV, "lots")
    with pytest.raises(ValueError, match="FBGEMM_NPU_HBM_BYTES='lots'"):
        Topology(world_size=1, compute_device="npu")
    monkeypatch.delenv(torchrec_planner.HBM_ENV)

    def no_info(device: object = None) -> tuple[int, int]:
        raise RuntimeError("this device reports no memory")

    monkeypatch.setattr(torch.npu, "mem_get_info", no_info)
    topo = Topology(world_size=1, compute_device="npu")
    assert topo.devices[0].storage.hbm == torchrec_planner.DEFAULT_HBM_BYTES


def test_topology_factory_accepts_npu() -> None:
    topo = TopologyFactory.create_topology(
        trainer_config=TrainerConfig(world_size=2, local_world_size=2),
        kernel_config=KernelConfig(compute_device="npu"),
    )
    assert topo.compute_device == "npu"
    assert topo.devices[1].storage.hbm == torch.npu.mem_get_info()[1]


def _ebc(num_tables: int = 4, dim: int = 16, rows: int = 64) -> EmbeddingBagCollection:
    tables = [
        EmbeddingBagConfig(
            name=f"t{i}", embedding_dim=dim, num_embeddings=rows, feature_names=[f"f{i}"]
        )
        for i in range(num_tables)
    ]
    return EmbeddingBagCollection(tables=tables, device=torch.device("meta"))


def test_npu_is_offered_every_sharding_type_with_hbm_kernels_only() -> None:
    sharder = EmbeddingBagCollectionSharder()
    offered = sharder.sharding_types("npu")
    assert set(SIX) <= set(offered)
    assert sharder.compute_kernels(ShardingType.DATA_PARALLEL.value, "npu") == ["dense"]
    for st in SIX[1:]:
        assert sharder.compute_kernels(st, "npu") == ["fused"]
    topo = Topology(world_size=2, compute_device="npu", local_world_size=2)
    options = EmbeddingEnumerator(topology=topo, batch_size=32).enumerate(_ebc(), [sharder])
    assert set(SIX) <= {o.sharding_type for o in options}
    assert {o.compute_kernel for o in options} <= {"dense", "fused"}


@pytest.mark.parametrize("sharding_type", SIX)
def test_planner_plans_each_sharding_type_on_npu(sharding_type: str) -> None:
    kernel = "dense" if sharding_type == ShardingType.DATA_PARALLEL.value else "fused"
    constraints = {
        f"t{i}": ParameterConstraints(
            sharding_types=[sharding_type], compute_kernels=[kernel], min_partition=8
        )
        for i in range(4)
    }
    topo = Topology(world_size=2, compute_device="npu", local_world_size=2)
    planner = EmbeddingShardingPlanner(topology=topo, batch_size=32, constraints=constraints)
    plan = planner.plan(_ebc(), [EmbeddingBagCollectionSharder()])
    module_plan = plan.plan[""]
    for name, ps in module_plan.items():
        assert (ps.sharding_type, ps.compute_kernel) == (sharding_type, kernel), name
        if ps.sharding_spec is not None:
            for shard in ps.sharding_spec.shards:
                rank = shard.placement.rank()
                assert str(shard.placement) == f"rank:{rank}/npu:{rank % 2}", name


def test_planner_reserves_dense_and_input_storage_in_npu_hbm() -> None:
    from torchrec.distributed.planner.storage_reservations import (
        _get_kjt_storage,
        _reserve_dense_storage,
    )

    dense = torch.nn.Linear(64, 64)
    topo = Topology(world_size=1, compute_device="npu")
    before = topo.devices[0].storage.hbm
    reserved = _reserve_dense_storage(topo, dense, set(), 1.0)
    assert reserved.hbm > 0 and reserved.ddr == 0
    assert topo.devices[0].storage.hbm == before - reserved.hbm
    kjt = _get_kjt_storage(topo, [100.0], 8, 2)
    assert kjt.hbm > 0 and kjt.ddr == 0
