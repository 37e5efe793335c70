"""The simulator's stand-in for HCCL: a c10d process group for npu tensors, staged through gloo.

On an Ascend host torch_npu registers the ``"hccl"`` backend and collectives run on the device.
The simulated ``npu`` device (:mod:`fbgemm_npu.testing.simulator`) has no interconnect, and gloo,
the one host-memory backend torch ships, refuses PrivateUse1 tensors although the simulator keeps
them in host memory.  So this module stages: :func:`register` registers, under the name ``"hccl"``
and for the ``npu`` device, a Python ``ProcessGroup`` that wraps a gloo process group built on
the same store (a ``PrefixStore``) with the same rank and size.  Each collective copies its
``npu`` inputs to CPU tensors, runs the gloo collective, waits for it, and copies the results back
into the ``npu`` outputs in place.  Code written for Ascend — ``init_process_group("hccl")``,
``"cpu:gloo,npu:hccl"`` or no backend at all (the simulated ``npu`` is the accelerator) — then runs
unchanged in several processes, torchrec's comm ops included.  The collectives themselves are
in :mod:`.collectives_ops`, the staging pieces they share in :mod:`.collectives_staging`.

CPU tensors are handed to the wrapped gloo group untouched (its own asynchronous ``Work``, its own
semantics), so gloo keeps serving CPU tensors whichever backend string was given.

Semantics of the staged (``npu``) path:

* Synchronous.  A collective has finished when the call returns; ``async_op=True`` yields a
  completed ``Work`` whose ``wait()`` returns True and whose ``get_future()`` holds the output
  tensors.  Nothing overlaps communication with compute: timings say nothing about a real HCCL.
* ``ReduceOp.AVG`` runs as SUM then a division by the group size (truncating for integer dtypes, as
  HCCL/NCCL do).  ``PREMUL_SUM`` is refused; SUM, PRODUCT, MIN, MAX and the bitwise ops are gloo's.
* Uneven ``all_gather`` / ``all_to_all`` lists (torchrec's ``*_v`` collectives) and uneven
  ``reduce_scatter`` lists, which gloo refuses, are rebuilt from gloo's ``alltoall_base`` and
  ``allreduce``; ``all_to_all`` lists must share one dtype.
* ``send``/``recv`` return a ``Work`` that finishes (copying a received tensor back) on ``wait()``.
* Python-level calls (``torch.distributed.*``, torchrec's comm ops) reach every collective here.
  Calls from C++ reach only the methods torch's trampoline for Python process groups forwards
  (allreduce, allgather, all_to_all_single, broadcast, reduce_scatter, barrier, send/recv and the
  ``*_coalesced`` forms), which covers the functional collectives
  (``torch.ops._c10d_functional.*`` + ``wait_tensor``, so torchrec's sync collectives too).  A
  Python object cannot be a c10d ``Backend``: the raw ``torch.ops.c10d.*`` ops refuse this group,
  and ``monitored_barrier`` (gloo only) refuses it too.
* Timeouts are gloo's: the ``timeout`` of ``init_process_group``/``new_group``.
* ``init_process_group(backend="cpu:gloo,npu:hccl")`` builds torch's gloo group for CPU first and
  then replaces the whole group with this one (torch's rule for Python process groups), so one
  unused gloo group is connected at start-up.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from fbgemm_npu.testing import collectives_ops as ops
from fbgemm_npu.testing.collectives_staging import BACKEND_NAME, CompletedWork, DeferredWork

DEVICE_TYPE = "npu"


def _method(collective: Callable[..., Any]) -> Callable[..., Any]:
    """The process group's method for a function of :mod:`.collectives_ops`.

    A method of its own, written in this file, rather than the function itself: c10d's trampoline
    finds it on the class, and every staging copy then runs below a frame of this module, which is
    how :mod:`fbgemm_npu.testing.trace` tells the staging copies from the model's transfers.
    """

    @functools.wraps(collective)
    def method(self: StagedProcessGroup, *args: Any, **kwargs: Any) -> Any:
        return collective(self, *args, **kwargs)

    return method


class StagedProcessGroup(dist.ProcessGroup):
    """``"hccl"`` for the simulated npu: CPU tensors go to gloo as they are, npu tensors via CPU."""

    def __init__(
        self, store: dist.Store, rank: int, size: int, timeout: datetime.timedelta
    ) -> None:
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(
            dist.PrefixStore("staged_gloo/", store), rank, size, timeout
        )
        # C++ callers look backends up by device: monitored_barrier and object collectives want
        # gloo for CPU; init_process_group(device_id=npu:r) asks the npu backend whether it
        # splits.  A Python object cannot be a c10d Backend, so gloo answers for npu too: C++
        # dispatch of npu tensors to it fails with gloo's error ("unsupported device type").
        for device in ("cpu", DEVICE_TYPE):
            self._register_backend(
                torch.device(device), dist.ProcessGroup.BackendType.GLOO, self._gloo
            )
        self._set_default_backend(dist.ProcessGroup.BackendType.GLOO)

    def getBackendName(self) -> str:  # noqa: N802 - the C++ virtual's name
        return BACKEND_NAME

    @property
    def gloo(self) -> dist.ProcessGroup:
        """The wrapped gloo process group."""
        return self._gloo

    # c10d's method names (several per collective: torch's Python and C++ callers use both)
    allreduce = _method(ops.allreduce)
    allreduce_coalesced = _method(ops.allreduce_coalesced)
    reduce = _method(ops.reduce)
    reduce_scatter = _method(ops.reduce_scatter)
    _reduce_scatter_base = reduce_scatter_single = _method(ops.reduce_scatter_base)
    reduce_scatter_single_coalesced = _method(ops.reduce_scatter_single_coalesced)
    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced
    broadcast = _method(ops.broadcast)
    allgather = _method(ops.allgather)
    _allgather_base = all_gather_single = _method(ops.allgather_base)
    all_gather_single_coalesced = _method(ops.all_gather_single_coalesced)
    allgather_into_tensor_coalesced = all_gather_single_coalesced
    gather = _method(ops.gather)
    scatter = _method(ops.scatter)
    alltoall_base = all_to_all_single = _method(ops.alltoall_base)
    alltoall = _method(ops.alltoall)
    barrier = _method(ops.barrier)
    send = _method(ops.send)
    recv = _method(ops.recv)


def create_staged_process_group(
    store: dist.Store, rank: int, size: int, timeout: datetime.timedelta
) -> StagedProcessGroup:
    """The creator c10d calls for ``"hccl"`` (non-extended API: store, rank, size, timeout)."""
    return StagedProcessGroup(store, rank, size, timeout)


def is_registered() -> bool:
    """Whether ``"hccl"`` names this module's staged process group."""
    plugin = dist.Backend._plugins.get(BACKEND_NAME.upper())
    return plugin is not None and plugin.creator_fn is create_staged_process_group


def register() -> None:
    """Register the staged process group as ``"hccl"`` for ``npu`` (and CPU) tensors; idempotent.

    Does nothing where torch_npu is installed (its real HCCL owns the name).  Afterwards
    ``init_process_group`` picks it for ``backend="hccl"``, ``"cpu:gloo,npu:hccl"`` and
    ``backend=None`` (the simulated npu is the accelerator); in each case CPU tensors go to gloo.
    """
    if importlib.util.find_spec("torch_npu") is not None or is_registered():
        return
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        raise RuntimeError(
            f"fbgemm_npu.testing.collectives: backend {BACKEND_NAME!r} is already registered by "
            "someone else"
        )
    dist.Backend.register_backend(
        BACKEND_NAME, create_staged_process_group, devices=[DEVICE_TYPE, "cpu"]
    )


__all__ = [
    "BACKEND_NAME",
    "CompletedWork",
    "DeferredWork",
    "StagedProcessGroup",
    "create_staged_process_group",
    "is_registered",
    "register",
]
