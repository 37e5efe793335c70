"""torchrec's DLRM and DLRM_DCN, unchanged, with DistributedModelParallel on npu: the main job.

For each model and each sharding type (data-parallel, table-wise, row-wise, column-wise,
table-row-wise, table-column-wise, and grid, which torchrec offers cuda too), in 1, 2 and 4
processes (the ``hccl`` backend: on the simulated device, fbgemm_npu's gloo-staged stand-in; rank
r on ``npu:r``), ``python -m fbgemm_npu.examples.dlrm``'s own code trains a tiny Criteo-shaped
model (26 tables x 100 rows x 8, a global batch of 8 samples per step, 3 steps) with row-wise
adagrad fused into the TBE backward, and

* the loss of every step on every rank equals the same run on the CPU with upstream fbgemm (same
  seed, weights, data and plan) within ``ATOL + RTOL * |loss|`` (1e-5 + 1e-4 * |loss|);
* with 2 and 4 processes (batch 4 and 2 per rank: slices of the same global batch), the mean of
  the ranks' losses equals the 1-process loss of every step within the same tolerance: sharding
  changes where the work runs, not what is learnt;
* a trace of the first step shows every ``fbgemm::`` op ran our npu kernel (none fell back to
  the CPU) and no floating-point tensor left the device;
* after training, no parameter, buffer, state or optimizer state is off the device;
* every npu step is counted and printed: each step's line shows the share of fbgemm_npu of the
  costliest rank, as the counters recorded it in the rank's report, priced by the 910B cost model
  (``tests/integrations/test_dlrm_steps.py`` checks what the columns count).

The 1-process runs share this process (one process group at a time); the 2- and 4-process runs
are one spawned group each that runs every (model, sharding type) in sequence, each with a fresh
DMP.  The simulator of this process has 2 devices; the launcher starts 4 ranks with
``FBGEMM_NPU_SIM_DEVICES=4``, so each child has ``npu:0 .. npu:3``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from fbgemm_npu.examples import dlrm
from fbgemm_npu.examples.dlrm_spawn import SIM_DEVICES_ENV
from fbgemm_npu.examples.dlrm_train import SHARDING_TYPES
from fbgemm_npu.testing.cost_910b import Cost, cells
from fbgemm_npu.testing.trace import trace

MODELS = ("dlrm", "dcn")
TINY = (
    "--model all --sharding-type all --steps 3 --num-embeddings 100 --embedding-dim 8 --timeout 600"
).split()
GLOBAL_BATCH = 8  # samples per step, whatever the number of processes

Reports = dict[tuple[str, str], list[dlrm.RankReport]]


def _run(extra: list[str], processes: int = 1) -> tuple[Reports, str, bool]:
    """Launch the example as the CLI would; (reports by (model, type), printed text, passed)."""
    import fbgemm_npu

    present = torch.npu.device_count()
    if fbgemm_npu.device_kind() == "real" and processes > present:  # the simulator makes more
        pytest.skip(f"{processes} processes need {processes} npu devices; this host has {present}")
    batch = ["--batch-size", str(GLOBAL_BATCH // processes), "--processes", str(processes)]
    args = dlrm.parse_args(TINY + batch + extra)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        reports = dlrm.launch(args)
        passed = dlrm.report(args, reports)
    by_run: Reports = {}
    for r in reports:
        by_run.setdefault((r.model, r.sharding_type), []).append(r)
    return by_run, out.getvalue(), passed


@pytest.fixture(scope="module")
def one_process() -> tuple[Reports, str, bool]:
    assert not dist.is_initialized(), "a test left a default process group behind"
    return _run([])


@pytest.fixture(scope="module")
def two_processes() -> tuple[Reports, str, bool]:
    return _run([], processes=2)


@pytest.fixture(scope="module")
def four_processes() -> tuple[Reports, str, bool]:
    sim_devices = os.environ.get(SIM_DEVICES_ENV)
    run = _run([], processes=4)
    assert os.environ.get(SIM_DEVICES_ENV) == sim_devices, "the launcher left its env behind"
    return run


def _check(reports: Reports, model: str, sharding_type: str, world: int) -> None:
    reps = sorted(reports[(model, sharding_type)], key=lambda r: r.rank)
    assert [r.rank for r in reps] == list(range(world))
    for r in reps:
        where = f"{model} {sharding_type} rank {r.rank}"
        assert len(r.npu_losses) == len(r.cpu_losses) == 3, where
        assert dlrm.within_tolerance(r.npu_losses, r.cpu_losses), (
            f"{where}: npu losses {r.npu_losses} vs cpu {r.cpu_losses} "
            f"(tolerance {dlrm.ATOL} + {dlrm.RTOL}*|loss|)"
        )
        assert r.trace_ok, f"{where}: trace of step 0\n{r.trace_summary}"
        assert not r.foreign, f"{where}: {r.foreign}"
        assert sharding_type in r.plan, where
        if sharding_type != "data_parallel":  # DP: no placements; else every rank holds shards
            assert all(f"npu:{rank}" in r.plan for rank in range(world)), f"{where}\n{r.plan}"


def _check_steps(run: tuple[Reports, str, bool], model: str, sharding_type: str) -> None:
    """The printed per-step table is the reports' counts: a line a step, the costliest rank."""
    reports, text, _ = run
    reps = {r.rank: r for r in reports[(model, sharding_type)]}
    block = text.split(f"[{model} {sharding_type}] per step on a 910B", 1)[1].splitlines()[2:5]
    assert [line.split()[0] for line in block] == ["0", "1", "2"], block
    for line in block:
        cols = line.split()
        step, rank = int(cols[0]), int(cols[1])
        ours = {r: Cost(**rep.step_costs[rep.steps.index(step)]) for r, rep in reps.items()}
        whole = Cost(**reps[rank].step_whole[reps[rank].steps.index(step)])
        assert ours[rank].us == max(c.us for c in ours.values()), (line, ours)
        shown = " ".join(cols[2:9])
        assert shown == " ".join((*cells(ours[rank]), f"{ours[rank].us / 1e3:.3f}")), line
        assert cols[9:] == ["|", str(whole.launches), f"{whole.us / 1e3:.3f}"], line
        assert 0 < ours[rank].launches <= whole.launches  # the TBE lookup runs every step
        # issue 10: no AI-CPU launch and no host wait from fbgemm_npu's code, on any rank
        for r, c in ours.items():
            assert (c.ai_cpu, c.syncs, c.stalls) == (0, 0, 0), (line, r, c)
        for name, value in ours[rank].as_dict().items():
            assert value <= getattr(whole, name), (line, name)


def _check_equals_one_process(
    reports: Reports, one: Reports, model: str, sharding_type: str
) -> None:
    """Each step's mean loss over the ranks (equal batches: the global batch's loss) is the
    1-process run's loss of that step."""
    ranks = [r.npu_losses for r in reports[(model, sharding_type)]]
    mean = [sum(step) / len(ranks) for step in zip(*ranks, strict=True)]
    (single,) = one[(model, sharding_type)]
    assert dlrm.within_tolerance(mean, single.npu_losses), (
        f"{model} {sharding_type}: {len(ranks)} processes' mean losses {mean} vs 1 process "
        f"{single.npu_losses}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("sharding_type", SHARDING_TYPES)
@pytest.mark.parametrize("model", MODELS)
def test_one_process_loss_matches_cpu_and_trace_is_clean(
    one_process: tuple[Reports, str, bool], model: str, sharding_type: str
) -> None:
    _check(one_process[0], model, sharding_type, world=1)
    _check_steps(one_process, model, sharding_type)


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("sharding_type", SHARDING_TYPES)
@pytest.mark.parametrize("model", MODELS)
def test_two_processes_loss_matches_one_process_and_cpu_and_trace_is_clean(
    one_process: tuple[Reports, str, bool],
    two_processes: tuple[Reports, str, bool],
    model: str,
    sharding_type: str,
) -> None:
    _check(two_processes[0], model, sharding_type, world=2)
    _check_steps(two_processes, model, sharding_type)
    _check_equals_one_process(two_processes[0], one_process[0], model, sharding_type)


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("sharding_type", SHARDING_TYPES)
@pytest.mark.parametrize("model", MODELS)
def test_four_processes_loss_matches_one_process_and_cpu_and_trace_is_clean(
    one_process: tuple[Reports, str, bool],
    four_processes: tuple[Reports, str, bool],
    model: str,
    sharding_type: str,
) -> None:
    _check(four_processes[0], model, sharding_type, world=4)
    _check_steps(four_processes, model, sharding_type)
    _check_equals_one_process(four_processes[0], one_process[0], model, sharding_type)


@pytest.mark.slow
def test_the_main_job_says_which_device_and_passes(one_process: tuple[Reports, str, bool]) -> None:
    _, text, passed = one_process
    import fbgemm_npu

    if fbgemm_npu.device_kind() == "simulated":
        assert "SIMULATED npu" in text
    assert "samples/s" in text and "max |npu - cpu|" in text
    assert passed and text.rstrip().endswith("PASSED"), text[-3000:]


# --- what the checks rest on ---------------------------------------------------------------------


@contextlib.contextmanager
def _world_of_one() -> Iterator[None]:
    assert not dist.is_initialized()
    dist.init_process_group(
        "cpu:gloo,npu:hccl",
        init_method=f"tcp://127.0.0.1:{dlrm._free_port()}",
        rank=0,
        world_size=1,
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def _tbe_modules(dmp: torch.nn.Module, cls: type) -> list:
    """The TBEs behind the sharded EBC (torchrec hides its lookups from ``named_modules``)."""
    ebc = dmp.module.model.sparse_arch.embedding_bag_collection
    tbes = []
    for lookup in ebc._lookups:
        lookup = getattr(lookup, "module", lookup)  # data-parallel lookups are wrapped in DDP
        tbes += [kernel.emb_module for kernel in lookup._emb_modules]
    assert tbes and all(isinstance(t, cls) for t in tbes), [type(t) for t in tbes]
    return tbes


@pytest.mark.parametrize("pipeline", ["base", "none"])
def test_other_loops_match_cpu_too(pipeline: str) -> None:
    """TrainPipelineBase, and a hand-written loop, give the CPU run's losses as well."""
    by_run, text, passed = _run(
        ["--model", "dlrm", "--sharding-type", "row_wise", "--pipeline", pipeline, "--no-trace"]
    )
    (rep,) = by_run[("dlrm", "row_wise")]
    assert passed and dlrm.within_tolerance(rep.npu_losses, rep.cpu_losses), text[-2000:]


def test_sparse_dist_pipeline_runs_with_its_streams_on_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    """TrainPipelineSparseDist on npu takes its accelerator path: memcpy and data-dist streams
    (distinct high-priority ``torch.Stream`` objects of the npu device), ``torch.npu.stream`` as
    its stream context, batches and collective outputs recorded on a stream, the CPU's losses."""
    from fbgemm_npu.examples import dlrm_train

    pipelines: list[tuple[torch.device, object]] = []
    make_pipeline = dlrm_train._pipeline

    def spy(name: str, dmp: torch.nn.Module, optimizer: object, device: torch.device) -> object:
        pipeline = make_pipeline(name, dmp, optimizer, device)
        pipelines.append((device, pipeline))
        return pipeline

    recorded: list[torch.Stream] = []
    record_stream = torch.Tensor.record_stream

    def recording(self: torch.Tensor, stream: torch.Stream) -> None:
        if self.device.type == "npu":
            recorded.append(stream)
        record_stream(self, stream)

    monkeypatch.setattr(dlrm_train, "_pipeline", spy)
    monkeypatch.setattr(torch.Tensor, "record_stream", recording)
    args = ["--model", "dlrm", "--sharding-type", "row_wise", "--pipeline", "sparse_dist"]
    by_run, text, passed = _run([*args, "--no-trace"])
    (rep,) = by_run[("dlrm", "row_wise")]
    assert passed and dlrm.within_tolerance(rep.npu_losses, rep.cpu_losses), text[-2000:]
    (pipeline,) = [p for device, p in pipelines if device.type == "npu"]
    memcpy, data_dist = pipeline._memcpy_stream, pipeline._data_dist_stream
    for stream in (memcpy, data_dist):
        assert isinstance(stream, torch.Stream) and stream.device.type == "npu", stream
        assert stream != torch.npu.default_stream(stream.device) and stream.priority == -1
    assert memcpy != data_dist
    assert pipeline._stream_context is torch.npu.stream
    assert recorded and {s.device.type for s in recorded} == {"npu"}


@pytest.mark.parametrize("sharding_type", ["row_wise", "data_parallel"])
def test_npu_kernels_keep_tables_and_states_in_device_memory(sharding_type: str) -> None:
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        DenseTableBatchedEmbeddingBagsCodegen,
        OptimType,
        SplitTableBatchedEmbeddingBagsCodegen,
    )
    from fbgemm_gpu.tbe.config.embedding_config import ComputeDevice

    from fbgemm_npu.examples import dlrm_train

    cfg = dlrm_train.RunConfig(
        sharding_type=sharding_type, num_sparse=3, num_embeddings=50, embedding_dim=8
    )
    with _world_of_one():
        dmp, _, _ = dlrm_train.shard(cfg, torch.device("npu", 0))
    if sharding_type == "data_parallel":
        (tbe,) = _tbe_modules(dmp, DenseTableBatchedEmbeddingBagsCodegen)
        assert not tbe.use_cpu and tbe.weights.device.type == "npu"
        return
    (tbe,) = _tbe_modules(dmp, SplitTableBatchedEmbeddingBagsCodegen)
    assert not tbe.use_cpu and tbe.optimizer == OptimType.EXACT_ROWWISE_ADAGRAD
    assert {spec[2:] for spec in tbe.embedding_specs} == {
        (EmbeddingLocation.DEVICE, ComputeDevice.CUDA)
    }
    assert tbe.weights_dev.device.type == "npu" and tbe.weights_dev.numel() == 3 * 50 * 8
    assert tbe.momentum1_dev.device.type == "npu"
    assert tbe.weights_host.numel() == 0 and tbe.weights_uvm.numel() == 0


def test_trace_flags_fallbacks_cpu_calls_and_floats_leaving_the_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fbgemm_npu._registry import REGISTRY

    lengths = torch.tensor([1, 0, 2], device="npu")
    clean = trace(lambda: torch.ops.fbgemm.asynchronous_complete_cumsum(lengths))
    assert clean.ok and clean.npu_calls == {"fbgemm.asynchronous_complete_cumsum": 1}

    name = "fbgemm::asynchronous_complete_cumsum"
    monkeypatch.setitem(REGISTRY.registered, name, [])  # as if we had no kernel for it
    fallback = trace(lambda: torch.ops.fbgemm.asynchronous_complete_cumsum(lengths))
    assert not fallback.ok and fallback.fallback_calls
    monkeypatch.undo()

    on_cpu = trace(lambda: torch.ops.fbgemm.asynchronous_complete_cumsum(lengths.cpu()))
    assert not on_cpu.ok and on_cpu.cpu_calls
    weights = torch.rand(4, device="npu")
    leaks = trace(lambda: (torch.ops.fbgemm.asynchronous_complete_cumsum(lengths), weights.cpu()))
    assert not leaks.ok and leaks.float_to_host == ["torch.float32[4] via aten._to_copy.default"]


def test_tolerance_and_flags() -> None:
    assert dlrm.within_tolerance([0.7, 0.6], [0.7 + 1e-5, 0.6])
    assert not dlrm.within_tolerance([0.7, 0.6], [0.7, 0.601])
    assert not dlrm.within_tolerance([float("nan")], [0.7])
    assert not dlrm.within_tolerance([], [])
    args = dlrm.parse_args(["--processes", "2", "--sharding-type", "row_wise", "--model", "dcn"])
    assert isinstance(args, argparse.Namespace) and dlrm._runs(args) == [("dcn", "row_wise")]
    assert len(dlrm._runs(dlrm.parse_args(TINY))) == len(MODELS) * len(SHARDING_TYPES)
    assert SHARDING_TYPES[:6] == (
        "data_parallel",
        "table_wise",
        "row_wise",
        "column_wise",
        "table_row_wise",
        "table_column_wise",
    )
    for bad in (
        ["--embedding-dim", "6"],
        ["--steps", "0"],
        ["--sharding-type", "grid"],
        ["--pipeline", "semi_sync"],
    ):
        with pytest.raises(SystemExit):
            dlrm.parse_args(bad)


def test_ranks_train_on_slices_of_one_global_batch() -> None:
    """What the 1-process equality rests on: 4 ranks' batches of 2 are, sample by sample (dense
    rows, labels, every key's bags), the 1-process batch of 8 of the same step."""
    from fbgemm_npu.examples import dlrm_train

    def cfg(batch_size: int) -> dlrm_train.RunConfig:
        return dlrm_train.RunConfig(num_sparse=3, num_embeddings=50, batch_size=batch_size, steps=2)

    whole = list(dlrm_train.batches(cfg(8), rank=0, world=1))
    parts = [list(dlrm_train.batches(cfg(2), rank=r, world=4)) for r in range(4)]
    assert len(whole) == 2 and all(len(p) == 2 for p in parts)
    for step, full in enumerate(whole):
        mine = [p[step] for p in parts]
        assert torch.equal(torch.cat([b.dense_features for b in mine]), full.dense_features)
        assert torch.equal(torch.cat([b.labels for b in mine]), full.labels)
        assert full.sparse_features.values().numel() > 0
        for key, bags in full.sparse_features.to_dict().items():
            pieces = [b.sparse_features[key] for b in mine]
            assert all(p.lengths().numel() == 2 for p in pieces), key
            assert torch.equal(torch.cat([p.lengths() for p in pieces]), bags.lengths()), key
            assert torch.equal(torch.cat([p.values() for p in pieces]), bags.values()), key
