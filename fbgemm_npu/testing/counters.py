"""Count what costs on an NPU: launches, host syncs and ATen ops torch_npu lacks (DESIGN rule 6).

Why count: on an Ascend 910B every eager op costs about 12 us of host time to launch, whatever its
size, and a device-to-host synchronisation stalls the host until the device queue drains; a kernel
written as a torch tensor program is fast when it launches few ops and never syncs.  Each family's
``budgets.py`` gives its ops a budget (docs/ops.md), and the tests hold each kernel to it with
:func:`assert_budget` (through :func:`fbgemm_npu.testing.budgets.assert_op_budget`).

``with count() as c:`` installs a :class:`~torch.utils._python_dispatch.TorchDispatchMode` that
sees every ATen op below autograd.  An op is recorded when one of its tensor arguments (nested lists
included) is on the counted device, or when a ``device=`` argument names it (factory ops):

* **launch**: an ATen op that runs a device kernel.  Not launches: views (``func.is_view``),
  metadata / alias ops (``detach``, ``_unsafe_view``, ``alias``, ``set_``, ``resize_``, ...) and
  pure allocations (``empty``, ``empty_strided``, ``empty_like``, ``new_empty``...): they touch no
  device memory.  A device-to-host copy and ``_local_scalar_dense`` (``item()``) are memcpys,
  counted as syncs only; a host-to-device copy is counted as a launch.
* **sync**: the host waits for the device: ``item()``, ``equal``, ``is_nonzero``, a copy from the
  device to the host, and ops whose output size only the data knows (``nonzero``, ``masked_select``,
  ``unique*``, ``repeat_interleave`` without ``output_size``, indexing with a boolean mask,
  ``bincount``): the host must read a size back before it can allocate the output.
* **unsupported**: an ATen op missing from torch_npu 2.13's native op list
  (``aten_ops_torch_npu_2_13.txt``, derived from torch_npu 2.13's own op tables; see
  docs/hardware.md); on a real Ascend host it falls back to the CPU or fails.  Matching:
  ``name.overload`` first, then the bare ``name`` for the ``default`` overload.  An unlisted op
  with a ``CompositeExplicitAutograd`` kernel (``zeros_like``, ``new_full``, ``fill.Scalar``...)
  is not flagged: it decomposes on the device too, so it is run through its decomposition with
  the counter active and its parts are counted.
  A custom op with no kernel for the device (it would run through the backend's fallback) is
  flagged as well.
* **ai_cpu**: a launch that a real 910B sends to its AI CPU (``int64`` ``cumsum``,
  ``searchsorted``, integer ``sort``...), by the table in :mod:`fbgemm_npu.testing.routes_910b`.
* **stall**: the host waits on a 910B where the counts above see no sync: a host-route op
  (``_assert_async``, torch_npu's CPU fallback) or a host-to-device copy that is not
  ``non_blocking`` from pinned memory (``torch.tensor(..., device="npu")``, ``x.to("npu")``).
  Stalls and ai_cpu launches are reported apart: ``launches`` and ``syncs`` do not change.
* **fused kernels** (Triton, ``native/_triton.launch``) are one launch each, named
  ``triton.<kernel>``; the interpreter's host copies inside it are not counted.
* **nbytes** of a launch: its device tensors in and out (``cost_910b.tensor_bytes``); **owner**:
  what ``Counter.owner``, when set, answers as the op is recorded (the trace: whose code ran it).

Attribution: a custom op (``fbgemm::``, ``mxrec::`` or any non-``aten`` namespace) on the device
opens a *call*.  Inside ``__torch_dispatch__`` the mode is popped, so a plain ``func(...)`` would
hide the kernel's inner ops; instead the op is redispatched straight to the device's backend key
with the mode re-entered, which runs our kernel and makes its ATen ops visible.  A call's lists
are inclusive: an op run by a nested call counts for the inner and the outer call.  The totals
(``c.launches``...) count each op once, inside calls or not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from fbgemm_npu.testing.cost_910b import tensor_bytes
from fbgemm_npu.testing.routes_910b import copy_devices, device_of, route, stall_reason
from fbgemm_npu.testing.torch_npu_ops import torch_npu_runs_whole, torch_npu_supports

__all__ = ["CallRecord", "Counter", "OpEvent", "assert_budget", "count", "torch_npu_supports"]

_aten = torch.ops.aten

# Alias / metadata ops that are not flagged by ``is_view`` but run no kernel either.
_METADATA_PACKETS = frozenset(
    {
        "detach", "_unsafe_view", "_reshape_alias", "alias", "lift_fresh", "sym_size",
        "sym_stride", "sym_numel", "sym_storage_offset", "set_", "resize_", "resize_as_",
        "_resize_output_", "_local_scalar_dense_placeholder", "is_same_size", "_version",
    }
)  # fmt: skip
# Allocations: memory from the caching allocator, no kernel.
_ALLOC_PACKETS = frozenset(
    {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "empty_permuted"}
)
# The host must learn an output size from the data before it can allocate the output.
_DATA_DEPENDENT_PACKETS = frozenset(
    {
        "nonzero", "masked_select", "_unique", "_unique2", "unique_dim", "unique_consecutive",
        "unique_dim_consecutive", "argwhere", "bincount", "_nested_tensor_from_mask",
    }
)  # fmt: skip
_COPY_PACKETS = frozenset({"_to_copy", "copy_", "_copy_from", "_copy_from_and_resize"})
_BOOL_INDEX_PACKETS = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})
_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}


@dataclass
class OpEvent:
    """One recorded ATen op."""

    name: str  # "aten.add.Tensor"
    launch: bool
    sync: str | None  # the reason, when the op synchronises
    unsupported: bool
    call: int | None  # index in Counter.calls of the innermost open call, if any
    ai_cpu: bool = False  # a launch routed to the 910B's AI CPU (routes_910b)
    stall: str | None = None  # why the host waits on a 910B (host fallback, blocking upload)
    nbytes: int = 0  # a launch's device tensors, inputs and outputs (a 910B cost estimate)
    owner: str | None = None  # Counter.owner's answer when the op was recorded


@dataclass
class CallRecord:
    """One call of a custom op on the device and the ATen ops it ran (nested calls included)."""

    op: str  # "fbgemm.asynchronous_complete_cumsum.default"
    depth: int = 0
    parent: int | None = None
    launches: list[str] = field(default_factory=list)
    syncs: list[str] = field(default_factory=list)  # "aten.nonzero.default (data-dependent size)"
    unsupported: list[str] = field(default_factory=list)
    ai_cpu: list[str] = field(default_factory=list)  # launches a 910B runs on its AI CPU
    stalls: list[str] = field(default_factory=list)  # "aten._assert_async.default (host fallback)"


@dataclass
class Counter:
    """What ran inside one ``with count()``: per-call records and every recorded ATen op."""

    device_type: str
    calls: list[CallRecord] = field(default_factory=list)
    events: list[OpEvent] = field(default_factory=list)
    missing_kernels: list[str] = field(default_factory=list)  # custom ops with no device kernel
    result: Any = None  # set by assert_budget: what fn returned
    owner: Callable[[], str | None] | None = None  # asked at each recorded op (trace.py: whose)

    @property
    def launches(self) -> int:
        """Device kernel launches, in total."""
        return sum(e.launch for e in self.events)

    @property
    def syncs(self) -> int:
        """Device-to-host synchronisations, in total."""
        return sum(e.sync is not None for e in self.events)

    # Launches a 910B runs on its AI CPU; host waits a 910B adds (fallbacks, blocking uploads).
    ai_cpu = property(lambda self: sum(e.ai_cpu for e in self.events))
    stalls = property(lambda self: sum(e.stall is not None for e in self.events))

    @property
    def unsupported(self) -> list[str]:
        """ATen ops torch_npu 2.13 lacks and custom ops with no device kernel, each once."""
        flagged = [e.name for e in self.events if e.unsupported] + self.missing_kernels
        return list(dict.fromkeys(flagged))

    launch_ops = property(lambda self: [e.name for e in self.events if e.launch])
    sync_ops = property(lambda self: [f"{e.name} ({e.sync})" for e in self.events if e.sync])

    def summary(self) -> str:
        """A short text table: one row per call, one for ops outside calls, one for the total."""
        rows = [
            (("  " * c.depth) + c.op, len(c.launches), len(c.syncs), c.unsupported)
            for c in self.calls
        ]
        outside = [e for e in self.events if e.call is None]
        if outside or not self.calls:
            flagged = list(dict.fromkeys(e.name for e in outside if e.unsupported))
            launches = sum(e.launch for e in outside)
            syncs = sum(e.sync is not None for e in outside)
            rows.append(("(outside calls)", launches, syncs, flagged))
        rows.append(("total", self.launches, self.syncs, self.unsupported))
        width = max(len(r[0]) for r in rows)
        lines = [f"{'op':<{width}}  launches  syncs  unsupported"]
        for name, launches, syncs, flagged in rows:
            lines.append(f"{name:<{width}}  {launches:>8}  {syncs:>5}  {', '.join(flagged) or '-'}")
        return "\n".join(lines)


def _resolve_device_type(device_type: str) -> str:
    backend = torch._C._get_privateuse1_backend_name()
    return backend if device_type in ("privateuseone", "privateuse1", backend) else device_type


def _backend_key(device_type: str) -> str:
    return _DEVICE_KEYS.get(device_type, "PrivateUse1")


def _sync_reason(func: torch._ops.OpOverload, args: tuple, kwargs: dict, dev: str) -> str | None:
    packet = func._schema.name.split("::", 1)[1]
    if packet in ("_local_scalar_dense", "is_nonzero"):
        return "scalar read to host"
    if packet == "equal":
        return "bool result read to host"
    if packet in _COPY_PACKETS:
        src, dst = copy_devices(packet, args, kwargs)
        return "device-to-host copy" if src == dev and dst == "cpu" != dev else None
    if packet in _DATA_DEPENDENT_PACKETS:
        return "data-dependent output size"
    if packet == "repeat_interleave" and kwargs.get("output_size", _arg(args, 2)) is None:
        return "data-dependent output size (no output_size)"
    if packet in _BOOL_INDEX_PACKETS:
        indices = kwargs.get("indices", _arg(args, 1)) or []
        if any(
            isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices
        ):
            return "boolean-mask index (data-dependent size)"
    return None


def _arg(args: tuple, i: int) -> Any:
    return args[i] if len(args) > i else None


def _runs_no_kernel(func: torch._ops.OpOverload) -> bool:
    packet = func._schema.name.split("::", 1)[1]
    return func.is_view or packet in _METADATA_PACKETS or packet in _ALLOC_PACKETS


@functools.cache
def _has_kernel(qualname: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)


def _decomposes(qualname: str) -> bool:
    """Unlisted op with a CompositeExplicitAutograd kernel: on the device it runs as its parts."""
    return _has_kernel(qualname, "CompositeExplicitAutograd") or _has_kernel(
        qualname, "CompositeExplicitAutogradNonFunctional"
    )


class _CountingMode(TorchDispatchMode):
    def __init__(self, counter: Counter, device_type: str) -> None:
        super().__init__()
        self.counter = counter
        self.dev = _resolve_device_type(device_type)
        self.key = _backend_key(self.dev)
        self.keyset = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, self.key))
        self.open: list[int] = []  # indices of the calls now running, outermost first

    def _on_device(self, args: tuple, kwargs: dict) -> bool:
        for leaf in tree_leaves((args, kwargs)):
            if isinstance(leaf, torch.Tensor) and leaf.device.type == self.dev:
                return True
            if isinstance(leaf, torch.device) and leaf.type == self.dev:
                return True  # to.device(cpu_tensor, npu, ...): an upload, device positional
        return device_of(kwargs.get("device")) == self.dev

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: tuple,
        args: tuple = (),
        kwargs: dict | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if not self._on_device(args, kwargs):
            return func(*args, **kwargs)
        if func.namespace != "aten":
            return self._call(func, args, kwargs)
        if _has_kernel(func.name(), "CompositeImplicitAutograd") and not torch_npu_runs_whole(func):
            # Seen undecomposed below autograd: ``reshape`` may hide a ``clone``; count the parts
            # as the device does -- unless torch_npu has its own kernel (``silu_backward``).
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        if func is _aten.lift_fresh.default:
            # torch.tensor(data, device=npu) copies host data to the device below the modes;
            # lift_fresh of the device result is all that shows: count that copy as a launch.
            stall = "blocking host-to-device copy"  # from pageable memory: never non_blocking
            self._record("aten.lift_fresh (host-to-device copy)", True, None, False, stall=stall)
            return self._run(func, args, kwargs)
        if _runs_no_kernel(func):
            return func(*args, **kwargs)
        listed = torch_npu_supports(func)
        if not listed and _decomposes(func.name()):
            before = len(self.counter.events)
            with self:
                out = func.redispatch(self.keyset, *args, **kwargs)
            if len(self.counter.events) == before:  # the backend ran it whole: one launch
                where = route(func, args, kwargs)
                stall = stall_reason(func, args, kwargs, self.dev, where)
                self._record(func.name(), True, None, False, where == "ai_cpu", stall)
                self.counter.events[-1].nbytes = tensor_bytes(self.dev, (args, kwargs, out))
            return out
        sync = _sync_reason(func, args, kwargs, self.dev)
        # Memcpys to the host are syncs, not kernels; every other recorded op runs a kernel.
        launch = not (sync == "device-to-host copy" or func is _aten._local_scalar_dense.default)
        where = route(func, args, kwargs)
        stall = stall_reason(func, args, kwargs, self.dev, where)
        self._record(str(func), launch, sync, not listed, launch and where == "ai_cpu", stall)
        return self._run(func, args, kwargs)

    def record_launch(self, name: str, tensors: list[torch.Tensor]) -> None:
        """One fused kernel (``native/_triton.launch``): a launch of ``tensors``' bytes."""
        self._record(name, True, None, False)
        self.counter.events[-1].nbytes = tensor_bytes(self.dev, tensors)

    def _run(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
        event, out = self.counter.events[-1], func(*args, **kwargs)  # the op just recorded
        event.nbytes = tensor_bytes(self.dev, (args, kwargs, out)) if event.launch else 0
        return out

    def _record(
        self,
        name: str,
        launch: bool,
        sync: str | None,
        unsupported: bool,
        ai_cpu: bool = False,
        stall: str | None = None,
    ) -> None:
        name = name.replace("::", ".")
        call = self.open[-1] if self.open else None
        owner = self.counter.owner() if self.counter.owner is not None else None
        self.counter.events.append(OpEvent(name, launch, sync, unsupported, call, ai_cpu, stall))
        self.counter.events[-1].owner = owner
        for i in self.open:
            rec = self.counter.calls[i]
            if launch:
                rec.launches.append(name)
            if sync is not None:
                rec.syncs.append(f"{name} ({sync})")
            if unsupported:
                rec.unsupported.append(name)
            if ai_cpu:
                rec.ai_cpu.append(name)
            if stall is not None:
                rec.stalls.append(f"{name} ({stall})")

    def _call(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
        """Open a call record, then run the op's device kernel with this mode re-entered."""
        parent = self.open[-1] if self.open else None
        rec = CallRecord(op=str(func), depth=len(self.open), parent=parent)
        # An upstream composite (CompositeImplicitAutograd, seen below autograd) runs its parts,
        # which are counted as nested calls: not a missing kernel.
        if not torch._C._dispatch_has_kernel_for_dispatch_key(
            func.name(), self.key
        ) and not _has_kernel(func.name(), "CompositeImplicitAutograd"):
            # No kernel of ours: the backend fallback (the simulator's CPU fallback) would run it.
            flag = f"{func} (no {self.key} kernel)"
            rec.unsupported.append(flag)
            self.counter.missing_kernels.append(flag)
            for i in self.open:
                self.counter.calls[i].unsupported.append(flag)
        self.counter.calls.append(rec)
        self.open.append(len(self.counter.calls) - 1)
        try:
            with self:
                return func.redispatch(self.keyset, *args, **kwargs)
        finally:
            self.open.pop()


@contextmanager
def count(device_type: str = "privateuseone") -> Iterator[Counter]:
    """Count launches, syncs and unsupported ATen ops on ``device_type`` inside the block.

    ``"privateuseone"`` (or ``"npu"``) means the PrivateUse1 device, whatever it is called.
    """
    counter = Counter(device_type=_resolve_device_type(device_type))
    with _CountingMode(counter, device_type):
        yield counter


def assert_budget(
    fn: Callable[[], Any],
    *,
    launches: int,
    syncs: int,
    unsupported: int | None = None,
    device_type: str = "privateuseone",
    stalls_are_syncs: bool = False,
) -> Counter:
    """Run ``fn`` under :func:`count` and fail, listing every op, if it goes over its budget.

    ``unsupported=None`` does not check flagged ops; ``unsupported=0`` forbids them.
    ``stalls_are_syncs``: a 910B's host stalls count against ``syncs`` (the op budgets' rule).
    The counter is returned with ``fn``'s return value in ``counter.result``.
    """
    with count(device_type) as c:
        c.result = fn()
    waits = c.syncs + (c.stalls if stalls_are_syncs else 0)
    over = c.launches > launches or waits > syncs
    if unsupported is not None and len(c.unsupported) > unsupported:
        over = True
    if over:
        raise AssertionError(
            f"over budget on {c.device_type}: {c.launches} launches (budget {launches}), "
            f"{c.syncs} syncs + {c.stalls} stalls (budget {syncs}), "
            f"{len(c.unsupported)} unsupported"
            f"{'' if unsupported is None else f' (budget {unsupported})'}\n"
            f"launches: {', '.join(c.launch_ops) or '-'}\n"
            f"syncs: {', '.join(c.sync_ops) or '-'}\n"
            f"stalls: {', '.join(f'{e.name} ({e.stall})' for e in c.events if e.stall) or '-'}\n"
            f"unsupported: {', '.join(c.unsupported) or '-'}\n{c.summary()}"
        )
    return c
