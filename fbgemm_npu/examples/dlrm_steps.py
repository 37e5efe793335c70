"""The main job's per-step cost: what fbgemm_npu asks of a 910B in each training step.

Every step on npu is counted (:func:`fbgemm_npu.testing.trace.count_step`: the counters alone,
each op attributed to the code that issued it; step 0 by the heavier
:func:`~fbgemm_npu.testing.trace.trace`, which counts the same way).  A step's line shows
fbgemm_npu's share: the ops run inside ``fbgemm::`` / ``mxrec::`` calls or issued by our own
code (kernels, autograd functions, the torchrec integration), not torchrec's all-to-all
split-size reads nor the simulated collective's staging:

* **launches**: device kernels; **AI-CPU**: those a 910B runs on its AI CPU;
* **syncs + stalls**: host waits: device-to-host reads, and the waits only a 910B has
  (``_assert_async`` through the CPU fallback, blocking uploads);
* **MB**: bytes the launches move; **910B ms**: the projected time of the share,
  :mod:`fbgemm_npu.testing.cost_910b` (constants and sources: docs/hardware.md, "Cost model"),
  and beside it the whole step's launches and projected time (torchrec, the dense layers, ...).

With several ranks a step's line is the rank whose share costs most (a collective waits for it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fbgemm_npu.testing.cost_910b import COLUMNS, Cost, cells

__all__ = ["LEGEND", "StepRecorder", "step_lines"]

LEGEND = """\
per npu step, fbgemm_npu's share (ops inside fbgemm:: calls or issued by our own code; torchrec's
split-size reads and the simulated collective's staging left out): launches, AI-CPU launches,
syncs + stalls (a stall: a host wait only a 910B has), MB moved and the projected 910B ms
(docs/hardware.md, "Cost model"); after the |, the whole step's.  The npu samples/s include the
counting (--no-step-counts: step 0 only)."""


class StepRecorder:
    """A ``step_hook`` for :func:`fbgemm_npu.examples.dlrm_train.train` that counts each step.

    ``trace_first``: step 0 runs under :func:`~fbgemm_npu.testing.trace.trace` (kept in
    ``traced``); ``count`` False: the other steps run uncounted.  ``ours`` / ``whole`` get one
    :class:`Cost` (as a dict: picklable) per counted step, in step order.
    """

    def __init__(self, device_type: str, trace_first: bool = True, count: bool = True) -> None:
        self.device_type, self.trace_first, self.count = device_type, trace_first, count
        self.traced: list[Any] = []
        self.steps: list[int] = []
        self.ours: list[dict[str, int]] = []
        self.whole: list[dict[str, int]] = []

    def __call__(self, step: int, run: Callable[[], Any]) -> Any:
        from fbgemm_npu.testing.trace import count_step, trace

        if step == 0 and self.trace_first:
            self.traced.append(trace(run, self.device_type))
            counted: Any = self.traced[-1]
        elif self.count:
            counted = count_step(run, self.device_type)
        else:
            return run()
        self.steps.append(step)
        self.ours.append(counted.ours.as_dict())
        self.whole.append(counted.whole.as_dict())
        return counted.result


def _row(cols: Sequence[str]) -> str:
    widths = (4, 4, 8, 6, 14, 8, 8, 12, 8)  # step, rank, COLUMNS, 910B ms | all launches, ms
    text = [f"{c:>{w}}" for c, w in zip(cols, widths, strict=True)]
    return "  ".join(text[:7]) + "  | " + "  ".join(text[7:])


def step_lines(name: str, reports: Sequence[Any]) -> list[str]:
    """The per-step table of one run: one line a step, the costliest rank's share.

    ``reports``: the run's ``RankReport``s (``steps``, ``step_costs``, ``step_whole``).
    """
    by_step: dict[int, list[tuple[float, int, Cost, Cost]]] = {}
    for r in reports:
        for step, ours, whole in zip(r.steps, r.step_costs, r.step_whole, strict=True):
            ours_c, whole_c = Cost(**ours), Cost(**whole)
            by_step.setdefault(step, []).append((ours_c.us, r.rank, ours_c, whole_c))
    if not by_step:
        return []
    lines = [
        f"[{name}] per step on a 910B, fbgemm_npu's share"
        + (" (the costliest rank)" if len(reports) > 1 else "")
        + ":",
        "    " + _row(("step", "rank", *COLUMNS, "910B ms", "all launches", "910B ms")),
    ]
    for step in sorted(by_step):
        _, rank, ours, whole = max(by_step[step], key=lambda t: (t[0], -t[1]))
        cols = (str(step), str(rank), *cells(ours), f"{ours.us / 1e3:.3f}")
        lines.append("    " + _row((*cols, str(whole.launches), f"{whole.us / 1e3:.3f}")))
    return lines
