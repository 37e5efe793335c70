"""Quantized comms in DMP training on npu: torchrec's ``QCommsConfig`` over the ``hccl`` backend.

Two processes (this file run as a script by :func:`fbgemm_npu.testing.ranks.run_ranks`; rank r on
``npu:r``, the simulated ``hccl``: fbgemm_npu's gloo-staged stand-in) train torchrec's ``DLRM``
(:mod:`fbgemm_npu.examples.dlrm_train`'s model, plan, weights and data: 4 tables x 100 rows x 8, 4
samples per rank, 3 steps, row-wise adagrad fused into the TBE backward) wrapped in
``DistributedModelParallel`` whose ``EmbeddingBagCollectionSharder`` carries the codecs of
``get_qcomm_codecs_registry(QCommsConfig(fwd, bwd))``, for table-wise (pooled all-to-all) and
row-wise (pooled reduce-scatter) sharding, and compares each step's loss with the unquantized
(FP32) npu run of the same model, weights and data:

* FP16 and BF16, forward and backward (upstream's codecs: a clamp and a cast, plain ATen ops);
* INT8 forward of the table-wise all-to-all (upstream's ``FloatToFused8BitRowwiseQuantized`` /
  ``Fused8BitRowwiseQuantizedToFloat``: a trace of step 0 shows both ran our npu kernels and no
  ``fbgemm::`` op fell back to the CPU).

Tolerance, per precision: ``|loss_q - loss_fp32| <= QTOL[q] * (1 + |loss_fp32|)`` with QTOL 1e-5
(FP16), 1e-4 (BF16), 2e-3 (INT8).  Why: each pooled embedding is rounded once per all-to-all /
reduce-scatter to a relative 2**-11 (FP16) or 2**-8 (BF16, 8x coarser), or to 1/255 of its row's
range (INT8: coarser still for rows of small and large values); through the interaction, MLPs
and 3 steps of adagrad at lr 0.05 the loss (about 0.7) moved by at most 4e-7 (FP16), 9e-6 (BF16)
and 3.4e-4 (INT8) here, so the bounds leave 10-40x room for another summation order on an
Ascend host while a codec that drops or scrambles rows (a loss off by O(0.01-0.1)) fails.  And
each quantized run must differ from FP32 at some step (the codec really ran: the FP32 losses are
bit-identical run to run), its step-0 trace must be clean (every ``fbgemm::`` op on our npu
kernels, no float tensor off the device), and INT8's must show the two row-wise ops.  INT8 is
not run row-wise: its pooled output is a reduce-scatter, which cannot sum fused int8 rows.
About 20 s (two children that import torchrec and build 7 DMPs each): not marked slow.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fbgemm_npu.testing.ranks import child_args, run_ranks

REPO = Path(__file__).resolve().parents[2]
WORLD_SIZE = 2
JOIN_TIMEOUT_S = 300
QTOL = {"fp16": 1e-5, "bf16": 1e-4, "int8": 2e-3}
# (sharding type, forward, backward, comm ops: None = torchrec's default list)
RUNS: list[tuple[str, str, str, list[str] | None]] = [
    ("table_wise", "fp32", "fp32", None),
    ("table_wise", "fp16", "fp16", None),
    ("table_wise", "bf16", "bf16", None),
    ("table_wise", "int8", "fp32", ["POOLED_EMBEDDINGS_ALL_TO_ALL"]),
    ("row_wise", "fp32", "fp32", None),
    ("row_wise", "fp16", "fp16", None),
    ("row_wise", "bf16", "bf16", None),
]


def _key(run: tuple[str, str, str, list[str] | None]) -> str:
    return f"{run[0]}:{run[1]}/{run[2]}"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("qcomms")
    ranks = run_ranks(
        Path(__file__), workdir, world_size=WORLD_SIZE, timeout_s=JOIN_TIMEOUT_S, repo=REPO
    )
    if ranks.failure:
        pytest.fail(ranks.failure, pytrace=False)
    return {r: json.loads((workdir / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)}


pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(
        importlib.util.find_spec("torchrec") is None, reason="torchrec not installed"
    ),
]


@pytest.mark.parametrize("run", [r for r in RUNS if r[1] != "fp32"], ids=_key)
def test_quantized_losses_follow_the_fp32_run(
    results: dict[str, Any], run: tuple[str, str, str, list[str] | None]
) -> None:
    for rank, res in results.items():
        base = res[_key((run[0], "fp32", "fp32", None))]["losses"]
        got = res[_key(run)]["losses"]
        assert len(got) == len(base) == 3
        tol = QTOL[run[1]]
        for q, f in zip(got, base, strict=True):
            assert abs(q - f) <= tol * (1 + abs(f)), f"rank {rank} {_key(run)}: {got} vs {base}"
        assert res[_key(run)]["trace_ok"], res[_key(run)]["trace"]
    assert any(
        res[_key(run)]["losses"] != res[_key((run[0], "fp32", "fp32", None))]["losses"]
        for res in results.values()
    ), f"{_key(run)}: bit-identical to FP32 on every rank: the codec did not run"


@pytest.mark.parametrize("sharding_type", ["table_wise", "row_wise"])
def test_the_codecs_are_in_the_sharded_output_dist(
    results: dict[str, Any], sharding_type: str
) -> None:
    """The sharded EBC's pooled output dist (all-to-all table-wise, reduce-scatter row-wise)
    holds the registry's codec of the run's precision, and none in the FP32 run."""
    dist_type = {
        "table_wise": "PooledEmbeddingsAllToAll",
        "row_wise": "PooledEmbeddingsReduceScatter",
    }
    for res in results.values():
        for prec in ("fp16", "bf16"):
            used = res[f"{sharding_type}:{prec}/{prec}"]["codecs"]
            assert [dist_type[sharding_type], prec, prec] in used, used
            assert all(u[1:] == [prec, prec] for u in used), used
        assert res[f"{sharding_type}:fp32/fp32"]["codecs"] == [], res


def test_int8_ran_the_rowwise_quantize_ops_on_our_npu_kernels(results: dict[str, Any]) -> None:
    for res in results.values():
        calls = res["table_wise:int8/fp32"]["npu_calls"]
        assert calls.get("fbgemm.FloatToFused8BitRowwiseQuantized", 0) > 0, calls
        assert calls.get("fbgemm.Fused8BitRowwiseQuantizedToFloat", 0) > 0, calls


# --- the children: rank r on npu:r ---------------------------------------------------------------


def _train(run: tuple[str, str, str, list[str] | None], device: Any) -> dict[str, Any]:
    """3 steps of DLRM under DMP with ``run``'s codecs; losses, step 0's trace, the codecs."""
    import torch
    import torch.distributed as dist
    from torchrec.distributed import DistributedModelParallel
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.fbgemm_qcomm_codec import (
        CommType,
        QCommsConfig,
        get_qcomm_codecs_registry,
    )
    from torchrec.distributed.types import CommOp
    from torchrec.optim import RowWiseAdagrad
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    from fbgemm_npu.examples import dlrm_train
    from fbgemm_npu.testing.trace import trace

    sharding_type, fwd, bwd, ops = run
    cfg = dlrm_train.RunConfig(
        sharding_type=sharding_type, num_sparse=4, num_embeddings=100, embedding_dim=8,
        batch_size=4, steps=3, pipeline="none",
    )  # fmt: skip
    registry = None
    if fwd != "fp32" or bwd != "fp32":
        registry = get_qcomm_codecs_registry(
            QCommsConfig(forward_precision=CommType(fwd), backward_precision=CommType(bwd)),
            comm_ops=None if ops is None else [CommOp[o] for o in ops],
            device=device,
        )
    torch.manual_seed(cfg.seed)
    model = dlrm_train.build_model(cfg, device, torch.device("meta"))
    apply_optimizer_in_backward(
        RowWiseAdagrad, model.model.sparse_arch.parameters(), {"lr": cfg.lr}
    )
    plan = dlrm_train.make_plan(cfg, model, device.type, dist.get_world_size())
    sharder = EmbeddingBagCollectionSharder(qcomm_codecs_registry=registry)
    dmp = DistributedModelParallel(module=model, device=device, plan=plan, sharders=[sharder])
    dlrm_train.load_full_state(dmp, dlrm_train.reference_state(cfg))
    dense = KeyedOptimizerWrapper(
        dict(in_backward_optimizer_filter(dmp.named_parameters())),
        lambda params: torch.optim.Adagrad(params, lr=cfg.lr),
    )
    optimizer = CombinedOptimizer([dmp.fused_optimizer, dense])
    data = dlrm_train.batches(cfg, dist.get_rank(), dist.get_world_size())
    dmp.train()

    def step() -> Any:
        batch = next(data).to(device)
        optimizer.zero_grad()
        out = dmp(batch)
        out[0].backward()
        optimizer.step()
        return out

    out: dict[str, Any] = {"losses": []}
    for i in range(cfg.steps):
        if i == 0:
            traced = trace(step)
            result = traced.result
            out["npu_calls"] = dict(traced.npu_calls)
            out["trace_ok"], out["trace"] = traced.ok, traced.summary()
        else:
            result = step()
        out["losses"].append(float(result[0].detach().cpu()))
    # [comm module, forward, backward precision] of every codec in use (the dists are built lazily)
    out["codecs"] = [
        [
            type(m).__name__,
            str(c.forward._comm_precision.value),
            str(c.backward._comm_precision.value),
        ]
        for owner in dmp.modules()  # the sharded EBC keeps its output dists in a plain list
        for m in (d for od in getattr(owner, "_output_dists", []) for d in od.modules())
        if (c := getattr(m, "_codecs", None)) is not None
    ]
    return out


def _worker(rank: int, world_size: int, workdir: str) -> None:
    from fbgemm_npu.testing import collectives, simulate

    simulate()
    collectives.register()
    import torch
    import torch.distributed as dist

    device = torch.device("npu", rank)
    torch.npu.set_device(device)
    dist.init_process_group(
        backend="cpu:gloo,npu:hccl",
        init_method=f"file://{workdir}/store0",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=JOIN_TIMEOUT_S),
    )
    try:
        res = {_key(run): _train(run, device) for run in RUNS}
    finally:
        dist.destroy_process_group()
    Path(workdir, f"rank{rank}.json").write_text(json.dumps(res))
    print(f"rank {rank}: {json.dumps({k: v['losses'] for k, v in res.items()})}", flush=True)


if __name__ == "__main__":
    import logging
    import os
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("torchrec").setLevel(logging.ERROR)
    _, rank, world_size, workdir = child_args(sys.argv[1:])
    os.environ["LOCAL_WORLD_SIZE"] = str(world_size)
    _worker(rank, world_size, workdir)


def test_the_example_option_builds_the_same_codecs() -> None:
    """``python -m fbgemm_npu.examples.dlrm --qcomms bf16``: the run's config carries it, and its
    sharder holds BF16 codecs fwd and bwd for the pooled comms (fp32: torchrec's defaults)."""
    import torch

    from fbgemm_npu.examples import dlrm

    args = dlrm.parse_args(["--qcomms", "bf16"])
    assert dlrm._config(args, "dlrm", "row_wise").qcomms == "bf16"
    assert dlrm.qcomms_sharders("fp32", torch.device("npu")) is None
    (sharder,) = dlrm.qcomms_sharders("bf16", torch.device("npu"))
    codecs = sharder.qcomm_codecs_registry["POOLED_EMBEDDINGS_ALL_TO_ALL"]
    assert codecs.forward._comm_precision.value == codecs.backward._comm_precision.value == "bf16"
