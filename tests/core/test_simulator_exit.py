"""A process that ran a backward on the simulated npu exits cleanly, every time.

torch's autograd engine runs npu nodes on per-device worker threads, and a worker can release
its last graph task (with Python objects in it) while the main thread finalises the interpreter:
an abort ("terminate called without an active exception", exit -6/134) that
:func:`fbgemm_npu.testing.simulator._drain_autograd_device_threads` prevents (the simulator
module's docstring has the whole story).  The race is timing-dependent, so each check exits many
times and counts non-zero exits; every exit must be 0.

Each run is this file as a script: one interpreter imports torch and the simulator once, then
forks a child per exit (or a pair of ranks with a process group), which runs its backward and
leaves through normal interpreter finalisation, atexit handlers included.  The children set a
1 s GIL switch interval, which widens the race window: without the drain about 40% of them
abort, so a regression cannot hide in a CI-sized count.  The normal suite exits ``CI_RUNS``
times; the ``slow`` tests exit 100 times per kind, fresh interpreters included
(``FBGEMM_NPU_EXIT_RUNS=100 python -m pytest -m slow tests/core/test_simulator_exit.py``, some
four minutes; skipped otherwise).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# Not tests.conftest's DEVICE_KIND: this file runs as a script too, where importing it would
# load the device before the script chose how.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch_npu") is not None,
    reason="checks the simulator's exit; on a real NPU torch_npu owns the device",
)

REPO = Path(__file__).resolve().parents[2]
CI_RUNS = 10
# The hundred-exit checks take minutes, so the full suite skips them unless asked:
# FBGEMM_NPU_EXIT_RUNS=100 python -m pytest -m slow tests/core/test_simulator_exit.py
SLOW_RUNS = int(os.environ.get("FBGEMM_NPU_EXIT_RUNS", "0"))
PARALLEL = 2  # exits at a time: the race shows under load, and the machine has few cores
SWITCH_INTERVAL_S = 1.0
PAIR_DEADLINE_S = 60.0
SCRIPT_TIMEOUT_S = 600
NO_DRAIN = ["--no-drain"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["FBGEMM_NPU_SIMULATE"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _exits(*args: str) -> tuple[dict[int, int], str]:
    """Run this file as a script; ({exit status: count}, its output)."""
    done = subprocess.run(
        [sys.executable, __file__, *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("exits ")][-1]
    counts = {int(k): int(v) for k, v in (kv.split(":") for kv in line.split()[1:])}
    return counts, output


def _assert_all_clean(counts: dict[int, int], runs: int, output: str) -> None:
    assert sum(counts.values()) == runs, (counts, output[-4000:])
    assert counts == {0: runs}, f"exit statuses {counts} (-6: SIGABRT)\n{output[-4000:]}"


def test_exits_after_a_backward_are_clean() -> None:
    counts, output = _exits("single", str(CI_RUNS))
    _assert_all_clean(counts, CI_RUNS, output)


@pytest.mark.multiprocess
def test_exits_of_a_process_group_after_a_backward_are_clean() -> None:
    counts, output = _exits("pair", str(CI_RUNS // 2))
    _assert_all_clean(counts, 2 * (CI_RUNS // 2), output)


def test_the_drain_is_quick_and_leaves_the_engine_working() -> None:
    import torch

    from fbgemm_npu.testing import simulator

    _backward_on_each_device()
    names = simulator.autograd_device_threads()
    assert names is None or {"pt_autograd_0", "pt_autograd_1"} <= set(names)
    start = time.perf_counter()
    simulator._drain_autograd_device_threads()
    assert time.perf_counter() - start < simulator.DRAIN_TIMEOUT_S / 10
    _backward_on_each_device()  # the engine's workers still serve backwards
    assert torch.npu.device_count() == 2


@pytest.mark.slow
@pytest.mark.skipif(SLOW_RUNS < 2, reason="minutes long: set FBGEMM_NPU_EXIT_RUNS=100 to run")
@pytest.mark.parametrize(
    "kind", ["fresh", "fresh-pair", "single", "single-default-interval", "pair"]
)
def test_a_hundred_exits_are_clean(kind: str) -> None:
    """``SLOW_RUNS`` process exits of each kind (a pair counts two); "fresh" kinds start an
    interpreter per process, the others fork one that has imported torch and the simulator."""
    ranks = 2 if kind.endswith("pair") else 1
    counts, output = _exits(kind, str(SLOW_RUNS // ranks))
    _assert_all_clean(counts, SLOW_RUNS, output)


# --- the script: exits counted by a parent that forks (or starts) them ----------------------------


def _backward_on_each_device() -> None:
    """Per device: a layer and a Python ``autograd.Function``, as fbgemm and torchrec ops are."""
    import torch

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, t: torch.Tensor) -> torch.Tensor:
            return t * 2

        @staticmethod
        def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
            return grad * 2

    for index in range(torch.npu.device_count()):
        device = torch.device("npu", index)
        x = torch.randn(16, 8, device=device, requires_grad=True)
        layer = torch.nn.Linear(8, 4, device=device)
        Twice.apply(layer(x).relu()).sum().backward()
        assert x.grad is not None and x.grad.device == device


def _backward_in_a_group(rank: int, store: str) -> None:
    """Rank ``rank`` of 2 on ``npu:rank``: a backward through an all-reduce (a collective runs in
    the backward too, on the autograd worker), the group left for exit to tear down, as many
    training scripts leave it (a ``destroy_process_group`` after the backward would give the
    worker the GIL it needs, hiding the race)."""
    import datetime

    import torch
    import torch.distributed as dist
    import torch.distributed.nn.functional as dist_nn

    device = torch.device("npu", rank)
    torch.npu.set_device(device)
    dist.init_process_group(
        "hccl",
        init_method=f"file://{store}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=PAIR_DEADLINE_S / 2),
    )
    x = torch.full((4,), rank + 1.0, device=device, requires_grad=True)
    dist_nn.all_reduce(x * 2).sum().backward()
    assert x.grad.cpu().tolist() == [4.0] * 4, x.grad  # d/dx of sum(2x_0 + 2x_1), summed again


def _wait_all(pids: list[int], deadline: float) -> list[int]:
    """Exit statuses (``-signal`` for a signal, as subprocess reports) of ``pids``; a child still
    running at ``deadline`` is killed and counted as -9."""
    import signal

    statuses: dict[int, int] = {}
    while len(statuses) < len(pids):
        for pid in pids:
            if pid in statuses:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                statuses[pid] = os.waitstatus_to_exitcode(status)
        if len(statuses) < len(pids):
            if time.monotonic() > deadline:
                for pid in set(pids) - set(statuses):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
    return [statuses[p] for p in pids]


def _fork(work: object) -> int:
    """Fork a child that runs ``work`` and then leaves through normal finalisation."""
    pid = os.fork()
    if pid == 0:
        raise _Child(work)
    return pid


class _Child(Exception):  # noqa: N818 - control flow: unwinds the parent's frames in the child
    def __init__(self, work: object) -> None:
        super().__init__()
        self.work = work


def _count(kind: str, runs: int, no_drain: bool) -> dict[int, int]:
    counts: dict[int, int] = {}
    tmp = tempfile.mkdtemp(prefix="fbgemm_npu_exit_")
    done = 0
    while done < runs:
        batch = min(PARALLEL, runs - done)
        if kind == "fresh":  # a whole interpreter per exit: import, backward, finalisation
            cmd = [sys.executable, __file__, "one", *NO_DRAIN[:no_drain]]
            procs = [subprocess.Popen(cmd, env=_env()) for _ in range(batch)]
            statuses = [p.wait(timeout=SCRIPT_TIMEOUT_S) for p in procs]
        elif kind == "fresh-pair":  # a whole interpreter per rank
            batch = 1
            cmds = [
                [sys.executable, __file__, "rank", str(r), f"{tmp}/store{done}"] for r in range(2)
            ]
            procs = [subprocess.Popen([*cmd, *NO_DRAIN[:no_drain]], env=_env()) for cmd in cmds]
            statuses = [p.wait(timeout=SCRIPT_TIMEOUT_S) for p in procs]
        elif kind == "pair":
            batch = 1
            store = f"{tmp}/store{done}"
            pids = [_fork(("rank", rank, store)) for rank in range(2)]
            statuses = _wait_all(pids, time.monotonic() + PAIR_DEADLINE_S)
        else:
            pids = [_fork(("single",)) for _ in range(batch)]
            statuses = _wait_all(pids, time.monotonic() + PAIR_DEADLINE_S)
        for status in statuses:
            counts[status] = counts.get(status, 0) + 1
        done += batch
    return counts


def _run_child(work: tuple) -> None:
    if work[0] == "single":
        _backward_on_each_device()
    else:
        _, rank, store = work
        _backward_in_a_group(rank, store)


def _main(argv: list[str]) -> None:
    kind = argv[0]
    no_drain = NO_DRAIN[0] in argv
    if kind != "single-default-interval":
        sys.setswitchinterval(SWITCH_INTERVAL_S)  # inherited by forked children
    from fbgemm_npu.testing import simulate, simulator

    simulate()  # loaded once here; no backward in the parent, so forked children may run one
    if no_drain:  # what the exits were before the drain (to measure the race, not to test)
        import atexit

        atexit.unregister(simulator._drain_autograd_device_threads)
    if kind == "one":
        _backward_on_each_device()
        return
    if kind == "rank":
        _backward_in_a_group(int(argv[1]), argv[2])
        return
    try:
        counts = _count(kind, int(argv[1]), no_drain)
    except _Child as child:
        _run_child(child.work)
        return  # the child ends the script like any program: finalisation, atexit handlers
    print("exits " + " ".join(f"{k}:{v}" for k, v in sorted(counts.items())), flush=True)


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's deprecated c10d names
    _main(sys.argv[1:])
