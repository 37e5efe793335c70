"""How the simulator's ``"hccl"`` stages one collective through gloo (see :mod:`.collectives`).

The pieces every collective of :class:`~fbgemm_npu.testing.collectives.StagedProcessGroup` is
made of: host copies of ``npu`` tensors for gloo to read (:func:`host`) or write
(:func:`host_buffer`), the copy of the results back into the ``npu`` outputs
(:func:`copy_back`), ``ReduceOp.AVG`` as SUM and a division (:func:`sum_for_avg`,
:func:`divide`), the uneven all-to-all that gloo's lists refuse (:func:`alltoall_flat`), and the
``Work`` objects a staged collective returns.

Only the collectives of :mod:`.collectives_ops` call these, through the process group's methods
in ``fbgemm_npu/testing/collectives.py``: :mod:`fbgemm_npu.testing.trace` recognises the staging
copies by that file on the call stack (real HCCL moves the data device to device).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor
from torch._C._distributed_c10d import AllreduceOptions, AllToAllOptions
from torch.futures import Future

__all__ = [
    "BACKEND_NAME",
    "CompletedWork",
    "DeferredWork",
    "allreduce_options",
    "alltoall_flat",
    "copy_back",
    "divide",
    "host",
    "host_buffer",
    "staged",
    "sum_for_avg",
    "wait",
]

BACKEND_NAME = "hccl"


class CompletedWork(dist._Work):
    """A finished collective: ``wait()`` is True at once; the future holds the outputs."""

    def __init__(self, outputs: list[Tensor]) -> None:
        super().__init__()
        self._outputs = outputs
        self._future: Future[list[Tensor]] = Future()
        self._future.set_result(outputs)

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        return True

    def get_future(self) -> Future[list[Tensor]]:
        return self._future

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self) -> None:
        return None

    def result(self) -> list[Tensor]:
        return self._outputs

    def synchronize(self) -> None:
        """Nothing left to wait for."""


class DeferredWork(dist._Work):
    """A point-to-point transfer: gloo's work, then ``finish`` (the copy back) on first wait."""

    def __init__(self, name: str, inner: dist.Work, finish: Callable[[], list[Tensor]]) -> None:
        super().__init__()
        self._name, self._inner, self._finish = name, inner, finish
        self._outputs: list[Tensor] | None = None

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        if self._outputs is None:
            wait(self._name, self._inner)
            self._outputs = self._finish()
        return True

    def get_future(self) -> Future[list[Tensor]]:
        self.wait()
        future: Future[list[Tensor]] = Future()
        future.set_result(self._outputs or [])
        return future

    def is_completed(self) -> bool:
        return self._outputs is not None

    def result(self) -> list[Tensor]:
        self.wait()
        return self._outputs or []


def wait(name: str, work: dist.Work) -> None:
    """Wait for gloo's ``work``; its error names the collective and the staging."""
    try:
        work.wait()
    except RuntimeError as exc:
        raise RuntimeError(
            f"{BACKEND_NAME} (simulated, staged through gloo) {name}: {exc}"
        ) from exc


def staged(tensors: Sequence[Tensor]) -> bool:
    """Whether a collective on ``tensors`` must be staged (gloo takes CPU tensors as they are)."""
    return any(t.device.type != "cpu" for t in tensors)


def host(t: Tensor) -> Tensor:
    """``t``'s data on the CPU (``t`` itself when it already is a CPU tensor)."""
    return t if t.device.type == "cpu" else t.detach().to("cpu").contiguous()


def host_buffer(t: Tensor) -> Tensor:
    """A CPU tensor for gloo to write ``t``'s result into (``t`` itself for a CPU tensor)."""
    return t if t.device.type == "cpu" else torch.empty(t.shape, dtype=t.dtype)


@torch.no_grad()  # like c10d's own kernels, a collective writes its outputs outside autograd
def copy_back(targets: Sequence[Tensor], hosts: Sequence[Tensor]) -> None:
    """Each host result into its ``npu`` target, in place (nothing for a CPU target)."""
    for target, result in zip(targets, hosts, strict=True):
        if result is not target:
            target.copy_(result.view(target.shape))


def sum_for_avg(opts: object) -> tuple[object, bool]:
    """``(options for gloo, avg)``: ``ReduceOp.AVG`` runs as SUM (a copy of ``opts``), the
    results then divided by the group size; ``PREMUL_SUM`` is refused."""
    op = opts.reduceOp  # type: ignore[attr-defined]
    if op == dist.ReduceOp.PREMUL_SUM:
        raise ValueError(f"{BACKEND_NAME} (simulated): ReduceOp.PREMUL_SUM is not supported")
    if op != dist.ReduceOp.AVG:
        return opts, False
    copy = type(opts)()
    for field in ("rootRank", "rootTensor", "timeout", "asyncOp"):
        if hasattr(opts, field):
            setattr(copy, field, getattr(opts, field))
    copy.reduceOp = dist.ReduceOp.SUM  # type: ignore[attr-defined]
    return copy, True


@torch.no_grad()
def divide(t: Tensor, n: int) -> None:
    """The AVG of a SUM: ``t /= n`` in place, truncating for integers as HCCL/NCCL do."""
    if t.dtype == torch.bool:
        raise ValueError(f"{BACKEND_NAME} (simulated): ReduceOp.AVG of a bool tensor")
    if t.is_floating_point() or t.is_complex():
        t.div_(n)
    else:
        t.div_(n, rounding_mode="trunc")


def allreduce_options(op: dist.ReduceOp, timeout: datetime.timedelta) -> AllreduceOptions:
    """gloo's options for one allreduce with ``op``."""
    single = AllreduceOptions()
    single.reduceOp, single.timeout = op, timeout
    return single


def alltoall_flat(
    gloo: dist.ProcessGroup, name: str, outputs: list[Tensor], inputs: list[Tensor]
) -> None:
    """inputs[i] goes to rank i, outputs[i] comes from rank i, any shapes: one alltoall_base."""
    dtypes = {t.dtype for t in outputs + inputs}
    if len(dtypes) != 1:
        raise ValueError(f"{BACKEND_NAME} (simulated) {name}: tensors of several dtypes {dtypes}")
    out_numels = [t.numel() for t in outputs]
    flat_out = torch.empty(sum(out_numels), dtype=outputs[0].dtype)
    flat_in = torch.cat([t.reshape(-1) for t in inputs])
    work = gloo.alltoall_base(
        flat_out, flat_in, out_numels, [t.numel() for t in inputs], AllToAllOptions()
    )
    wait(name, work)
    copy_back(outputs, flat_out.split(out_numels))
