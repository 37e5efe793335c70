"""torchrec on npu without editing torchrec: the adaptation itself
(fbgemm_npu.integrations.torchrec).

* the version guard: the installed torchrec must be the one the adaptation was written for, and
  every symbol of the one table (``torchrec_symbols.SYMBOLS``) must still match torchrec's code;
* the import hook: ``import fbgemm_npu`` does not import torchrec, and the adaptation is applied
  whether torchrec is imported before or after fbgemm_npu;
* revert and apply: torchrec's own code comes back, and applying again wraps nothing twice;
* inertness: cpu and cuda answers of every adapted function are torchrec's own.

The planner on npu is tested in ``test_torchrec_planner.py``, torchrec's sparse containers on npu
in ``test_torchrec_sparse.py``.
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
from torchrec.distributed.planner.constants import HBM_CAP
from torchrec.distributed.planner.types import (
    Topology,
)
from torchrec.distributed.types import ShardingType

from fbgemm_npu.integrations import torchrec as adapt
from fbgemm_npu.integrations.torchrec_symbols import SYMBOLS, TORCHREC_VERSION

REPO = Path(__file__).resolve().parents[2]


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
