"""torchrec on npu without editing torchrec: fbgemm_npu.integrations.torchrec.

* the version guard: the installed torchrec must be the one the adaptation was written for, and
  every symbol of the one table (``torchrec_symbols.SYMBOLS``) must still match torchrec's code;
* the import hook: ``import fbgemm_npu`` does not import torchrec, and the adaptation is applied
  whether torchrec is imported before or after fbgemm_npu;
* inertness: cpu and cuda answers of every adapted function are torchrec's own;
* the planner on npu: HBM from the device (env override, default), TopologyFactory, every
  sharding type offered and planned with ``rank:r/npu:i`` placements, HBM reservations;
* torchrec's sparse containers on npu against the same calls on CPU (upstream fbgemm), each
  traced to our npu kernels: ``KeyedJaggedTensor.permute``, ``JaggedTensor.to_padded_dense``,
  ``KeyedTensor.regroup`` and ``KTRegroupAsDict`` (forward and backward).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torchrec  # noqa: F401  - imported after fbgemm_npu (conftest): the hook applies here
from torchrec.distributed.embedding_types import EmbeddingComputeKernel
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.planner import EmbeddingShardingPlanner
from torchrec.distributed.planner.constants import DDR_CAP, HBM_CAP
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
from torchrec.modules.regroup import KTRegroupAsDict
from torchrec.sparse.jagged_tensor import JaggedTensor, KeyedJaggedTensor, KeyedTensor

from fbgemm_npu.integrations import torchrec as adapt
from fbgemm_npu.integrations import torchrec_planner
from fbgemm_npu.integrations.torchrec_symbols import SYMBOLS, TORCHREC_VERSION
from fbgemm_npu.testing.trace import trace

REPO = Path(__file__).resolve().parents[1]
NPU = torch.device("npu", 0)
# The six sharding types the issue names; npu is offered them all (and grid, as cuda is).
SIX = [
    ShardingType.DATA_PARALLEL.value,
    ShardingType.TABLE_WISE.value,
    ShardingType.ROW_WISE.value,
    ShardingType.COLUMN_WISE.value,
    ShardingType.TABLE_ROW_WISE.value,
    ShardingType.TABLE_COLUMN_WISE.value,
]


# --- the version guard and the symbol table ---------------------------------------------------


def test_installed_torchrec_is_the_version_the_adaptation_was_written_for() -> None:
    installed = adapt.installed_version()
    assert installed == TORCHREC_VERSION, (
        f"torchrec {installed} is installed, but fbgemm_npu/integrations/torchrec_symbols.py was "
        f"written and checked against torchrec {TORCHREC_VERSION}: re-check every symbol listed "
        "there against the new torchrec, then update TORCHREC_VERSION"
    )


def test_every_symbol_of_the_table_matches_torchrec_and_is_applied() -> None:
    assert adapt.is_applied()
    keys = [(s.module, s.name, s.how) for s in SYMBOLS]
    assert len(keys) == len(set(keys)), "a symbol is listed twice"
    for symbol in SYMBOLS:
        _, _, stored = adapt._resolve(symbol)
        if symbol.how == "wrap":
            assert hasattr(stored, adapt._MARK) == adapt._applies(symbol), symbol.qualname
            continue
        code = adapt._function_of(stored).__code__
        extended = tuple(s | {adapt.DEVICE} for s in symbol.literals)
        if adapt._applies(symbol):  # every literal now holds npu, none is left without it
            assert adapt.extend_literals(code, extended)[1] == symbol.count, symbol.qualname
            assert adapt.extend_literals(code, symbol.literals)[1] == 0, symbol.qualname
        else:  # not applied here (streams): torchrec's literal is still where the table says
            assert adapt.extend_literals(code, symbol.literals)[1] == symbol.count, symbol.qualname


def test_streams_entries_follow_torch_npu() -> None:
    has_torch_npu = adapt.streams_enabled()
    streams = [s for s in SYMBOLS if s.when == "streams"]
    assert streams and all(adapt._applies(s) == has_torch_npu for s in streams)


def test_stream_entries_apply_where_the_device_has_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """With torch_npu (real streams) the pipelines' stream paths open to npu; revert closes them."""
    from torchrec.distributed.train_pipeline.train_pipelines import TrainPipelineSparseDist

    init = adapt._function_of(TrainPipelineSparseDist.__dict__["__init__"])
    npu_in_init = (frozenset({"cuda", "mtia", "npu"}),)
    try:
        adapt.revert()
        monkeypatch.setattr(adapt, "streams_enabled", lambda: True)
        adapt.apply()
        assert adapt.is_applied()
        assert adapt.extend_literals(init.__code__, npu_in_init)[1] == 1
    finally:
        adapt.revert()
        monkeypatch.undo()
        adapt.apply()
    assert adapt.is_applied()
    assert adapt.extend_literals(init.__code__, npu_in_init)[1] == int(adapt.streams_enabled())


def test_thread_wrappers_make_the_npu_device_current() -> None:
    from types import SimpleNamespace

    from fbgemm_npu.integrations import torchrec_kernels

    seen: list[int] = []
    init = torchrec_kernels.thread_device_init(lambda d: seen.append(torch.npu.current_device()))
    run = torchrec_kernels.thread_device_run(lambda s: seen.append(torch.npu.current_device()))
    try:
        init(torch.device("npu", 1))
        torch.npu.set_device(0)
        run(SimpleNamespace(_device=torch.device("npu", 1)))
        torch.npu.set_device(0)
        init(torch.device("cpu"))
    finally:
        torch.npu.set_device(0)
    assert seen == [1, 1, 0]


def test_extend_literals_counts_and_keeps_other_constants() -> None:
    def f(d: str) -> tuple[bool, bool, bool]:
        return d in {"cuda", "mtia"}, d in ("cuda", "mtia"), d in {"cuda"}

    code, n = adapt.extend_literals(f.__code__, (frozenset({"cuda", "mtia"}),))
    assert n == 2
    g = type(f)(code, f.__globals__)
    assert g("npu") == (True, True, False) and g("cpu") == (False, False, False)
    assert f("npu") == (False, False, False)  # the original is untouched


def test_revert_restores_torchrec_and_apply_reinstalls() -> None:
    sharder = EmbeddingBagCollectionSharder()
    try:
        adapt.revert()
        assert not adapt.is_applied()
        with pytest.raises(AssertionError, match="unsupported compute device npu"):
            Topology(world_size=1, compute_device="npu")
        assert ShardingType.ROW_WISE.value not in sharder.sharding_types("npu")
    finally:
        adapt.apply()
    assert adapt.is_applied()
    assert ShardingType.ROW_WISE.value in sharder.sharding_types("npu")
    adapt.apply()  # idempotent: nothing wrapped twice
    assert Topology(world_size=1, compute_device="npu").compute_device == "npu"


@pytest.mark.slow
def test_hook_applies_whether_torchrec_is_imported_before_or_after() -> None:
    check = (
        "from fbgemm_npu.integrations import torchrec as t; "
        "assert t.is_applied(), 'not applied'; print('applied')"
    )
    after = "import sys, fbgemm_npu; assert 'torchrec' not in sys.modules; import torchrec; "
    before = "import torchrec, fbgemm_npu; "
    env = dict(os.environ, PYTHONPATH=str(REPO), FBGEMM_NPU_SIMULATE="0")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", order + check],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for order in (after, before)
    ]
    for name, p in zip(("after", "before"), procs, strict=True):
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0 and "applied" in out, f"torchrec imported {name}:\n{out[-3000:]}"


# --- inert for cpu and cuda -------------------------------------------------------------------


def test_cpu_and_cuda_answers_are_torchrecs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchrec.distributed.planner import utils as planner_utils
    from torchrec.distributed.planner.constants import kernel_bw_lookup
    from torchrec.distributed.utils import get_device_type

    cpu = Topology(world_size=2, compute_device="cpu")
    cuda = Topology(world_size=2, compute_device="cuda")
    assert [d.storage.hbm for d in cpu.devices] == [0, 0]
    assert [d.storage.hbm for d in cuda.devices] == [HBM_CAP, HBM_CAP]
    assert planner_utils.placement("cpu", 1, 2) == "rank:1/cpu"
    assert planner_utils.placement("cuda", 3, 2) == "rank:3/cuda:1"
    sharder = EmbeddingBagCollectionSharder()
    assert sharder.sharding_types("cpu") == [
        ShardingType.DATA_PARALLEL.value,
        ShardingType.TABLE_WISE.value,
        ShardingType.COLUMN_WISE.value,
        ShardingType.TABLE_COLUMN_WISE.value,
    ]
    assert EmbeddingComputeKernel.FUSED_UVM_CACHING.value in sharder.compute_kernels(
        ShardingType.ROW_WISE.value, "cuda"
    )
    bw = (1000.0, 100.0, 10.0)
    raw = kernel_bw_lookup.__wrapped__
    for device in ("cpu", "cuda", "mtia"):
        for kernel in ("dense", "fused", "fused_uvm_caching"):
            assert kernel_bw_lookup(device, kernel, *bw) == raw(device, kernel, *bw)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert get_device_type() == "cuda"


# --- the planner on npu -------------------------------------------------------------------------


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


# --- torchrec's sparse containers on npu, against CPU ------------------------------------------


def _assert_traced_to_our_kernels(fn: object) -> object:
    rec = trace(fn)  # type: ignore[arg-type]
    assert rec.ok, rec.summary()
    return rec.result


def _kjt() -> KeyedJaggedTensor:
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 4, (3 * 5,), generator=g)
    n = int(lengths.sum())
    return KeyedJaggedTensor(
        keys=["a", "b", "c"],
        values=torch.randint(0, 100, (n,), generator=g),
        lengths=lengths,
        weights=torch.rand(n, generator=g),
    )


def test_kjt_permute_on_npu_equals_cpu() -> None:
    cpu = _kjt()
    npu = cpu.to(NPU)
    order = [2, 0, 1, 2]
    want = cpu.permute(order)
    got = _assert_traced_to_our_kernels(lambda: npu.permute(order))
    assert got.keys() == want.keys() and got.values().device == NPU
    for name in ("values", "lengths", "weights", "offsets"):
        assert torch.equal(getattr(got, name)().cpu(), getattr(want, name)()), name


def test_jagged_tensor_to_padded_dense_on_npu_equals_cpu() -> None:
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([2, 0, 3, 1, 5])
    values = torch.rand(int(lengths.sum()), generator=g)
    cpu = JaggedTensor(values=values, lengths=lengths)
    npu = JaggedTensor(values=values.to(NPU), lengths=lengths.to(NPU))
    for desired in (1, 3, 6):
        want = cpu.to_padded_dense(desired_length=desired, padding_value=-1.5)
        got = _assert_traced_to_our_kernels(
            lambda d=desired: npu.to_padded_dense(desired_length=d, padding_value=-1.5)
        )
        assert got.device == NPU and torch.equal(got.cpu(), want), desired


def _kts(device: torch.device) -> list[KeyedTensor]:
    g = torch.Generator().manual_seed(2)
    specs = [(["a", "b"], [3, 4]), (["c", "d", "e"], [2, 4, 1])]
    out = []
    for keys, lengths in specs:
        values = torch.rand(5, sum(lengths), generator=g).to(device).requires_grad_()
        out.append(KeyedTensor(keys=keys, length_per_key=lengths, values=values))
    return out


GROUPS = [["e", "a"], ["c", "b", "d"]]
GROUP_WIDTHS = [1 + 3, 2 + 4 + 4]  # the key lengths of _kts, group by group


def _regroup_and_grads(device: torch.device, fn: object) -> list[torch.Tensor]:
    """Outputs of ``fn`` on the KeyedTensors, then the gradients of their values (on device)."""
    kts = _kts(device)
    g = torch.Generator().manual_seed(3)
    weights = [torch.rand(5, width, generator=g).to(device) for width in GROUP_WIDTHS]

    def run() -> list[torch.Tensor]:
        outs = list(fn(kts))  # type: ignore[operator]
        sum((o * w).sum() for o, w in zip(outs, weights, strict=True)).backward()
        return [o.detach() for o in outs] + [kt.values().grad for kt in kts]

    return _assert_traced_to_our_kernels(run) if device.type == "npu" else run()


def test_keyed_tensor_regroup_on_npu_equals_cpu_forward_and_backward() -> None:
    def regroup(kts: list[KeyedTensor]) -> list[torch.Tensor]:
        return KeyedTensor.regroup(kts, GROUPS)

    want = _regroup_and_grads(torch.device("cpu"), regroup)
    got = _regroup_and_grads(NPU, regroup)
    for a, b in zip(got, want, strict=True):
        assert a.device == NPU and torch.equal(a.cpu(), b)


def test_kt_regroup_as_dict_on_npu_equals_cpu_forward_and_backward() -> None:
    keys = ["first", "second"]

    def run(device: torch.device) -> list[torch.Tensor]:
        module = KTRegroupAsDict(groups=GROUPS, keys=keys)
        return _regroup_and_grads(device, lambda kts: [module(kts)[k] for k in keys])

    want = run(torch.device("cpu"))
    got = run(NPU)
    for a, b in zip(got, want, strict=True):
        assert a.device == NPU and torch.equal(a.cpu(), b)
