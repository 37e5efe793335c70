"""The simulator's stand-in for HCCL: a c10d process group for npu tensors, staged through gloo.

On an Ascend host torch_npu registers the ``"hccl"`` backend and collectives run on the device.
The simulated ``npu`` device (:mod:`fbgemm_npu.testing.simulator`) has no interconnect, and gloo,
the one host-memory backend torch ships, refuses PrivateUse1 tensors although the simulator keeps
them in host memory.  So this module stages: :func:`register` registers, under the name
``"hccl"`` and for the ``npu`` device, a Python ``ProcessGroup`` that wraps a gloo process group
built on the same store (a ``PrefixStore``) with the same rank and size.  Each collective copies its
``npu`` inputs to CPU tensors, runs the gloo collective, waits for it, and copies the results back
into the ``npu`` outputs in place.  Code written for Ascend — ``init_process_group("hccl")``,
``"cpu:gloo,npu:hccl"`` or no backend at all (the simulated ``npu`` is the accelerator) — then runs
unchanged in several processes, torchrec's comm ops included.

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
import importlib.util
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)
from torch.futures import Future

BACKEND_NAME = "hccl"
DEVICE_TYPE = "npu"


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
            _wait(self._name, self._inner)
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


def _wait(name: str, work: dist.Work) -> None:
    try:
        work.wait()
    except RuntimeError as exc:
        raise RuntimeError(
            f"{BACKEND_NAME} (simulated, staged through gloo) {name}: {exc}"
        ) from exc


def _staged(tensors: Sequence[Tensor]) -> bool:
    return any(t.device.type != "cpu" for t in tensors)


def _host(t: Tensor) -> Tensor:
    """``t``'s data on the CPU (``t`` itself when it already is a CPU tensor)."""
    return t if t.device.type == "cpu" else t.detach().to("cpu").contiguous()


def _host_buffer(t: Tensor) -> Tensor:
    """A CPU tensor for gloo to write ``t``'s result into (``t`` itself for a CPU tensor)."""
    return t if t.device.type == "cpu" else torch.empty(t.shape, dtype=t.dtype)


@torch.no_grad()  # like c10d's own kernels, a collective writes its outputs outside autograd
def _copy_back(targets: Sequence[Tensor], hosts: Sequence[Tensor]) -> None:
    for target, host in zip(targets, hosts, strict=True):
        if host is not target:
            target.copy_(host.view(target.shape))


def _is_avg(op: dist.ReduceOp) -> bool:
    if op == dist.ReduceOp.PREMUL_SUM:
        raise ValueError(f"{BACKEND_NAME} (simulated): ReduceOp.PREMUL_SUM is not supported")
    return op == dist.ReduceOp.AVG


@torch.no_grad()
def _divide(t: Tensor, n: int) -> None:
    if t.dtype == torch.bool:
        raise ValueError(f"{BACKEND_NAME} (simulated): ReduceOp.AVG of a bool tensor")
    if t.is_floating_point() or t.is_complex():
        t.div_(n)
    else:
        t.div_(n, rounding_mode="trunc")


def _with_op(options: object, op: dist.ReduceOp) -> object:
    """A copy of a reduce-options object with ``reduceOp`` replaced (SUM stands in for AVG)."""
    copy = type(options)()
    for field in ("rootRank", "rootTensor", "timeout", "asyncOp"):
        if hasattr(options, field):
            setattr(copy, field, getattr(options, field))
    copy.reduceOp = op
    return copy


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

    # --- reductions -------------------------------------------------------------------------

    def allreduce(self, tensors: list[Tensor], opts: AllreduceOptions = AllreduceOptions()):  # noqa: B008
        if not _staged(tensors):
            return self._gloo.allreduce(tensors, opts)
        hosts = [_host(t) for t in tensors]
        avg = _is_avg(opts.reduceOp)
        gloo_opts = _with_op(opts, dist.ReduceOp.SUM) if avg else opts
        _wait("allreduce", self._gloo.allreduce(hosts, gloo_opts))
        if avg:
            for h in hosts:
                _divide(h, self.size())
        _copy_back(tensors, hosts)
        return CompletedWork(tensors)

    def allreduce_coalesced(
        self,
        tensors: list[Tensor],
        opts: AllreduceCoalescedOptions = AllreduceCoalescedOptions(),  # noqa: B008
    ):
        if not _staged(tensors):
            return self._gloo.allreduce_coalesced(tensors, opts)
        for t in tensors:  # one staged allreduce each: gloo's coalesced form has the same cost here
            single = AllreduceOptions()
            single.reduceOp, single.timeout = opts.reduceOp, opts.timeout
            _wait("allreduce_coalesced", self.allreduce([t], single))
        return CompletedWork(tensors)

    def reduce(self, tensors: list[Tensor], opts: ReduceOptions = ReduceOptions()):  # noqa: B008
        if not _staged(tensors):
            return self._gloo.reduce(tensors, opts)
        hosts = [_host(t) for t in tensors]
        avg = _is_avg(opts.reduceOp)
        _wait(
            "reduce", self._gloo.reduce(hosts, _with_op(opts, dist.ReduceOp.SUM) if avg else opts)
        )
        if self.rank() == opts.rootRank:
            if avg:
                for h in hosts:
                    _divide(h, self.size())
            _copy_back(tensors, hosts)
        return CompletedWork(tensors)

    def reduce_scatter(
        self,
        output_tensors: list[Tensor],
        input_tensors: list[list[Tensor]],
        opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
    ):
        flat = [t for ts in input_tensors for t in ts]
        if not _staged(output_tensors + flat):
            return self._gloo.reduce_scatter(output_tensors, input_tensors, opts)
        avg = _is_avg(opts.reduceOp)
        op = dist.ReduceOp.SUM if avg else opts.reduceOp
        for out, inputs in zip(output_tensors, input_tensors, strict=True):
            if all(t.shape == out.shape for t in inputs):
                host_out = _host_buffer(out)
                work = self._gloo.reduce_scatter(
                    [host_out], [[_host(t) for t in inputs]], _with_op(opts, op)
                )
                _wait("reduce_scatter", work)
            else:  # uneven (torchrec's reduce_scatter_v): reduce everything, keep our slice
                numels = [t.numel() for t in inputs]
                whole = torch.cat([_host(t).reshape(-1) for t in inputs])
                single = AllreduceOptions()
                single.reduceOp, single.timeout = op, opts.timeout
                _wait("reduce_scatter", self._gloo.allreduce([whole], single))
                host_out = whole.split(numels)[self.rank()].clone()
            if avg:
                _divide(host_out, self.size())
            _copy_back([out], [host_out])
        return CompletedWork(output_tensors)

    def _reduce_scatter_base(
        self,
        output: Tensor,
        input: Tensor,
        opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
    ):
        if not _staged([output, input]):
            return self._gloo._reduce_scatter_base(output, input, opts)
        avg = _is_avg(opts.reduceOp)
        host_out = _host_buffer(output)
        gloo_opts = _with_op(opts, dist.ReduceOp.SUM) if avg else opts
        _wait(
            "reduce_scatter_tensor",
            self._gloo._reduce_scatter_base(host_out, _host(input), gloo_opts),
        )
        if avg:
            _divide(host_out, self.size())
        _copy_back([output], [host_out])
        return CompletedWork([output])

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_single_coalesced(
        self,
        outputs: list[Tensor],
        inputs: list[Tensor],
        opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
    ):
        for output, input in zip(outputs, inputs, strict=True):
            _wait("reduce_scatter_tensor_coalesced", self._reduce_scatter_base(output, input, opts))
        return CompletedWork(outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # --- gathers and broadcasts -------------------------------------------------------------

    def broadcast(self, tensors: list[Tensor], opts: BroadcastOptions = BroadcastOptions()):  # noqa: B008
        if not _staged(tensors):
            return self._gloo.broadcast(tensors, opts)
        hosts = [_host(t) for t in tensors]
        _wait("broadcast", self._gloo.broadcast(hosts, opts))
        _copy_back(tensors, hosts)
        return CompletedWork(tensors)

    def allgather(
        self,
        output_tensors: list[list[Tensor]],
        input_tensors: list[Tensor],
        opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
    ):
        flat = [t for ts in output_tensors for t in ts]
        if not _staged(flat + input_tensors):
            return self._gloo.allgather(output_tensors, input_tensors, opts)
        for outs, input in zip(output_tensors, input_tensors, strict=True):
            host_outs = [_host_buffer(t) for t in outs]
            if all(t.shape == input.shape for t in outs):
                _wait("allgather", self._gloo.allgather([host_outs], [_host(input)], opts))
            else:  # uneven (torchrec's all_gather_v): send our tensor to every rank
                self._alltoall_flat("allgather", host_outs, [_host(input)] * self.size())
            _copy_back(outs, host_outs)
        return CompletedWork(flat)

    def _allgather_base(
        self,
        output: Tensor,
        input: Tensor,
        opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
    ):
        if not _staged([output, input]):
            return self._gloo._allgather_base(output, input, opts)
        host_out = _host_buffer(output)
        _wait("all_gather_into_tensor", self._gloo._allgather_base(host_out, _host(input), opts))
        _copy_back([output], [host_out])
        return CompletedWork([output])

    all_gather_single = _allgather_base

    def all_gather_single_coalesced(
        self,
        outputs: list[Tensor],
        inputs: list[Tensor],
        opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
    ):
        for output, input in zip(outputs, inputs, strict=True):
            _wait("all_gather_into_tensor_coalesced", self._allgather_base(output, input, opts))
        return CompletedWork(outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(
        self,
        output_tensors: list[list[Tensor]],
        input_tensors: list[Tensor],
        opts: GatherOptions = GatherOptions(),  # noqa: B008
    ):
        flat = [t for ts in output_tensors for t in ts]
        if not _staged(flat + input_tensors):
            return self._gloo.gather(output_tensors, input_tensors, opts)
        host_outs = [[_host_buffer(t) for t in ts] for ts in output_tensors]
        _wait("gather", self._gloo.gather(host_outs, [_host(t) for t in input_tensors], opts))
        _copy_back(flat, [t for ts in host_outs for t in ts])
        return CompletedWork(flat)

    def scatter(
        self,
        output_tensors: list[Tensor],
        input_tensors: list[list[Tensor]],
        opts: ScatterOptions = ScatterOptions(),  # noqa: B008
    ):
        flat = [t for ts in input_tensors for t in ts]
        if not _staged(output_tensors + flat):
            return self._gloo.scatter(output_tensors, input_tensors, opts)
        host_outs = [_host_buffer(t) for t in output_tensors]
        host_ins = [[_host(t) for t in ts] for ts in input_tensors]
        _wait("scatter", self._gloo.scatter(host_outs, host_ins, opts))
        _copy_back(output_tensors, host_outs)
        return CompletedWork(output_tensors)

    # --- all-to-all ---------------------------------------------------------------------------

    def alltoall_base(
        self,
        output: Tensor,
        input: Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        opts: AllToAllOptions = AllToAllOptions(),  # noqa: B008
    ):
        if not _staged([output, input]):
            return self._gloo.alltoall_base(
                output, input, output_split_sizes, input_split_sizes, opts
            )
        host_out = _host_buffer(output)
        work = self._gloo.alltoall_base(
            host_out, _host(input), output_split_sizes, input_split_sizes, opts
        )
        _wait("all_to_all_single", work)
        _copy_back([output], [host_out])
        return CompletedWork([output])

    all_to_all_single = alltoall_base

    def alltoall(
        self,
        output_tensors: list[Tensor],
        input_tensors: list[Tensor],
        opts: AllToAllOptions = AllToAllOptions(),  # noqa: B008
    ):
        if not _staged(output_tensors + input_tensors):
            return self._gloo.alltoall(output_tensors, input_tensors, opts)
        host_outs = [_host_buffer(t) for t in output_tensors]
        self._alltoall_flat("all_to_all", host_outs, [_host(t) for t in input_tensors])
        _copy_back(output_tensors, host_outs)
        return CompletedWork(output_tensors)

    def _alltoall_flat(self, name: str, outputs: list[Tensor], inputs: list[Tensor]) -> None:
        """inputs[i] goes to rank i, outputs[i] comes from rank i, any shapes: one alltoall_base."""
        dtypes = {t.dtype for t in outputs + inputs}
        if len(dtypes) != 1:
            raise ValueError(
                f"{BACKEND_NAME} (simulated) {name}: tensors of several dtypes {dtypes}"
            )
        out_numels = [t.numel() for t in outputs]
        flat_out = torch.empty(sum(out_numels), dtype=outputs[0].dtype)
        flat_in = torch.cat([t.reshape(-1) for t in inputs])
        work = self._gloo.alltoall_base(
            flat_out, flat_in, out_numels, [t.numel() for t in inputs], AllToAllOptions()
        )
        _wait(name, work)
        _copy_back(outputs, flat_out.split(out_numels))

    # --- synchronisation and point-to-point ---------------------------------------------------

    def barrier(self, opts: BarrierOptions = BarrierOptions()):  # noqa: B008
        gloo_opts = BarrierOptions()
        gloo_opts.timeout = opts.timeout
        _wait("barrier", self._gloo.barrier(gloo_opts))
        return CompletedWork([])

    def send(self, tensors: list[Tensor], dstRank: int, tag: int):  # noqa: N803
        if not _staged(tensors):
            return self._gloo.send(tensors, dstRank, tag)
        # gloo's work holds the staging copies until they are sent
        work = self._gloo.send([_host(t) for t in tensors], dstRank, tag)
        return DeferredWork("send", work, lambda: tensors)

    def recv(self, tensors: list[Tensor], srcRank: int, tag: int):  # noqa: N803
        if not _staged(tensors):
            return self._gloo.recv(tensors, srcRank, tag)
        hosts = [_host_buffer(t) for t in tensors]

        def finish() -> list[Tensor]:
            _copy_back(tensors, hosts)
            return tensors

        return DeferredWork("recv", self._gloo.recv(hosts, srcRank, tag), finish)


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
