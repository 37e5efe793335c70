"""What a counted call or training step would cost on an Ascend 910B: the cost model.

The simulated device cannot time a 910B; the counters (:mod:`fbgemm_npu.testing.counters`) can
say what a call asks of one: its launches, the launches a 910B runs on its AI CPU, the host waits
(syncs, and the *stalls* only a 910B adds) and the bytes each launch moves.  This module turns
those counts into a projected time.  The constants and their sources are in docs/hardware.md
("Cost model"); a measurement on a real host replaces an estimate by editing both together.

For a call with ``L`` launches of which ``A`` run on the AI CPU, ``S`` syncs, ``W`` stalls,
``M_core`` bytes moved by the AI-Core launches and ``M_cpu`` bytes by the AI-CPU ones:

.. math::

    t = L \\cdot t_{launch} + A \\cdot t_{aicpu} + (S + W) \\cdot t_{sync}
        + M_{core} / B_{hbm} + M_{cpu} / B_{aicpu}

An AI-CPU launch pays its ``t_launch`` like any other and ``t_aicpu`` on top.  The terms add: no
overlap of host enqueue and device work is assumed, so ``t`` is an upper bound where the device
keeps pace with the host (the launch-bound steps of the main job, where the bytes term is small)
and a lower bound for one kernel that is far from peak bandwidth.  The bytes of a launch are the
``nbytes`` (``numel * element_size``, views by what they show) of its tensor arguments and results
on the device: an in-place op's ``self`` counts twice (read and written), a host-side source of an
upload not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from fbgemm_npu.testing.counters import OpEvent

__all__ = [
    "AI_CPU_BYTES_PER_S",
    "AI_CPU_US",
    "COLUMNS",
    "HBM_BYTES_PER_S",
    "LAUNCH_US",
    "SYNC_US",
    "Cost",
    "cells",
    "projected_us",
    "tensor_bytes",
]

LAUNCH_US = 12.0  # host time to enqueue one eager op through torch_npu (docs/hardware.md)
AI_CPU_US = 50.0  # an AI-CPU task on top of its launch: dispatch, scheduling, the stream's wait
SYNC_US = 50.0  # one host wait: queue drained, a small copy back, the device idle after it
HBM_BYTES_PER_S = 1.6e12  # 910B HBM bandwidth
AI_CPU_BYTES_PER_S = 10e9  # an AI-CPU kernel streams its data on one Arm core (estimate)


def tensor_bytes(device_type: str, tree: Any) -> int:
    """Bytes of the tensors on ``device_type`` in ``tree`` (args, kwargs, results; nested).

    ``numel * element_size`` each, so a view counts what it shows; a symbolic size counts 0.
    Walks tuples, lists and dict values itself: torch's pytree costs ~50 us a call, and the
    counters call this once per launch.
    """
    total, todo = 0, [tree]
    while todo:
        leaf = todo.pop()
        if isinstance(leaf, torch.Tensor):
            if leaf.device.type == device_type:
                n = leaf.numel()
                total += n * leaf.element_size() if isinstance(n, int) else 0
        elif isinstance(leaf, (tuple, list)):
            todo.extend(leaf)
        elif isinstance(leaf, dict):
            todo.extend(leaf.values())
    return total


def projected_us(
    launches: int, ai_cpu: int, syncs: int, stalls: int, nbytes: int, ai_cpu_nbytes: int = 0
) -> float:
    """The model's time in microseconds (module doc); ``nbytes`` are the AI-Core launches'."""
    return (
        launches * LAUNCH_US
        + ai_cpu * AI_CPU_US
        + (syncs + stalls) * SYNC_US
        + nbytes / HBM_BYTES_PER_S * 1e6
        + ai_cpu_nbytes / AI_CPU_BYTES_PER_S * 1e6
    )


@dataclass(frozen=True)
class Cost:
    """The counts of a call or a step that the model prices; ``a + b`` adds them."""

    launches: int = 0
    ai_cpu: int = 0  # of the launches, those a 910B runs on its AI CPU
    syncs: int = 0  # device-to-host reads (the counters' syncs)
    stalls: int = 0  # host waits only a 910B has (host fallbacks, blocking uploads)
    nbytes: int = 0  # moved by the AI-Core launches
    ai_cpu_nbytes: int = 0  # moved by the AI-CPU launches

    @classmethod
    def of(cls, events: Iterable[OpEvent], keep: Callable[[OpEvent], bool] | None = None) -> Cost:
        """The cost of the counted ``events`` (those ``keep`` accepts, when given)."""
        launches = ai_cpu = syncs = stalls = nbytes = ai_cpu_nbytes = 0
        for e in events:
            if keep is not None and not keep(e):
                continue
            launches += e.launch
            ai_cpu += e.ai_cpu
            syncs += e.sync is not None
            stalls += e.stall is not None
            if e.ai_cpu:
                ai_cpu_nbytes += e.nbytes
            elif e.launch:
                nbytes += e.nbytes
        return cls(launches, ai_cpu, syncs, stalls, nbytes, ai_cpu_nbytes)

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Cost)))

    @property
    def host_waits(self) -> int:
        """Syncs and stalls: every time the host waits for the device on a 910B."""
        return self.syncs + self.stalls

    @property
    def megabytes(self) -> float:
        return (self.nbytes + self.ai_cpu_nbytes) / 1e6

    @property
    def us(self) -> float:
        """The projected 910B time, microseconds."""
        return projected_us(
            self.launches, self.ai_cpu, self.syncs, self.stalls, self.nbytes, self.ai_cpu_nbytes
        )

    def as_dict(self) -> dict[str, int]:
        """Plain ints by field name (picklable; ``Cost(**d)`` rebuilds it)."""
        return {f.name: getattr(self, f.name) for f in fields(Cost)}


# The columns that the main job and the benchmarks show, in this order.
COLUMNS = ("launches", "AI-CPU", "syncs + stalls", "MB")


def cells(cost: Cost) -> tuple[str, ...]:
    """``cost`` as the text of :data:`COLUMNS` (the projected time is formatted by the caller)."""
    return (
        str(cost.launches),
        str(cost.ai_cpu),
        f"{cost.syncs} + {cost.stalls}",
        f"{cost.megabytes:.2f}",
    )
