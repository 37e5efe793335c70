"""Run a script as every rank of a small process group, for tests of collectives across processes.

The parent (a pytest test) calls :func:`run_ranks`; it starts ``python SCRIPT ARGS... RANK
WORLD_SIZE WORKDIR`` once per rank, each writing a log under ``WORKDIR``, and watches them: the
first rank to fail, or the deadline, stops the watch and every rank still running is killed, so
nothing hangs.  A failed run's :attr:`Ranks.failure` holds every rank's log (a rank whose peer
died fails with "Connection closed by peer": the message says to read the other log first).

The child parses its arguments with :func:`child_args` and checks with :func:`check` and
:func:`expect`, whose expected values come from plain Python lists, never from a collective.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Ranks",
    "check",
    "check_group",
    "child_args",
    "columns",
    "expect",
    "run_ranks",
    "seconds_since_launch",
]

# The tail of each log that a failure message quotes.
LOG_TAIL_CHARS = 6000
# When the parent launched the ranks (``time.time()``): a child's start-up includes its imports.
LAUNCHED_AT_ENV = "FBGEMM_NPU_RANKS_LAUNCHED_AT"


@dataclass(frozen=True)
class Ranks:
    """What the ranks of one run did: exit codes (``None``: killed) and their logs."""

    codes: list[int | None]
    logs: list[Path]
    timeout_s: float

    def _report(self) -> str:
        return "\n".join(
            f"----- rank {rank} ({'killed' if code is None else f'exit {code}'}) -----\n"
            f"{log.read_text()[-LOG_TAIL_CHARS:]}"
            for rank, (code, log) in enumerate(zip(self.codes, self.logs, strict=True))
        )

    @property
    def failure(self) -> str | None:
        """Why the run failed, with every rank's log; ``None`` when every rank exited 0."""
        failed = [rank for rank, code in enumerate(self.codes) if code not in (None, 0)]
        if failed:
            return (
                f"ranks {failed} exited with an error, ranks still running were killed (a rank "
                f"whose peer died fails with 'Connection closed by peer': read the other log "
                f"first).\n{self._report()}"
            )
        if any(code is None for code in self.codes):
            return (
                f"the ranks did not finish within {self.timeout_s} s and were killed.\n"
                f"{self._report()}"
            )
        return None

    def last_lines(self) -> list[str]:
        """The last line of each rank's log (the children print their timings there)."""
        return [(log.read_text().strip().splitlines() or [""])[-1] for log in self.logs]


def run_ranks(
    script: Path,
    workdir: Path,
    *args: str,
    world_size: int = 2,
    timeout_s: float = 120,
    repo: Path | None = None,
) -> Ranks:
    """Run ``script`` as ranks ``0 .. world_size - 1`` and wait at most ``timeout_s`` for all.

    ``repo`` goes first on the children's ``PYTHONPATH`` (so ``fbgemm_npu`` imports from the
    checkout); each child gets one intra-op thread unless ``OMP_NUM_THREADS`` says otherwise.
    """
    env = dict(os.environ)
    if repo is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    logs = [workdir / f"rank{rank}.log" for rank in range(world_size)]
    procs: list[subprocess.Popen[bytes]] = []
    deadline = time.monotonic() + timeout_s
    env[LAUNCHED_AT_ENV] = repr(time.time())
    try:
        for rank, log in enumerate(logs):
            with log.open("w") as out:
                cmd = [sys.executable, str(script), *args, str(rank), str(world_size), str(workdir)]
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
    return Ranks(codes, logs, timeout_s)


def child_args(argv: Sequence[str]) -> tuple[list[str], int, int, str]:
    """A child's ``(script arguments, rank, world size, workdir)`` from its ``sys.argv[1:]``."""
    *args, rank, world_size, workdir = argv
    return list(args), int(rank), int(world_size), workdir


def seconds_since_launch() -> float:
    """Seconds since :func:`run_ranks` launched this child (imports included); 0 outside it."""
    launched = os.environ.get(LAUNCHED_AT_ENV)
    return 0.0 if launched is None else time.time() - float(launched)


def check(ok: bool, what: str) -> None:
    """Fail the child with ``what`` unless ``ok`` (``assert`` would vanish under ``-O``)."""
    if not ok:
        raise AssertionError(what)


def expect(name: str, actual: Any, expected: list, device: Any) -> None:
    """``actual`` lies on ``device`` and holds exactly ``expected``."""
    check(actual.device == device, f"{name}: result on {actual.device}, expected {device}")
    got = actual.cpu().tolist()
    check(got == expected, f"{name}: got {got}, expected {expected}")


def columns(per_rank: dict[int, list], fold: Callable[[list], Any]) -> list:
    """``fold`` over the ranks' lists, element by element (what a reduction should give)."""
    return [fold(list(col)) for col in zip(*per_rank.values(), strict=True)]


def check_group(rank: int, world_size: int, device: Any, label: str, simulated: bool) -> None:
    """The default group answers: it is the staged one where the device is simulated, and an
    ``all_reduce`` of npu and of CPU tensors sums over the ranks."""
    import torch
    import torch.distributed as dist

    if simulated:
        from fbgemm_npu.testing.collectives import StagedProcessGroup

        group = dist.group.WORLD
        check(
            isinstance(group, StagedProcessGroup),
            f"{label}: the group is a {type(group).__name__}, not the staged one",
        )
    total = sum(r + 1.0 for r in range(world_size))
    x = torch.full((2,), rank + 1.0, device=device)
    dist.all_reduce(x)
    expect(f"{label}: all_reduce npu", x, [total, total], device)
    cpu = torch.full((2,), rank + 1.0)
    dist.all_reduce(cpu)
    expect(f"{label}: all_reduce CPU", cpu, [total, total], torch.device("cpu"))
