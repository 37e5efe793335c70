"""Host values to the device without a host stall (docs/hardware.md, "Host fallbacks and host
stalls").

A kernel often knows small tables on the host (per-table row counts, check bounds, a plan) and
needs them on the device.  ``torch.tensor(values, device=dev)`` and ``cpu_tensor.to(dev)`` copy
from pageable host memory: torch_npu synchronises the stream before such a copy, so the host waits
for every queued kernel (a *stall*, counted by ``fbgemm_npu.testing.counters``).  A copy from
pinned (page-locked) memory with ``non_blocking=True`` is queued like a kernel and returns at once;
the caching host allocator keeps the pinned block alive until the copy has run, so the source may
be dropped right after.  :func:`upload` is that copy: one launch, no stall.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fbgemm_npu.native._index import tracing

__all__ = ["upload"]


def upload(
    values: Sequence[int] | Sequence[float] | Sequence[Sequence[int]] | torch.Tensor,
    dtype: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """``values`` (a nested list, or a CPU tensor) as a ``dtype`` tensor on ``device``.

    Launches: one host-to-device copy (none when ``device`` is the CPU); no sync, no stall: the
    source is pinned and the copy ``non_blocking``.  The result is a fresh tensor the caller
    owns.
    """
    device = torch.device(device)
    if isinstance(values, torch.Tensor):
        host = values.to(dtype, copy=True)  # never the caller's tensor (a schema check sees it)
    else:
        host = torch.tensor(values, dtype=dtype)
    if device.type == "cpu":
        return host
    if tracing():
        # under a trace (torch.compile, opcheck) there is no pinned fake tensor: a plain copy,
        # which the compiled graph turns into a constant of its own
        return host.to(device)
    # pin_memory() copies into a block of the caching host allocator (cheap after the first
    # call); the device copy is then asynchronous and the stream never drains for it
    return host.pin_memory().to(device, non_blocking=True)
