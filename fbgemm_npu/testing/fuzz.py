"""The hostile-input fuzz harness: hypothesis draws cases, a worker subprocess runs them.

A fuzz test is a function of hypothesis' ``st.data()`` that returns one :class:`Case` or a list
of them, decorated with :func:`fuzz_test` and the op family it belongs to::

    @fuzz_test("cumsum")
    def test_fuzz_complete_cumsum(data) -> Case:
        t = data.draw(...)                                   # CPU tensors, any layout
        return Case("fbgemm::asynchronous_complete_cumsum", (t,), label="valid")

What a case checks (docs/design.md rule 9), with validation at its default:

- ``expect="equal"`` (valid input): ours, on npu, equals the oracle: upstream's CPU kernel (the
  same target on contiguous CPU copies) or ``oracle="module:function"``, a reference.  Outputs and
  every tensor argument after the call (in-place updates) are compared: integers exactly, floats
  at ``rtol`` / ``atol`` (default per dtype); ``grad`` names inputs whose gradients of
  ``sum(out * w)`` (``w`` seeded) are compared too.
- ``expect="error"`` (invalid input): ours raises a ValueError / RuntimeError / TypeError /
  IndexError / NotImplementedError whose message names the op (its short name) and one of
  ``names`` (the argument).  Returning a result counts as *wrong*: silently accepted.
- ``expect="equal_or_error"``: an input with no contract (e.g. upstream accepts it silently):
  a clear error, or a result equal to the oracle's.

Placement: every CPU tensor of the case goes to ``npu:0`` with its exact strides, storage offset
and stride-0 dims (build non-contiguous, transposed or expanded inputs on CPU); ``On(t, "cpu")``
or ``On(t, "npu:1")`` places one elsewhere.  Every case runs in a worker subprocess
(:mod:`fbgemm_npu.testing.fuzz_worker`): a crash or a hang (:data:`TIMEOUT_S`) costs the worker,
which is restarted, and fails the case.

Sizes: ``FBGEMM_NPU_FUZZ_CASES`` cases per family (default :data:`CI_CASES`: the CI size, a few
minutes for the whole suite), split evenly among the family's fuzz tests; the long mode,
``bash scripts/fuzz.sh --long``, runs 10,000 per family.  The tally of every outcome per family
is printed at the end of the session (``tests/fuzz/conftest.py``) and written as JSON to
``FBGEMM_NPU_FUZZ_REPORT`` when that is set.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import pickle
import select
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fbgemm_npu.testing import fuzz_worker
from fbgemm_npu.testing.fuzz_worker import CLEAR_ERROR, CRASH, EQUAL, HANG, HEADER, KINDS

CI_CASES = 300  # per family, the CI size
LONG_CASES = 10_000  # per family, the long mode
TIMEOUT_S = float(os.environ.get("FBGEMM_NPU_FUZZ_TIMEOUT", 60))  # longer: a hang
STARTUP_S = 300.0  # a fresh worker's imports (torch, fbgemm_gpu, the simulator), on a loaded host
GOOD = (EQUAL, CLEAR_ERROR)

__all__ = ["CI_CASES", "LONG_CASES", "Case", "On", "TALLY", "fuzz_test", "report", "worker"]


@dataclasses.dataclass(frozen=True)
class On:
    """A tensor argument placed on ``device`` (``"cpu"``, ``"npu:1"``, ...) on our side."""

    tensor: torch.Tensor
    device: str


@dataclasses.dataclass
class Case:
    """One call: ``target(*args, **kwargs)`` on npu, checked as ``expect`` says."""

    target: str  # "fbgemm::op", "fbgemm::op.overload" or "package.module:function"
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    expect: str = "equal"  # "equal" | "error" | "equal_or_error"
    names: tuple[str, ...] = ()  # an error must name one of these arguments
    oracle: str | None = None  # None: the target itself on CPU (upstream's CPU kernel)
    rtol: float | None = None
    atol: float | None = None
    grad: tuple[int | str, ...] = ()  # inputs whose gradients are compared
    label: str = "valid"  # the category, for the report
    # the op an error must name where the target is a program; a tuple: any one of them (a flow
    # whose refusal may come from one of several ops)
    op_name: str | tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.expect not in ("equal", "error", "equal_or_error"):
            raise ValueError(f"Case: expect={self.expect!r}")
        if isinstance(self.names, str):
            self.names = (self.names,)

    @property
    def op(self) -> str | tuple[str, ...]:
        return self.op_name or self.target


class Worker:
    """The subprocess that runs cases; restarted after a crash or a hang."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()

    def _start(self) -> subprocess.Popen:
        self.log.seek(0)
        self.log.truncate()
        return subprocess.Popen(
            [sys.executable, "-m", fuzz_worker.__name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )

    def _tail(self) -> str:
        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").splitlines()
        return " | ".join(lines[-6:])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _read(self, n: int, deadline: float) -> bytes | None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks, left = [], n
        while left:
            ready, _, _ = select.select([fd], [], [], deadline)
            if not ready:
                return None
            chunk = os.read(fd, left)
            if not chunk:
                return b""
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def run(self, case: Case) -> tuple[str, str]:
        fresh = self.proc is None or self.proc.poll() is not None
        if fresh:
            self.proc = self._start()
        payload = pickle.dumps(case)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(HEADER.pack(len(payload)) + payload)
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.stop()
            return CRASH, "the worker had died: " + self._tail()
        # the first case of a worker also pays its start-up, which is not the case's hang
        header = self._read(HEADER.size, TIMEOUT_S + (STARTUP_S if fresh else 0.0))
        if header is None:
            self.stop()
            return HANG, f"no answer in {TIMEOUT_S:.0f} s"
        if len(header) < HEADER.size:
            code = self.proc.wait()
            self.proc = None
            return CRASH, f"the worker died (exit {code}): {self._tail()}"
        body = self._read(HEADER.unpack(header)[0], TIMEOUT_S)
        if not body:
            self.stop()
            return CRASH, "the worker died while answering: " + self._tail()
        return pickle.loads(body)


_WORKER: Worker | None = None


def worker() -> Worker:
    """The session's worker (one for every fuzz test of the session)."""
    global _WORKER
    if _WORKER is None:
        _WORKER = Worker()
        atexit.register(_WORKER.stop)
    return _WORKER


# family -> outcome kind -> count; family -> label -> count; the failures' texts
TALLY: dict[str, Counter] = defaultdict(Counter)
LABELS: dict[str, Counter] = defaultdict(Counter)
FAILURES: dict[str, list[str]] = defaultdict(list)
_TESTS: dict[str, list[str]] = defaultdict(list)


def cases_per_family() -> int:
    return int(os.environ.get("FBGEMM_NPU_FUZZ_CASES", CI_CASES))


def _examples(family: str) -> int:
    return max(1, -(-cases_per_family() // max(1, len(_TESTS[family]))))


def check(family: str, case: Case) -> tuple[str, str]:
    """Run one case, count it, and return its outcome."""
    kind, detail = worker().run(case)
    TALLY[family][kind] += 1
    LABELS[family][case.label] += 1
    if kind not in GOOD:
        FAILURES[family].append(f"{case.target} [{case.label}] {kind}: {detail}")
    return kind, detail


def fuzz_test(family: str) -> Callable[[Callable[[Any], Any]], Callable[[], None]]:
    """Make ``fn(data) -> Case | list[Case]`` a pytest test of ``family`` (see the docstring)."""

    def wrap(fn: Callable[[Any], Any]) -> Callable[[], None]:
        _TESTS[family].append(fn.__name__)

        def test() -> None:
            @settings(
                max_examples=_examples(family),
                deadline=None,
                derandomize=bool(os.environ.get("CI")),
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(st.data())
            def body(data: Any) -> None:
                drawn = fn(data)
                for case in drawn if isinstance(drawn, list) else [drawn]:
                    kind, detail = check(family, case)
                    assert kind in GOOD, f"{case.target} [{case.label}]: {kind}: {detail}"

            body()

        test.__name__ = fn.__name__
        test.__qualname__ = fn.__qualname__
        test.__doc__ = fn.__doc__
        test.__module__ = fn.__module__
        return test

    return wrap


def report() -> list[str]:
    """One line per family: cases, outcomes; crashes / hangs / wrong first."""
    lines = []
    for family in sorted(TALLY):
        t = TALLY[family]
        wrong = t["wrong"] + t["rejected"] + t["bad_case"]
        lines.append(
            f"fuzz {family}: {sum(t.values())} cases ({t[EQUAL]} equal to the oracle, "
            f"{t[CLEAR_ERROR]} clear errors): crashes {t[CRASH]}, hangs {t[HANG]}, wrong {wrong}"
            f" (unclear errors {t['unclear']}, memory-unsafe under deferred checks {t['unsafe']})"
        )
    return lines


def write_report(path: str) -> None:
    data = {
        family: {
            "outcomes": {k: TALLY[family][k] for k in KINDS},
            "labels": dict(LABELS[family]),
            "failures": FAILURES[family][:50],
        }
        for family in sorted(TALLY)
    }
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
