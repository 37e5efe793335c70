"""torchrec's comm ops across processes over the simulator's ``"hccl"`` (staged through gloo).

A pair of processes (rank r on ``npu:r``), each this file run as a script
(:func:`fbgemm_npu.testing.ranks.run_ranks`), runs torchrec's pooled all-to-all and uneven
reduce-scatter forward and backward; marked slow because importing torchrec costs each child
seconds.  The collectives themselves are checked by ``test_collectives.py``.  Expected values come
from plain Python lists, never from a collective; a child past ``JOIN_TIMEOUT_S`` is killed.
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fbgemm_npu.testing.ranks import (
    check_group,
    child_args,
    expect,
    run_ranks,
    seconds_since_launch,
)

REPO = Path(__file__).resolve().parents[2]
WORLD_SIZE = 2
PG_TIMEOUT_S = 30
# Both children, torchrec's import included, on cores shared with others.
JOIN_TIMEOUT_S = 120


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torchrec") is None, reason="torchrec not installed")
def test_torchrec_comm_ops_two_processes(tmp_path: Path) -> None:
    """torchrec's comm ops over the staged group (importing torchrec costs each child ~5 s)."""
    ranks = run_ranks(
        Path(__file__), tmp_path, world_size=WORLD_SIZE, timeout_s=JOIN_TIMEOUT_S, repo=REPO
    )
    if ranks.failure:
        pytest.fail(ranks.failure, pytrace=False)
    for line in ranks.last_lines():  # the children's timings, visible with -s
        print(line)


# --- the children: rank r on npu:r ---------------------------------------------------------------


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
    expect("torchrec alltoall_pooled", out.detach(), expected, device)
    expect("torchrec alltoall_pooled grad", x.grad, [[grad] * dims[rank]] * sum(batch), device)

    splits = [1, 2]  # reduce_scatter_v: rank r keeps splits[r] rows, summed over the ranks
    rows = {r: [[(r + 1.0) * (10 * i + j) for j in range(2)] for i in range(3)] for r in ranks}
    x = torch.tensor(rows[rank], device=device, requires_grad=True)
    out = comm_ops.reduce_scatter_v_pooled(x, splits).wait()
    out.sum().backward()
    mine = slice(sum(splits[:rank]), sum(splits[: rank + 1]))
    expected = [[sum(rows[r][i][j] for r in ranks) for j in range(2)] for i in range(3)][mine]
    expect("torchrec reduce_scatter_v_pooled", out.detach(), expected, device)
    expect("torchrec reduce_scatter_v_pooled grad", x.grad, [[grad] * 2] * 3, device)


def _worker(rank: int, world_size: int, workdir: str) -> None:
    from fbgemm_npu.testing import collectives, simulate

    simulated = simulate() == "simulated"
    collectives.register()
    import torch
    import torch.distributed as dist

    device = torch.device("npu", rank)
    torch.npu.set_device(device)
    startup = seconds_since_launch()
    started = time.perf_counter()
    dist.init_process_group(
        backend="hccl",
        init_method=f"file://{workdir}/store0",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=PG_TIMEOUT_S),
    )
    check_group(rank, world_size, device, "backend='hccl'", simulated)
    _check_torchrec_comm_ops(rank, device)
    dist.destroy_process_group()
    done = time.perf_counter()
    print(
        f"rank {rank}: torchrec checks passed; start-up {startup:.1f} s, "
        f"checks {done - started:.1f} s",
        flush=True,
    )


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's deprecated c10d names
    _, rank, world_size, workdir = child_args(sys.argv[1:])
    _worker(rank, world_size, workdir)
