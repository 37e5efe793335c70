"""Collectives on npu tensors across processes: the simulator's ``"hccl"`` (staged through gloo).

One pair of processes (rank r on ``npu:r``) runs every collective check, so the interpreter and
process-group start-up is paid once; a second pair, marked slow because importing torchrec costs
seconds, runs torchrec's comm ops.  Each child is this file run as a script; expected values come
from plain Python lists over the inputs each rank built, never from a collective.  A failing child's
traceback becomes the test's failure message; a child that runs past ``JOIN_TIMEOUT_S`` is killed,
and the process groups time out after ``PG_TIMEOUT_S``, so nothing hangs.

On a host with torch_npu the same checks run on the real device and its HCCL (the checks that
concern the staged group itself are skipped there).
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
WORLD_SIZE = 2
PG_TIMEOUT_S = 30
# Both children, start-up included, on cores shared with others.  The simulator is already built:
# conftest.py switched it on in this process.
JOIN_TIMEOUT_S = 120

# rank0 sends [1, 2] to itself and [3] to rank 1; rank 1 sends [4] to rank 0 and [5, 6, 7] to
# itself (the uneven all_to_all of torchrec's sequence and variable-batch paths).
A2A_SENDS = {0: {0: [1, 2], 1: [3]}, 1: {0: [4], 1: [5, 6, 7]}}
TOTAL = sum(r + 1.0 for r in range(WORLD_SIZE))  # what rank r contributing r + 1 adds up to


# --- the parent: launch, watch, report -----------------------------------------------------------


def _run_pair(tmp_path: Path, checks: str) -> None:
    """Run this file as every rank doing ``checks``; fail with their logs if one fails."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    logs = [tmp_path / f"rank{rank}.log" for rank in range(WORLD_SIZE)]
    procs: list[subprocess.Popen[bytes]] = []
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    try:
        for rank, log in enumerate(logs):
            with log.open("w") as out:
                cmd = [sys.executable, __file__, checks, str(rank), str(WORLD_SIZE), str(tmp_path)]
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env))
        while time.monotonic() < deadline:
            codes = [p.poll() for p in procs]
            if any(c not in (None, 0) for c in codes) or all(c == 0 for c in codes):
                break
            time.sleep(0.1)
    finally:
        codes = [p.poll() for p in procs]
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def report() -> str:
        return "\n".join(
            f"----- rank {rank} ({'killed' if code is None else f'exit {code}'}) -----\n"
            f"{log.read_text()[-6000:]}"
            for rank, (code, log) in enumerate(zip(codes, logs, strict=True))
        )

    failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
    if failed:
        pytest.fail(
            f"ranks {failed} exited with an error, ranks still running were killed (a rank whose "
            f"peer died fails with 'Connection closed by peer': read the other log first).\n"
            f"{report()}",
            pytrace=False,
        )
    if any(code is None for code in codes):
        pytest.fail(
            f"the ranks did not finish within {JOIN_TIMEOUT_S} s and were killed.\n{report()}",
            pytrace=False,
        )
    for log in logs:  # the children's timings, visible with -s
        print(log.read_text().strip().splitlines()[-1])


@pytest.mark.multiprocess
def test_collectives_two_processes(tmp_path: Path) -> None:
    """Every collective, npu:0 and npu:1, under each way of naming the backend."""
    _run_pair(tmp_path, "collectives")


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torchrec") is None, reason="torchrec not installed")
def test_torchrec_comm_ops_two_processes(tmp_path: Path) -> None:
    """torchrec's comm ops over the staged group (importing torchrec costs each child ~5 s)."""
    _run_pair(tmp_path, "torchrec")


# --- the children: every check, rank r on npu:r --------------------------------------------------


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(what)


def _expect(name: str, actual: Any, expected: list, device: Any) -> None:
    """``actual`` lies on ``device`` and holds exactly ``expected``."""
    _check(actual.device == device, f"{name}: result on {actual.device}, expected {device}")
    got = actual.cpu().tolist()
    _check(got == expected, f"{name}: got {got}, expected {expected}")


def _columns(per_rank: dict[int, list], fold: Callable[[list], Any]) -> list:
    return [fold(list(col)) for col in zip(*per_rank.values(), strict=True)]


def _check_all_reduce(rank: int, device: Any) -> None:
    import math

    import torch
    import torch.distributed as dist

    data = {0: [1.0, 2.0, -3.0], 1: [4.0, -5.0, 6.0]}
    folds = {
        dist.ReduceOp.SUM: sum,
        dist.ReduceOp.AVG: lambda col: sum(col) / WORLD_SIZE,
        dist.ReduceOp.MAX: max,
        dist.ReduceOp.MIN: min,
        dist.ReduceOp.PRODUCT: math.prod,
    }
    for op, fold in folds.items():
        x = torch.tensor(data[rank], device=device)
        _check(dist.all_reduce(x, op=op) is None, "all_reduce: a sync call returns None")
        _expect(f"all_reduce {op}", x, _columns(data, fold), device)
    ints = {0: [2, 7, -3], 1: [3, 8, -4]}  # AVG of integers truncates, as HCCL/NCCL do
    x = torch.tensor(ints[rank], device=device)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    _expect("all_reduce AVG int64", x, _columns(ints, lambda c: int(sum(c) / WORLD_SIZE)), device)

    x = torch.tensor(data[rank], device=device)
    work = dist.all_reduce(x, async_op=True)
    _check(work.wait() is True, "all_reduce async: wait() must return True")
    future = work.get_future()
    _check(future.done(), "all_reduce async: the future must be complete")
    _expect("all_reduce async future", future.value()[0], _columns(data, sum), device)
    _expect("all_reduce async", x, _columns(data, sum), device)

    cpu = torch.tensor(data[rank])  # CPU tensors go to gloo as they are
    dist.all_reduce(cpu)
    _expect("all_reduce of a CPU tensor", cpu, _columns(data, sum), torch.device("cpu"))


def _check_all_to_all(rank: int, device: Any) -> None:
    import torch
    import torch.distributed as dist

    ranks = range(WORLD_SIZE)
    rows = [[v, -v] for dst in ranks for v in A2A_SENDS[rank][dst]]  # 2-D: splits count rows
    in_splits = [len(A2A_SENDS[rank][dst]) for dst in ranks]
    out_splits = [len(A2A_SENDS[src][rank]) for src in ranks]
    expected = [[v, -v] for src in ranks for v in A2A_SENDS[src][rank]]
    for async_op in (False, True):
        out = torch.empty(sum(out_splits), 2, device=device)
        inp = torch.tensor(rows, dtype=torch.float32, device=device)
        work = dist.all_to_all_single(out, inp, out_splits, in_splits, async_op=async_op)
        if async_op:
            _check(work.wait() is True, "all_to_all_single async: wait() must return True")
            _expect("all_to_all_single future", work.get_future().value()[0], expected, device)
        _expect(f"all_to_all_single uneven (async_op={async_op})", out, expected, device)

    even = torch.arange(2 * WORLD_SIZE, device=device) + 10 * rank
    out = torch.empty_like(even)
    dist.all_to_all_single(out, even)
    expected = [10 * src + 2 * rank + i for src in ranks for i in range(2)]
    _expect("all_to_all_single even", out, expected, device)

    outs = [torch.empty(len(A2A_SENDS[src][rank]), device=device) for src in ranks]
    ins = [torch.tensor(A2A_SENDS[rank][dst], dtype=torch.float32, device=device) for dst in ranks]
    dist.all_to_all(outs, ins)
    for src in ranks:
        _expect(f"all_to_all list, from rank {src}", outs[src], A2A_SENDS[src][rank], device)


def _check_gathers(rank: int, device: Any) -> None:
    import torch
    import torch.distributed as dist

    ranks = range(WORLD_SIZE)
    outs = [torch.empty(2, device=device) for _ in ranks]
    dist.all_gather(outs, torch.tensor([rank, rank + 0.5], device=device))
    for src in ranks:
        _expect(f"all_gather from rank {src}", outs[src], [src, src + 0.5], device)

    def mine(r: int) -> list[float]:  # rank r contributes r + 1 values (torchrec's all_gather_v)
        return [10.0 * r + i for i in range(r + 1)]

    outs = [torch.empty(len(mine(src)), device=device) for src in ranks]
    dist.all_gather(outs, torch.tensor(mine(rank), device=device))
    for src in ranks:
        _expect(f"all_gather uneven from rank {src}", outs[src], mine(src), device)

    out = torch.empty(WORLD_SIZE, 3, device=device)
    dist.all_gather_into_tensor(out, torch.full((1, 3), float(rank), device=device))
    _expect("all_gather_into_tensor", out, [[float(s)] * 3 for s in ranks], device)

    x = torch.tensor([10.0 * rank + i for i in range(3)], device=device)
    dist.broadcast(x, src=1)
    _expect("broadcast from rank 1", x, [10.0, 11.0, 12.0], device)
    objects = [{"rank": rank}]
    dist.broadcast_object_list(objects, src=1)
    _check(objects == [{"rank": 1}], f"broadcast_object_list: got {objects}")


def _check_reduce_scatter(rank: int, device: Any) -> None:
    import torch
    import torch.distributed as dist

    n = 2 * WORLD_SIZE
    data = {r: [(r + 1.0) * i for i in range(n)] for r in range(WORLD_SIZE)}
    total = _columns(data, sum)
    mine = slice(2 * rank, 2 * rank + 2)
    for op, scale in ((dist.ReduceOp.SUM, 1), (dist.ReduceOp.AVG, WORLD_SIZE)):
        out = torch.empty(2, device=device)
        dist.reduce_scatter_tensor(out, torch.tensor(data[rank], device=device), op=op)
        _expect(f"reduce_scatter_tensor {op}", out, [v / scale for v in total[mine]], device)

    # list form with uneven chunks (torchrec's reduce_scatter_v): chunk d has d + 1 values
    def chunk(r: int, d: int) -> list[float]:
        return [(r + 1.0) * (10 * d + i) for i in range(d + 1)]

    out = torch.empty(rank + 1, device=device)
    inputs = [torch.tensor(chunk(rank, d), device=device) for d in range(WORLD_SIZE)]
    dist.reduce_scatter(out, inputs)
    expected = _columns({r: chunk(r, rank) for r in range(WORLD_SIZE)}, sum)
    _expect("reduce_scatter list uneven", out, expected, device)


def _check_sync_and_functional(rank: int, device: Any) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.nn.functional as dist_nn

    dist.barrier()
    work = dist.barrier(async_op=True)
    _check(work.wait() is True, "barrier async: wait() must return True")

    # The functional collectives (torchrec's sync path) reach the group from C++.  Called raw:
    # the Python wrappers of torch.distributed._functional_collectives import dynamo (seconds).
    ranks = range(WORLD_SIZE)
    fc = torch.ops._c10d_functional
    name = dist.group.WORLD.group_name
    in_splits = [len(A2A_SENDS[rank][dst]) for dst in ranks]
    out_splits = [len(A2A_SENDS[src][rank]) for src in ranks]
    x = torch.tensor([v for dst in ranks for v in A2A_SENDS[rank][dst]], device=device)
    out = fc.wait_tensor(fc.all_to_all_single(x, out_splits, in_splits, name))
    expected = [v for src in ranks for v in A2A_SENDS[src][rank]]
    _expect("_c10d_functional.all_to_all_single uneven", out, expected, device)
    x = torch.arange(2.0 * WORLD_SIZE, device=device) * (rank + 1)
    out = fc.wait_tensor(fc.reduce_scatter_tensor(x, "sum", WORLD_SIZE, name))
    expected = [TOTAL * (2 * rank + i) for i in range(2)]
    _expect("_c10d_functional.reduce_scatter_tensor", out, expected, device)
    out = fc.wait_tensor(
        fc.all_gather_into_tensor(torch.full((2,), rank, device=device), WORLD_SIZE, name)
    )
    _expect(
        "_c10d_functional.all_gather_into_tensor", out, [s for s in ranks for _ in range(2)], device
    )
    out = fc.wait_tensor(fc.all_reduce(torch.full((2,), rank + 1.0, device=device), "sum", name))
    _expect("_c10d_functional.all_reduce", out, [TOTAL, TOTAL], device)

    # autograd: out[s] = x_s[rank]; with loss = sum((rank + 1) * (s + 1) * out[s]), the gradient
    # of x_r[d] is the weight rank d gives the value it got from us: (d + 1) * (r + 1).
    x = (torch.arange(2.0, device=device) + 10 * rank).requires_grad_()
    out = dist_nn.all_to_all_single(torch.empty(WORLD_SIZE, device=device), x)
    weights = torch.tensor([(rank + 1.0) * (s + 1) for s in ranks], device=device)
    (out * weights).sum().backward()
    _expect(
        "nn.functional.all_to_all_single forward",
        out.detach(),
        [10.0 * s + rank for s in ranks],
        device,
    )
    _expect(
        "nn.functional.all_to_all_single grad",
        x.grad,
        [(d + 1.0) * (rank + 1) for d in ranks],
        device,
    )


def _check_torchrec_comm_ops(rank: int, device: Any) -> None:
    """torchrec's pooled all-to-all and uneven reduce-scatter (async_op=True + wait), fwd and bwd.

    torchrec's sync mode calls the functional collectives checked above, through Python wrappers
    that import dynamo (seconds): not repeated here.
    """
    import torch
    from torchrec.distributed import comm_ops

    ranks = range(WORLD_SIZE)
    batch, dims = [2, 2], [1, 2]  # rank r computes dims[r] columns for the whole batch

    def emb(s: int) -> list[list[float]]:
        return [[100.0 * s + 10 * b + j for j in range(dims[s])] for b in range(sum(batch))]

    own = range(sum(batch[:rank]), sum(batch[: rank + 1]))  # our part of the batch
    grad = 1.0 / WORLD_SIZE if comm_ops.get_gradient_division() else 1.0
    x = torch.tensor(emb(rank), device=device, requires_grad=True)
    out = comm_ops.alltoall_pooled(x, batch, dims).wait()
    out.sum().backward()
    expected = [[v for s in ranks for v in emb(s)[b]] for b in own]
    _expect("torchrec alltoall_pooled", out.detach(), expected, device)
    _expect("torchrec alltoall_pooled grad", x.grad, [[grad] * dims[rank]] * sum(batch), device)

    splits = [1, 2]  # reduce_scatter_v: rank r keeps splits[r] rows, summed over the ranks
    rows = {r: [[(r + 1.0) * (10 * i + j) for j in range(2)] for i in range(3)] for r in ranks}
    x = torch.tensor(rows[rank], device=device, requires_grad=True)
    out = comm_ops.reduce_scatter_v_pooled(x, splits).wait()
    out.sum().backward()
    mine = slice(sum(splits[:rank]), sum(splits[: rank + 1]))
    expected = [[sum(rows[r][i][j] for r in ranks) for j in range(2)] for i in range(3)][mine]
    _expect("torchrec reduce_scatter_v_pooled", out.detach(), expected, device)
    _expect("torchrec reduce_scatter_v_pooled grad", x.grad, [[grad] * 2] * 3, device)


def _check_backend_choice(rank: int, device: Any, backend: str | None, simulated: bool) -> None:
    import torch
    import torch.distributed as dist

    if simulated:
        from fbgemm_npu.testing.collectives import StagedProcessGroup

        group = dist.group.WORLD
        _check(
            isinstance(group, StagedProcessGroup),
            f"backend={backend!r}: the group is a {type(group).__name__}, not the staged one",
        )
    x = torch.full((2,), rank + 1.0, device=device)
    dist.all_reduce(x)
    _expect(f"backend={backend!r}: all_reduce npu", x, [TOTAL, TOTAL], device)
    cpu = torch.full((2,), rank + 1.0)
    dist.all_reduce(cpu)
    _expect(f"backend={backend!r}: all_reduce CPU", cpu, [TOTAL, TOTAL], torch.device("cpu"))


def _worker(checks: str, rank: int, world_size: int, workdir: str) -> None:
    start = time.perf_counter()
    from fbgemm_npu.testing import collectives, simulate

    simulated = simulate() == "simulated"
    collectives.register()
    collectives.register()  # idempotent
    import torch
    import torch.distributed as dist

    device = torch.device("npu", rank)
    torch.npu.set_device(device)
    started = time.perf_counter()
    configs: list[tuple[str | None, bool]] = [("hccl", False)]
    if checks == "collectives":
        configs += [
            ("cpu:gloo,npu:hccl", False),
            (None, False),  # the simulated npu is the accelerator: its default backend is hccl
            ("hccl", True),  # init_process_group(device_id=npu:r)
        ]
    for i, (backend, bind) in enumerate(configs):
        dist.init_process_group(
            backend=backend,
            init_method=f"file://{workdir}/store{i}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=PG_TIMEOUT_S),
            device_id=device if bind else None,
        )
        _check_backend_choice(rank, device, backend, simulated)
        if i == 0 and checks == "collectives":
            _check_all_reduce(rank, device)
            _check_all_to_all(rank, device)
            _check_gathers(rank, device)
            _check_reduce_scatter(rank, device)
            _check_sync_and_functional(rank, device)
        elif i == 0:
            _check_torchrec_comm_ops(rank, device)
        dist.destroy_process_group()
    done = time.perf_counter()
    print(
        f"rank {rank}: {checks} checks passed; start-up {started - start:.1f} s, "
        f"checks {done - started:.1f} s",
        flush=True,
    )


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's deprecated c10d names
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
