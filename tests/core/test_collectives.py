"""Collectives on npu tensors across processes: the simulator's ``"hccl"`` (staged through gloo).

One pair of processes (rank r on ``npu:r``) runs every collective check, so the interpreter and
process-group start-up is paid once, under each way of naming the backend.  Each child is this
file run as a script (:func:`fbgemm_npu.testing.ranks.run_ranks`); expected values come from plain
Python lists over the inputs each rank built, never from a collective.  A failing child's log
becomes the test's failure message; a child that runs past ``JOIN_TIMEOUT_S`` is killed, and the
process groups time out after ``PG_TIMEOUT_S``, so nothing hangs.  torchrec's comm ops over the
same group are checked by ``test_collectives_torchrec.py``.

On a host with torch_npu the same checks run on the real device and its HCCL (the checks that
concern the staged group itself are skipped there).
"""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fbgemm_npu.testing.ranks import (
    check,
    check_group,
    child_args,
    columns,
    expect,
    run_ranks,
    seconds_since_launch,
)

REPO = Path(__file__).resolve().parents[2]
WORLD_SIZE = 2
PG_TIMEOUT_S = 30
# Both children, start-up included, on cores shared with others.  The simulator is already built:
# conftest.py switched it on in this process.
JOIN_TIMEOUT_S = 120

# rank0 sends [1, 2] to itself and [3] to rank 1; rank 1 sends [4] to rank 0 and [5, 6, 7] to
# itself (the uneven all_to_all of torchrec's sequence and variable-batch paths).
A2A_SENDS = {0: {0: [1, 2], 1: [3]}, 1: {0: [4], 1: [5, 6, 7]}}
TOTAL = sum(r + 1.0 for r in range(WORLD_SIZE))  # what rank r contributing r + 1 adds up to
# (backend string, bind the group to npu:r with device_id): every way of naming the backend.
BACKENDS: list[tuple[str | None, bool]] = [
    ("hccl", False),
    ("cpu:gloo,npu:hccl", False),
    (None, False),  # the simulated npu is the accelerator: its default backend is hccl
    ("hccl", True),  # init_process_group(device_id=npu:r)
]


@pytest.mark.multiprocess
def test_collectives_two_processes(tmp_path: Path) -> None:
    """Every collective, npu:0 and npu:1, under each way of naming the backend."""
    ranks = run_ranks(
        Path(__file__), tmp_path, world_size=WORLD_SIZE, timeout_s=JOIN_TIMEOUT_S, repo=REPO
    )
    if ranks.failure:
        pytest.fail(ranks.failure, pytrace=False)
    for line in ranks.last_lines():  # the children's timings, visible with -s
        print(line)


# --- the children: every check, rank r on npu:r --------------------------------------------------


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
        check(dist.all_reduce(x, op=op) is None, "all_reduce: a sync call returns None")
        expect(f"all_reduce {op}", x, columns(data, fold), device)
    ints = {0: [2, 7, -3], 1: [3, 8, -4]}  # AVG of integers truncates, as HCCL/NCCL do
    x = torch.tensor(ints[rank], device=device)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    expect("all_reduce AVG int64", x, columns(ints, lambda c: int(sum(c) / WORLD_SIZE)), device)

    x = torch.tensor(data[rank], device=device)
    work = dist.all_reduce(x, async_op=True)
    check(work.wait() is True, "all_reduce async: wait() must return True")
    future = work.get_future()
    check(future.done(), "all_reduce async: the future must be complete")
    expect("all_reduce async future", future.value()[0], columns(data, sum), device)
    expect("all_reduce async", x, columns(data, sum), device)

    cpu = torch.tensor(data[rank])  # CPU tensors go to gloo as they are
    dist.all_reduce(cpu)
    expect("all_reduce of a CPU tensor", cpu, columns(data, sum), torch.device("cpu"))


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
            check(work.wait() is True, "all_to_all_single async: wait() must return True")
            expect("all_to_all_single future", work.get_future().value()[0], expected, device)
        expect(f"all_to_all_single uneven (async_op={async_op})", out, expected, device)

    even = torch.arange(2 * WORLD_SIZE, device=device) + 10 * rank
    out = torch.empty_like(even)
    dist.all_to_all_single(out, even)
    expected = [10 * src + 2 * rank + i for src in ranks for i in range(2)]
    expect("all_to_all_single even", out, expected, device)

    outs = [torch.empty(len(A2A_SENDS[src][rank]), device=device) for src in ranks]
    ins = [torch.tensor(A2A_SENDS[rank][dst], dtype=torch.float32, device=device) for dst in ranks]
    dist.all_to_all(outs, ins)
    for src in ranks:
        expect(f"all_to_all list, from rank {src}", outs[src], A2A_SENDS[src][rank], device)


def _check_gathers(rank: int, device: Any) -> None:
    import torch
    import torch.distributed as dist

    ranks = range(WORLD_SIZE)
    outs = [torch.empty(2, device=device) for _ in ranks]
    dist.all_gather(outs, torch.tensor([rank, rank + 0.5], device=device))
    for src in ranks:
        expect(f"all_gather from rank {src}", outs[src], [src, src + 0.5], device)

    def mine(r: int) -> list[float]:  # rank r contributes r + 1 values (torchrec's all_gather_v)
        return [10.0 * r + i for i in range(r + 1)]

    outs = [torch.empty(len(mine(src)), device=device) for src in ranks]
    dist.all_gather(outs, torch.tensor(mine(rank), device=device))
    for src in ranks:
        expect(f"all_gather uneven from rank {src}", outs[src], mine(src), device)

    out = torch.empty(WORLD_SIZE, 3, device=device)
    dist.all_gather_into_tensor(out, torch.full((1, 3), float(rank), device=device))
    expect("all_gather_into_tensor", out, [[float(s)] * 3 for s in ranks], device)

    x = torch.tensor([10.0 * rank + i for i in range(3)], device=device)
    dist.broadcast(x, src=1)
    expect("broadcast from rank 1", x, [10.0, 11.0, 12.0], device)
    objects = [{"rank": rank}]
    dist.broadcast_object_list(objects, src=1)
    check(objects == [{"rank": 1}], f"broadcast_object_list: got {objects}")


def _check_reduce_scatter(rank: int, device: Any) -> None:
    import torch
    import torch.distributed as dist

    n = 2 * WORLD_SIZE
    data = {r: [(r + 1.0) * i for i in range(n)] for r in range(WORLD_SIZE)}
    total = columns(data, sum)
    mine = slice(2 * rank, 2 * rank + 2)
    for op, scale in ((dist.ReduceOp.SUM, 1), (dist.ReduceOp.AVG, WORLD_SIZE)):
        out = torch.empty(2, device=device)
        dist.reduce_scatter_tensor(out, torch.tensor(data[rank], device=device), op=op)
        expect(f"reduce_scatter_tensor {op}", out, [v / scale for v in total[mine]], device)

    # list form with uneven chunks (torchrec's reduce_scatter_v): chunk d has d + 1 values
    def chunk(r: int, d: int) -> list[float]:
        return [(r + 1.0) * (10 * d + i) for i in range(d + 1)]

    out = torch.empty(rank + 1, device=device)
    inputs = [torch.tensor(chunk(rank, d), device=device) for d in range(WORLD_SIZE)]
    dist.reduce_scatter(out, inputs)
    expected = columns({r: chunk(r, rank) for r in range(WORLD_SIZE)}, sum)
    expect("reduce_scatter list uneven", out, expected, device)


def _check_sync_and_functional(rank: int, device: Any) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.nn.functional as dist_nn

    dist.barrier()
    work = dist.barrier(async_op=True)
    check(work.wait() is True, "barrier async: wait() must return True")

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
    expect("_c10d_functional.all_to_all_single uneven", out, expected, device)
    x = torch.arange(2.0 * WORLD_SIZE, device=device) * (rank + 1)
    out = fc.wait_tensor(fc.reduce_scatter_tensor(x, "sum", WORLD_SIZE, name))
    expected = [TOTAL * (2 * rank + i) for i in range(2)]
    expect("_c10d_functional.reduce_scatter_tensor", out, expected, device)
    out = fc.wait_tensor(
        fc.all_gather_into_tensor(torch.full((2,), rank, device=device), WORLD_SIZE, name)
    )
    expect(
        "_c10d_functional.all_gather_into_tensor", out, [s for s in ranks for _ in range(2)], device
    )
    out = fc.wait_tensor(fc.all_reduce(torch.full((2,), rank + 1.0, device=device), "sum", name))
    expect("_c10d_functional.all_reduce", out, [TOTAL, TOTAL], device)

    # autograd: out[s] = x_s[rank]; with loss = sum((rank + 1) * (s + 1) * out[s]), the gradient
    # of x_r[d] is the weight rank d gives the value it got from us: (d + 1) * (r + 1).
    x = (torch.arange(2.0, device=device) + 10 * rank).requires_grad_()
    out = dist_nn.all_to_all_single(torch.empty(WORLD_SIZE, device=device), x)
    weights = torch.tensor([(rank + 1.0) * (s + 1) for s in ranks], device=device)
    (out * weights).sum().backward()
    expect(
        "nn.functional.all_to_all_single forward",
        out.detach(),
        [10.0 * s + rank for s in ranks],
        device,
    )
    expect(
        "nn.functional.all_to_all_single grad",
        x.grad,
        [(d + 1.0) * (rank + 1) for d in ranks],
        device,
    )


def _worker(rank: int, world_size: int, workdir: str) -> None:
    from fbgemm_npu.testing import collectives, simulate

    simulated = simulate() == "simulated"
    collectives.register()
    collectives.register()  # idempotent
    import torch
    import torch.distributed as dist

    device = torch.device("npu", rank)
    torch.npu.set_device(device)
    startup = seconds_since_launch()
    started = time.perf_counter()
    for i, (backend, bind) in enumerate(BACKENDS):
        dist.init_process_group(
            backend=backend,
            init_method=f"file://{workdir}/store{i}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=PG_TIMEOUT_S),
            device_id=device if bind else None,
        )
        check_group(rank, world_size, device, f"backend={backend!r}", simulated)
        if i == 0:
            _check_all_reduce(rank, device)
            _check_all_to_all(rank, device)
            _check_gathers(rank, device)
            _check_reduce_scatter(rank, device)
            _check_sync_and_functional(rank, device)
        dist.destroy_process_group()
    done = time.perf_counter()
    print(
        f"rank {rank}: collectives checks passed; start-up {startup:.1f} s, "
        f"checks {done - started:.1f} s",
        flush=True,
    )


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's deprecated c10d names
    _, rank, world_size, workdir = child_args(sys.argv[1:])
    _worker(rank, world_size, workdir)
