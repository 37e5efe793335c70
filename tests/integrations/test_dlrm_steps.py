"""The main job's per-step columns: what each step's line counts, and that it follows the counters.

``fbgemm_npu.examples.dlrm_steps`` counts every step with ``trace.count_step`` (step 0 with the
full trace) and prints fbgemm_npu's share: ops inside ``fbgemm::`` calls or issued by our own code,
not the test's, torchrec's or the simulated collective's staging.  The attribution reads the file
name of each Python frame, so these tests run known ops from functions compiled under the file
names of those owners (``fbgemm_npu/native/...``, ``fbgemm_npu/testing/collectives_staging.py``,
``.../torchrec/...``) and check the counts against the same ops counted plainly.  An injected
``searchsorted`` (an AI-CPU route on a 910B whatever the dtype), a blocking upload (a stall) and
an ``item()`` (a sync) give known numbers; the printed line is checked against costs computed by
hand.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.examples import dlrm
from fbgemm_npu.examples.dlrm_steps import StepRecorder, step_lines
from fbgemm_npu.testing import cost_910b
from fbgemm_npu.testing.cost_910b import Cost
from fbgemm_npu.testing.counters import count
from fbgemm_npu.testing.trace import OURS, STAGING, TORCHREC, count_step, owner_of_caller, trace

PACKAGE = Path(fbgemm_npu.__file__).parent

pytestmark = pytest.mark.skipif(
    fbgemm_npu.device_kind() == "none", reason="no npu device (tests/conftest.py switches it on)"
)


def _defined_in(path: Path, src: str, **names: Any) -> Callable[..., Any]:
    """``f`` from ``src``, its frames named ``path``: to the attribution, code of that owner."""
    scope: dict[str, Any] = {"torch": torch, **names}
    exec(compile(src, str(path), "exec"), scope)
    return scope["f"]


# searchsorted: 1 launch on the AI CPU; torch.tensor(device=npu): 1 launch and a stall (blocking
# upload); sum: 1 launch; item(): 1 sync
INJECTED = """
def f(x, boundaries):
    i = torch.searchsorted(boundaries, x)
    t = torch.tensor([1, 2], device=x.device)
    return i.sum().item(), t
"""
ours_kernel = _defined_in(PACKAGE / "native" / "_injected_for_tests.py", INJECTED)
staging = _defined_in(
    PACKAGE / "testing" / "collectives_staging.py", "def f(x):\n    return x * 3\n"
)
torchrec_code = _defined_in(Path("/site/torchrec/sparse/x.py"), "def f(x):\n    return x - 1\n")
ours_wrapper = _defined_in(  # our integration wrapper around torchrec's code: torchrec's op
    PACKAGE / "integrations" / "_wrapper_for_tests.py",
    "def f(x):\n    return g(x)\n",
    g=torchrec_code,
)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.tensor([0.5, 2.5, 9.0], device="npu")
    boundaries = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0], device="npu")
    lengths = torch.tensor([2, 0, 3], device="npu")
    return x, boundaries, lengths


def _plain(fn: Callable[[], Any]) -> Cost:
    with count() as c:
        fn()
    return Cost.of(c.events)


def test_injected_kernel_counts_what_it_runs() -> None:
    x, boundaries, _ = _inputs()
    cost = _plain(lambda: ours_kernel(x, boundaries))
    # bytes, from the tensors: searchsorted reads 5 + 3 floats and writes 3 int64; the upload's
    # 2 int64 are its argument and its result; the sum reads 3 int64 and writes 1
    by_hand = Cost(
        launches=3, ai_cpu=1, syncs=1, stalls=1, nbytes=16 + 16 + 24 + 8, ai_cpu_nbytes=20 + 12 + 24
    )
    assert cost == by_hand
    assert (cost.launches, cost.ai_cpu, cost.syncs, cost.stalls) == (3, 1, 1, 1)


def test_a_step_counts_only_what_fbgemm_npu_runs() -> None:
    x, boundaries, lengths = _inputs()
    op = torch.ops.fbgemm.asynchronous_complete_cumsum
    op(lengths)  # warm the kernel's caches: the counted call is then the same every time
    call = _plain(lambda: op(lengths))
    assert call.launches > 0

    def step() -> None:
        ours_kernel(x, boundaries)  # ours: our code issues it
        op(lengths)  # ours: inside an fbgemm:: call, from the test's frame
        x * 2  # the test's own op
        staging(x)  # the simulated collective's staging
        ours_wrapper(x)  # torchrec's code under our wrapper: torchrec's

    counted = count_step(step, "npu")
    expected = _plain(lambda: ours_kernel(x, boundaries)) + call
    assert counted.ours == expected
    rest = Cost(launches=3, nbytes=3 * 24)  # three elementwise ops on 3 floats: in and out
    assert counted.whole == expected + rest
    traced = trace(step, "npu")
    assert (traced.ours, traced.whole) == (counted.ours, counted.whole)


def test_owners_of_frames() -> None:
    x, boundaries, _ = _inputs()
    with count() as c:
        c.owner = owner_of_caller
        ours_kernel(x, boundaries)
        staging(x)
        ours_wrapper(x)
        x + 1
    seen = [e.owner for e in c.events]
    assert seen[0] == seen[1] == OURS  # searchsorted, then the upload, in our kernel
    assert seen[-3:] == [STAGING, TORCHREC, None]  # the test's own frame decides nothing


def test_the_recorder_counts_each_step_and_shows_an_injected_ai_cpu_op() -> None:
    x, boundaries, lengths = _inputs()
    op = torch.ops.fbgemm.asynchronous_complete_cumsum
    op(lengths)

    def run_step(step: int) -> Callable[[], int]:
        def run() -> int:
            op(lengths)
            if step == 1:
                ours_kernel(x, boundaries)
            return step

        return run

    recorder = StepRecorder("npu")
    assert [recorder(s, run_step(s)) for s in range(3)] == [0, 1, 2]
    assert recorder.steps == [0, 1, 2] and len(recorder.traced) == 1  # step 0: the full trace
    base = Cost(**recorder.ours[0])
    injected = _plain(lambda: ours_kernel(x, boundaries))
    assert Cost(**recorder.ours[2]) == base  # the trace and count_step count alike
    assert Cost(**recorder.ours[1]) == base + injected
    assert Cost(**recorder.ours[1]).ai_cpu == base.ai_cpu + 1

    untraced = StepRecorder("npu", trace_first=False)
    untraced(0, run_step(0))
    assert untraced.steps == [0] and not untraced.traced
    off = StepRecorder("npu", count=False)
    for s in range(3):
        off(s, run_step(s))
    assert off.steps == [0]  # only the traced step


def _report(rank: int, costs: list[Cost]) -> dlrm.RankReport:
    return dlrm.RankReport(
        sharding_type="row_wise",
        rank=rank,
        steps=list(range(len(costs))),
        step_costs=[c.as_dict() for c in costs],
        step_whole=[(c + Cost(launches=100)).as_dict() for c in costs],
    )


def test_the_per_step_line_shows_the_columns_of_the_costliest_rank() -> None:
    cheap = Cost(launches=10, nbytes=1_600_000)
    dear = Cost(launches=10, ai_cpu=1, syncs=0, stalls=2, nbytes=1_600_000)
    lines = step_lines("dlrm row_wise", [_report(0, [cheap, dear]), _report(1, [dear, cheap])])
    assert lines[0].startswith("[dlrm row_wise] per step") and "costliest rank" in lines[0]
    header = lines[1].split()
    assert header[:4] == ["step", "rank", "launches", "AI-CPU"] and "MB" in header
    rows = [line.split() for line in lines[2:]]
    assert [r[:2] for r in rows] == [["0", "1"], ["1", "0"]]  # the dear rank each step
    # 10 launches x 12 us + 1 AI-CPU task x 50 us + 2 stalls x 50 us + 1.6 MB at 1.6 TB/s (1 us)
    by_hand = (10 * cost_910b.LAUNCH_US + cost_910b.AI_CPU_US + 2 * cost_910b.SYNC_US + 1.0) / 1e3
    whole = (dear + Cost(launches=100)).us / 1e3
    for r in rows:
        assert r[2:] == [
            "10",
            "1",
            "0",
            "+",
            "2",
            "1.60",
            f"{by_hand:.3f}",
            "|",
            "110",
            f"{whole:.3f}",
        ]
    if (cost_910b.LAUNCH_US, cost_910b.AI_CPU_US, cost_910b.SYNC_US) == (12.0, 50.0, 50.0):
        assert rows[0][8] == "0.271"
    assert step_lines("x", [dlrm.RankReport(sharding_type="row_wise", rank=0)]) == []
