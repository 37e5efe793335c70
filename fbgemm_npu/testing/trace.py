"""A trace of one training step: which ``fbgemm::`` ops ran, on which kernel, what left the device.

:func:`trace` runs a callable under three observers:

* a torch-function mode that sees every ``torch.ops.fbgemm.*`` / ``torch.ops.mxrec.*`` call made
  from Python (torchrec, upstream's TBE frontend, our kernels), above autograd, with the devices
  of its tensors.  A call on npu "ran our kernel" when fbgemm_npu registered a PrivateUse1 or
  AutogradPrivateUse1 kernel for it (or the op is CompositeImplicitAutograd upstream: it
  decomposes into ops seen here and below); else the simulator's CPU fallback ran upstream's CPU
  kernel for it ("fallback").  A call with CPU tensors only ran upstream's CPU kernel, off the
  device;
* :func:`fbgemm_npu.testing.counters.count`, below autograd: device launches, host syncs, and
  custom ops that reached the device with no kernel of ours;
* a dispatch mode that lists device-to-host copies: floating-point ones are a tensor of the model
  (weights, activations, gradients) leaving the device; integer ones are metadata torchrec reads
  back (all-to-all splits), as on cuda.  Copies made by the simulated ``hccl`` backend to stage a
  collective through gloo are not counted: real HCCL moves the data device to device.

Attribution (:func:`owner_of_caller`, asked by the counters at each op): an op belongs to
fbgemm_npu when it runs inside an ``fbgemm::`` / ``mxrec::`` call, or when the innermost Python
frame that decides, walking out from the op, is fbgemm_npu's own code (its kernels, autograd
functions, ``integrations/`` and ``split_table/``).  Frames that decide: fbgemm_npu's (ours), the
simulated collective's staging (``testing/collectives*.py``, left out: real HCCL has no staging),
the main job's loop (``examples/``) and torchrec's (its all-to-all split-size reads, its KJT work:
theirs, even under one of our wrappers).  Frames that do not: torch's, upstream fbgemm_gpu's
Python (the frontend we run is charged to whoever called it) and the counters' own.  Ops with
no deciding frame (the autograd engine's C++ backward of torch ops) are not ours.
:func:`count_step` counts one step this way with the counters alone, cheaply; :func:`trace` adds
the heavier observers.  Both price the step with :mod:`fbgemm_npu.testing.cost_910b`.
"""

from __future__ import annotations

import functools
import sys
from collections import Counter as Tally
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from fbgemm_npu._registry import REGISTRY
from fbgemm_npu.testing.cost_910b import Cost
from fbgemm_npu.testing.counters import Counter, OpEvent, count

__all__ = [
    "MAIN_JOB",
    "OURS",
    "STAGING",
    "TORCHREC",
    "StepCount",
    "StepTrace",
    "count_step",
    "is_ours",
    "owner_of_caller",
    "trace",
]

_COPIES = frozenset({"_to_copy", "copy_", "_copy_from", "_copy_from_and_resize"})
_CUSTOM_NAMESPACES = frozenset({"fbgemm", "mxrec"})
_OUR_KEYS = frozenset({"PrivateUse1", "AutogradPrivateUse1"})
_STAGING_MODULE = "fbgemm_npu/testing/collectives.py"
_PACKAGE = Path(__file__).parents[1].as_posix() + "/"  # .../fbgemm_npu/: whose frames are ours
OURS, STAGING, MAIN_JOB, TORCHREC = "fbgemm_npu", "staging", "main job", "torchrec"


@dataclass
class StepTrace:
    """What one traced call did on the device ``device_type``."""

    device_type: str
    npu_calls: Tally[str] = field(default_factory=Tally)  # op -> calls on the device, ours
    decomposed_calls: Tally[str] = field(default_factory=Tally)  # CompositeImplicit upstream
    fallback_calls: Tally[str] = field(default_factory=Tally)  # on the device, no kernel of ours
    cpu_calls: Tally[str] = field(default_factory=Tally)  # custom ops that ran on CPU tensors
    missing_below: list[str] = field(default_factory=list)  # counters: no device kernel
    float_to_host: list[str] = field(default_factory=list)  # "dtype[shape] via aten.op"
    int_to_host: list[str] = field(default_factory=list)  # metadata read back (splits...)
    launches: int = 0
    syncs: int = 0
    # what a 910B would do differently (testing/routes_910b.py): op -> launches on its AI CPU,
    # op -> host stalls (host fallbacks such as _assert_async, blocking uploads)
    ai_cpu: Tally[str] = field(default_factory=Tally)
    stalls: Tally[str] = field(default_factory=Tally)
    ours: Cost = field(default_factory=Cost)  # fbgemm_npu's share (module doc: attribution)
    whole: Cost = field(default_factory=Cost)  # every op on the device
    result: Any = None

    @property
    def ok(self) -> bool:
        """Every custom op ran our device kernel and no floating-point tensor left the device."""
        return (
            bool(self.npu_calls)
            and not self.fallback_calls
            and not self.missing_below
            and not self.cpu_calls
            and not self.float_to_host
        )

    def summary(self) -> str:
        """A short text report."""
        lines = ["fbgemm ops called (calls, kernel):"]
        for tally, what in (
            (self.npu_calls, f"ours on {self.device_type}"),
            (self.decomposed_calls, "decomposes (upstream composite)"),
            (self.fallback_calls, "FALLBACK to upstream CPU kernel"),
            (self.cpu_calls, "ON CPU"),
        ):
            for op, n in sorted(tally.items()):
                lines.append(f"  {op:<58} {n:>4}  {what}")
        for item in self.missing_below:
            lines.append(f"  reached the device with no kernel of ours: {item}")
        lines.append(f"device launches {self.launches}, host syncs {self.syncs}")
        o = self.ours
        lines.append(
            f"fbgemm_npu's share: launches {o.launches}, AI-CPU {o.ai_cpu}, syncs + stalls "
            f"{o.syncs} + {o.stalls}, {o.megabytes:.2f} MB: {o.us / 1e3:.3f} ms on a 910B "
            f"(the whole step: {self.whole.us / 1e3:.3f} ms)"
        )
        for tally, what in ((self.ai_cpu, "AI-CPU launches"), (self.stalls, "host stalls")):
            top = ", ".join(f"{op} {n}" for op, n in tally.most_common(6))
            lines.append(f"on a 910B: {what} {sum(tally.values())}" + (f" ({top})" if top else ""))
        lines.append(f"floating-point tensors copied to host: {len(self.float_to_host)}")
        for item in self.float_to_host[:10]:
            lines.append(f"  {item}")
        lines.append(f"integer metadata copied to host: {len(self.int_to_host)}")
        return "\n".join(lines)


@dataclass
class StepCount:
    """One step counted by :func:`count_step`: fbgemm_npu's share, the whole, what it returned."""

    ours: Cost
    whole: Cost
    result: Any = None


@functools.cache
def _owner_of_file(filename: str) -> str | None:
    """Who a frame of ``filename`` speaks for, or None when it does not decide (module doc)."""
    path = filename.replace("\\", "/")
    if path.startswith(_PACKAGE):
        rel = path[len(_PACKAGE) :]
        if rel.startswith("testing/collectives"):
            return STAGING
        if rel.startswith("testing/"):
            return None  # the counters, the trace, the simulator: instruments, not the job
        return MAIN_JOB if rel.startswith("examples/") else OURS
    return TORCHREC if "/torchrec/" in path else None


def owner_of_caller() -> str | None:
    """Whose code issued the op being recorded: the innermost frame that decides (module doc)."""
    frame = sys._getframe(1)
    while frame is not None:
        owner = _owner_of_file(frame.f_code.co_filename)
        if owner is not None:
            return owner
        frame = frame.f_back
    return None


def is_ours(event: OpEvent) -> bool:
    """Whether a counted op is fbgemm_npu's: inside a custom-op call, or issued by our code."""
    return event.owner != STAGING and (event.call is not None or event.owner == OURS)


def _priced(c: Counter) -> tuple[Cost, Cost]:
    return Cost.of(c.events, is_ours), Cost.of(c.events)


def count_step(fn: Callable[[], Any], device_type: str = "npu") -> StepCount:
    """Run ``fn()`` under the counters alone, each op attributed (cheaper than :func:`trace`)."""
    with count(device_type) as c:
        c.owner = owner_of_caller
        result = fn()
    return StepCount(*_priced(c), result)


def _devices(args: tuple, kwargs: dict) -> set[str]:
    return {t.device.type for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}


def _staged_by_simulated_collective() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith(_STAGING_MODULE):
            return True
        frame = frame.f_back
    return False


def _kernel_kind(qualname: str) -> str:
    """ "ours", "decomposes" or "fallback" for a custom op called on the device."""
    if _OUR_KEYS & set(REGISTRY.registered.get(qualname, ())):
        return "ours"
    if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CompositeImplicitAutograd"):
        return "decomposes"
    return "fallback"


class _CustomOpMode(TorchFunctionMode):
    """Every custom-op call made from Python, with the devices of its tensors."""

    def __init__(self, rec: StepTrace) -> None:
        super().__init__()
        self.rec = rec

    def __torch_function__(
        self, func: Any, types: tuple, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            ns = (
                func.namespace
                if isinstance(func, torch._ops.OpOverload)
                else func._qualified_op_name.split("::")[0]
            )
            if ns in _CUSTOM_NAMESPACES:
                self._record(func, _devices(args, kwargs))
        return func(*args, **kwargs)

    def _record(self, func: Any, devices: set[str]) -> None:
        if isinstance(func, torch._ops.OpOverload):
            qualname, shown = func.name(), str(func).removesuffix(".default")
        else:
            qualname, shown = func._qualified_op_name, str(func)
        if self.rec.device_type in devices:
            kind = _kernel_kind(qualname)
            tally = {"ours": self.rec.npu_calls, "decomposes": self.rec.decomposed_calls}.get(
                kind, self.rec.fallback_calls
            )
            tally[shown] += 1
        elif devices == {"cpu"}:
            self.rec.cpu_calls[shown] += 1


class _HostSideMode(TorchDispatchMode):
    """Device-to-host copies, at the level the model calls (below autograd)."""

    def __init__(self, rec: StepTrace) -> None:
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: tuple,
        args: tuple = (),
        kwargs: dict | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        devices = _devices(args, kwargs)
        out = func(*args, **kwargs)
        packet = func._schema.name.split("::", 1)[1]
        if packet in _COPIES and self.rec.device_type in devices:
            src = args[0] if packet != "copy_" else args[1]
            dst = {"_to_copy": out, "copy_": args[0]}.get(
                packet, args[1] if len(args) > 1 else None
            )
            if (
                isinstance(src, torch.Tensor)
                and isinstance(dst, torch.Tensor)
                and src.device.type == self.rec.device_type
                and dst.device.type == "cpu"
                and not _staged_by_simulated_collective()
            ):
                item = f"{src.dtype}{list(src.shape)} via {func}"
                if src.is_floating_point():
                    self.rec.float_to_host.append(item)
                else:
                    self.rec.int_to_host.append(item)
        return out


def trace(fn: Callable[[], Any], device_type: str = "npu") -> StepTrace:
    """Run ``fn()`` and record its custom-op calls and host transfers (see the module doc)."""
    rec = StepTrace(device_type=device_type)
    with _CustomOpMode(rec), count(device_type) as c, _HostSideMode(rec):
        c.owner = owner_of_caller
        rec.result = fn()
    rec.ours, rec.whole = _priced(c)
    rec.missing_below = list(dict.fromkeys(c.missing_kernels))
    rec.launches, rec.syncs = c.launches, c.syncs
    for e in c.events:
        if e.ai_cpu:
            rec.ai_cpu[e.name] += 1
        if e.stall:
            rec.stalls[e.name] += 1
    return rec
