"""The staged collectives of the simulator's ``"hccl"``, one function each (:mod:`.collectives`).

Each takes the :class:`~fbgemm_npu.testing.collectives.StagedProcessGroup` first and the c10d
method's arguments after it, as the group's methods of the same names forward them: CPU tensors
go to the wrapped gloo group as they are (its own asynchronous ``Work``); ``npu`` tensors are
copied to the host, reduced / gathered / exchanged by gloo, waited for and copied back
(:mod:`.collectives_staging`), and a completed ``Work`` is returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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

from fbgemm_npu.testing.collectives_staging import (
    CompletedWork,
    DeferredWork,
    allreduce_options,
    alltoall_flat,
    copy_back,
    divide,
    host,
    host_buffer,
    staged,
    sum_for_avg,
    wait,
)

if TYPE_CHECKING:
    from fbgemm_npu.testing.collectives import StagedProcessGroup

# The staging functions return gloo's Work (CPU tensors) or a completed one (npu tensors).
Result = dist.Work | CompletedWork | DeferredWork


def _finish(
    pg: StagedProcessGroup, targets: list[Tensor], hosts: list[Tensor], avg: bool
) -> CompletedWork:
    """Divide for AVG, copy the results back: the end of every staged collective."""
    if avg:
        for h in hosts:
            divide(h, pg.size())
    copy_back(targets, hosts)
    return CompletedWork(targets)


def _single(
    pg: StagedProcessGroup,
    name: str,
    run: Callable[[Tensor, Tensor], dist.Work],
    output: Tensor,
    input: Tensor,
    avg: bool = False,
) -> CompletedWork:
    """A one-output collective ``run(host output, host input)`` on staged tensors."""
    host_out = host_buffer(output)
    wait(name, run(host_out, host(input)))
    return _finish(pg, [output], [host_out], avg)


def _each(
    name: str,
    run: Callable[[Tensor, Tensor], dist.Work],
    outputs: list[Tensor],
    inputs: list[Tensor],
) -> CompletedWork:
    """A coalesced form: ``run(output, input)`` pair by pair."""
    for output, input in zip(outputs, inputs, strict=True):
        wait(name, run(output, input))
    return CompletedWork(outputs)


# --- reductions -------------------------------------------------------------------------


def allreduce(
    pg: StagedProcessGroup,
    tensors: list[Tensor],
    opts: AllreduceOptions = AllreduceOptions(),  # noqa: B008
) -> Result:
    if not staged(tensors):
        return pg.gloo.allreduce(tensors, opts)
    hosts = [host(t) for t in tensors]
    gloo_opts, avg = sum_for_avg(opts)
    wait("allreduce", pg.gloo.allreduce(hosts, gloo_opts))
    return _finish(pg, tensors, hosts, avg)


def allreduce_coalesced(
    pg: StagedProcessGroup,
    tensors: list[Tensor],
    opts: AllreduceCoalescedOptions = AllreduceCoalescedOptions(),  # noqa: B008
) -> Result:
    if not staged(tensors):
        return pg.gloo.allreduce_coalesced(tensors, opts)
    single = allreduce_options(opts.reduceOp, opts.timeout)
    for t in tensors:  # one staged allreduce each: gloo's coalesced form has the same cost here
        wait("allreduce_coalesced", allreduce(pg, [t], single))
    return CompletedWork(tensors)


def reduce(
    pg: StagedProcessGroup,
    tensors: list[Tensor],
    opts: ReduceOptions = ReduceOptions(),  # noqa: B008
) -> Result:
    if not staged(tensors):
        return pg.gloo.reduce(tensors, opts)
    hosts = [host(t) for t in tensors]
    gloo_opts, avg = sum_for_avg(opts)
    wait("reduce", pg.gloo.reduce(hosts, gloo_opts))
    if pg.rank() != opts.rootRank:
        return CompletedWork(tensors)
    return _finish(pg, tensors, hosts, avg)


def reduce_scatter(
    pg: StagedProcessGroup,
    output_tensors: list[Tensor],
    input_tensors: list[list[Tensor]],
    opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
) -> Result:
    flat = [t for ts in input_tensors for t in ts]
    if not staged(output_tensors + flat):
        return pg.gloo.reduce_scatter(output_tensors, input_tensors, opts)
    gloo_opts, avg = sum_for_avg(opts)
    for out, inputs in zip(output_tensors, input_tensors, strict=True):
        if all(t.shape == out.shape for t in inputs):
            host_out = host_buffer(out)
            work = pg.gloo.reduce_scatter([host_out], [[host(t) for t in inputs]], gloo_opts)
            wait("reduce_scatter", work)
        else:  # uneven (torchrec's reduce_scatter_v): reduce everything, keep our slice
            numels = [t.numel() for t in inputs]
            whole = torch.cat([host(t).reshape(-1) for t in inputs])
            single = allreduce_options(gloo_opts.reduceOp, opts.timeout)  # type: ignore[attr-defined]
            wait("reduce_scatter", pg.gloo.allreduce([whole], single))
            host_out = whole.split(numels)[pg.rank()].clone()
        _finish(pg, [out], [host_out], avg)
    return CompletedWork(output_tensors)


def reduce_scatter_base(
    pg: StagedProcessGroup,
    output: Tensor,
    input: Tensor,
    opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
) -> Result:
    if not staged([output, input]):
        return pg.gloo._reduce_scatter_base(output, input, opts)
    gloo_opts, avg = sum_for_avg(opts)

    def run(o: Tensor, i: Tensor) -> dist.Work:
        return pg.gloo._reduce_scatter_base(o, i, gloo_opts)

    return _single(pg, "reduce_scatter_tensor", run, output, input, avg)


def reduce_scatter_single_coalesced(
    pg: StagedProcessGroup,
    outputs: list[Tensor],
    inputs: list[Tensor],
    opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
) -> Result:
    def run(o: Tensor, i: Tensor) -> dist.Work:
        return reduce_scatter_base(pg, o, i, opts)

    return _each("reduce_scatter_tensor_coalesced", run, outputs, inputs)


# --- gathers and broadcasts -------------------------------------------------------------


def broadcast(
    pg: StagedProcessGroup,
    tensors: list[Tensor],
    opts: BroadcastOptions = BroadcastOptions(),  # noqa: B008
) -> Result:
    if not staged(tensors):
        return pg.gloo.broadcast(tensors, opts)
    hosts = [host(t) for t in tensors]
    wait("broadcast", pg.gloo.broadcast(hosts, opts))
    return _finish(pg, tensors, hosts, avg=False)


def allgather(
    pg: StagedProcessGroup,
    output_tensors: list[list[Tensor]],
    input_tensors: list[Tensor],
    opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
) -> Result:
    flat = [t for ts in output_tensors for t in ts]
    if not staged(flat + input_tensors):
        return pg.gloo.allgather(output_tensors, input_tensors, opts)
    for outs, input in zip(output_tensors, input_tensors, strict=True):
        host_outs = [host_buffer(t) for t in outs]
        if all(t.shape == input.shape for t in outs):
            wait("allgather", pg.gloo.allgather([host_outs], [host(input)], opts))
        else:  # uneven (torchrec's all_gather_v): send our tensor to every rank
            alltoall_flat(pg.gloo, "allgather", host_outs, [host(input)] * pg.size())
        copy_back(outs, host_outs)
    return CompletedWork(flat)


def allgather_base(
    pg: StagedProcessGroup,
    output: Tensor,
    input: Tensor,
    opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
) -> Result:
    if not staged([output, input]):
        return pg.gloo._allgather_base(output, input, opts)

    def run(o: Tensor, i: Tensor) -> dist.Work:
        return pg.gloo._allgather_base(o, i, opts)

    return _single(pg, "all_gather_into_tensor", run, output, input)


def all_gather_single_coalesced(
    pg: StagedProcessGroup,
    outputs: list[Tensor],
    inputs: list[Tensor],
    opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
) -> Result:
    def run(o: Tensor, i: Tensor) -> dist.Work:
        return allgather_base(pg, o, i, opts)

    return _each("all_gather_into_tensor_coalesced", run, outputs, inputs)


def gather(
    pg: StagedProcessGroup,
    output_tensors: list[list[Tensor]],
    input_tensors: list[Tensor],
    opts: GatherOptions = GatherOptions(),  # noqa: B008
) -> Result:
    flat = [t for ts in output_tensors for t in ts]
    if not staged(flat + input_tensors):
        return pg.gloo.gather(output_tensors, input_tensors, opts)
    host_outs = [[host_buffer(t) for t in ts] for ts in output_tensors]
    wait("gather", pg.gloo.gather(host_outs, [host(t) for t in input_tensors], opts))
    return _finish(pg, flat, [t for ts in host_outs for t in ts], avg=False)


def scatter(
    pg: StagedProcessGroup,
    output_tensors: list[Tensor],
    input_tensors: list[list[Tensor]],
    opts: ScatterOptions = ScatterOptions(),  # noqa: B008
) -> Result:
    flat = [t for ts in input_tensors for t in ts]
    if not staged(output_tensors + flat):
        return pg.gloo.scatter(output_tensors, input_tensors, opts)
    host_outs = [host_buffer(t) for t in output_tensors]
    host_ins = [[host(t) for t in ts] for ts in input_tensors]
    wait("scatter", pg.gloo.scatter(host_outs, host_ins, opts))
    return _finish(pg, output_tensors, host_outs, avg=False)


# --- all-to-all ---------------------------------------------------------------------------


def alltoall_base(
    pg: StagedProcessGroup,
    output: Tensor,
    input: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    opts: AllToAllOptions = AllToAllOptions(),  # noqa: B008
) -> Result:
    if not staged([output, input]):
        return pg.gloo.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def run(o: Tensor, i: Tensor) -> dist.Work:
        return pg.gloo.alltoall_base(o, i, output_split_sizes, input_split_sizes, opts)

    return _single(pg, "all_to_all_single", run, output, input)


def alltoall(
    pg: StagedProcessGroup,
    output_tensors: list[Tensor],
    input_tensors: list[Tensor],
    opts: AllToAllOptions = AllToAllOptions(),  # noqa: B008
) -> Result:
    if not staged(output_tensors + input_tensors):
        return pg.gloo.alltoall(output_tensors, input_tensors, opts)
    host_outs = [host_buffer(t) for t in output_tensors]
    alltoall_flat(pg.gloo, "all_to_all", host_outs, [host(t) for t in input_tensors])
    return _finish(pg, output_tensors, host_outs, avg=False)


# --- synchronisation and point-to-point ---------------------------------------------------


def barrier(
    pg: StagedProcessGroup,
    opts: BarrierOptions = BarrierOptions(),  # noqa: B008
) -> Result:
    gloo_opts = BarrierOptions()
    gloo_opts.timeout = opts.timeout
    wait("barrier", pg.gloo.barrier(gloo_opts))
    return CompletedWork([])


def send(pg: StagedProcessGroup, tensors: list[Tensor], dstRank: int, tag: int) -> Result:  # noqa: N803
    if not staged(tensors):
        return pg.gloo.send(tensors, dstRank, tag)
    # gloo's work holds the staging copies until they are sent
    work = pg.gloo.send([host(t) for t in tensors], dstRank, tag)
    return DeferredWork("send", work, lambda: tensors)


def recv(pg: StagedProcessGroup, tensors: list[Tensor], srcRank: int, tag: int) -> Result:  # noqa: N803
    if not staged(tensors):
        return pg.gloo.recv(tensors, srcRank, tag)
    hosts = [host_buffer(t) for t in tensors]

    def finish() -> list[Tensor]:
        copy_back(tensors, hosts)
        return tensors

    return DeferredWork("recv", pg.gloo.recv(hosts, srcRank, tag), finish)
