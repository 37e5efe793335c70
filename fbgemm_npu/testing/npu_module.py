"""``torch.npu`` for the simulated device: the subset of torch_npu's device module that torch,
torchrec and fbgemm_gpu ask of an accelerator.

Work runs synchronously on the host, so streams are always idle, events complete as soon as they
are recorded and ``synchronize`` has nothing to wait for; streams and events are nonetheless the
``torch.Stream`` / ``torch.Event`` objects of an accelerator (distinct ids, a current stream per
thread and device, ``record_stream`` accepted), so stream-aware code (torchrec's pipelines,
fbgemm's prefetch) takes its accelerator path.  Memory statistics are real: they count the bytes
the simulator's allocator holds per device.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

# Planner-facing capacity of one simulated device; a real Ascend 910B has 64 GiB of HBM.
_DEFAULT_TOTAL_MEMORY = 64 * 1024**3


def _ops() -> Any:
    return torch.ops.npu_sim


def is_available() -> bool:
    """The simulated device is always available once loaded."""
    return True


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    """torch calls this on device modules before first use; nothing to initialise here."""


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    """Number of simulated devices (2, or ``FBGEMM_NPU_SIM_DEVICES``)."""
    return int(_ops().device_count())


def current_device() -> int:
    return int(_ops().current_device())


def _index(device: torch.device | str | int | None) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "npu":
        raise ValueError(f"torch.npu: expected an npu device, got {device}")
    return current_device() if device.index is None else device.index


def set_device(device: torch.device | str | int) -> None:
    idx = _index(device)
    if idx >= 0:
        _ops().set_device(idx)


class device:  # noqa: N801 - mirrors torch.cuda.device
    """Context manager that changes the current npu device."""

    def __init__(self, device: torch.device | str | int | None) -> None:
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self) -> None:
        self.prev = current_device()
        if self.idx >= 0:
            set_device(self.idx)

    def __exit__(self, *exc: object) -> None:
        if self.idx >= 0:
            set_device(self.prev)


def synchronize(device: torch.device | str | int | None = None) -> None:
    """Nothing to wait for: simulated kernels finish before they return."""
    _index(device)


def get_device_name(device: torch.device | str | int | None = None) -> str:
    return f"simulated npu:{_index(device)}"


@dataclass(frozen=True)
class _DeviceProperties:
    name: str
    total_memory: int
    multi_processor_count: int = 1


def total_memory() -> int:
    """Capacity reported for one simulated device (``FBGEMM_NPU_SIM_HBM_BYTES`` overrides)."""
    return int(os.environ.get("FBGEMM_NPU_SIM_HBM_BYTES", _DEFAULT_TOTAL_MEMORY))


def get_device_properties(device: torch.device | str | int | None = None) -> _DeviceProperties:
    return _DeviceProperties(get_device_name(device), total_memory())


def memory_allocated(device: torch.device | str | int | None = None) -> int:
    """Bytes of device memory held by live tensors on this device."""
    return int(_ops().memory_stats(_index(device))[0])


def max_memory_allocated(device: torch.device | str | int | None = None) -> int:
    """Peak of :func:`memory_allocated` since start or the last :func:`reset_peak_memory_stats`."""
    return int(_ops().memory_stats(_index(device))[1])


def reset_peak_memory_stats(device: torch.device | str | int | None = None) -> None:
    _ops().reset_peak(_index(device))


def memory_reserved(device: torch.device | str | int | None = None) -> int:
    return memory_allocated(device)


def max_memory_reserved(device: torch.device | str | int | None = None) -> int:
    return max_memory_allocated(device)


def mem_get_info(device: torch.device | str | int | None = None) -> tuple[int, int]:
    """(free, total) bytes, as ``torch.cuda.mem_get_info`` answers."""
    total = total_memory()
    return max(total - memory_allocated(device), 0), total


def empty_cache() -> None:
    """Freed blocks go straight back to the host; there is no cache to empty."""


def memory_stats(device: torch.device | str | int | None = None) -> dict[str, int]:
    allocated, peak, count = (int(v) for v in _ops().memory_stats(_index(device)))
    return {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": peak,
        "num_alloc_retries": 0,
        "num_ooms": 0,
        "allocation.all.allocated": count,
    }


# Random numbers: the simulator draws from the CPU generator (see csrc/npu_sim.cpp).
# torch.manual_seed calls back into manual_seed_all here, so these touch the CPU generator directly.
def manual_seed(seed: int) -> None:
    torch.default_generator.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    torch.default_generator.manual_seed(seed)


def seed() -> None:
    torch.default_generator.seed()


def seed_all() -> None:
    torch.default_generator.seed()


def initial_seed() -> int:
    return torch.default_generator.initial_seed()


def get_rng_state(device: torch.device | str | int | None = None) -> torch.Tensor:
    return torch.get_rng_state()


def set_rng_state(new_state: torch.Tensor, device: torch.device | str | int | None = None) -> None:
    torch.set_rng_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [torch.get_rng_state() for _ in range(device_count())]


def set_rng_state_all(states: list[torch.Tensor]) -> None:
    if states:
        torch.set_rng_state(states[0])


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Autocast on npu may use these (torch asks PrivateUse1 modules for them)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported() -> bool:
    return True


class Stream(torch.Stream):
    """A stream of the simulated device: a ``torch.Stream`` of device type ``npu``, as
    ``torch_npu.npu.Stream`` is.

    Each new stream has its own id (a device's default stream has id 0), the current stream is
    kept per thread and device by the simulator's device guard, and ``torch.npu.stream``,
    ``torch.Stream``'s own ``with`` and ``torch.accelerator`` all set it.  Work is synchronous,
    so a stream is always idle: ``query`` is True, ``synchronize`` and ``wait_*`` return at once.
    ``priority`` is kept (0 down to -7; torch_npu and CUDA use 0 and -1).
    """

    def __new__(
        cls, device: torch.device | str | int | None = None, priority: int = 0, **kwargs: Any
    ) -> Stream:
        if kwargs:  # stream_id / device_index / device_type: wrap an existing stream
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, torch.device("npu", _index(device)), priority=priority)

    @property
    def priority(self) -> int:
        return int(_ops().stream_priority(self.stream_id))

    def wait_event(self, event: torch.Event) -> None:
        """Future work on this stream waits for ``event`` (here: it is complete)."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Future work on this stream waits for the work queued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        """Record ``event`` (a new :class:`Event` if ``None``) on this stream and return it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<torch.npu.Stream device={self.device} stream_id={self.stream_id}>"


class _EventType(type):
    """Makes ``torch.npu.Event(...)`` build a ``torch.Event`` on the current npu device, and
    ``isinstance(e, torch.npu.Event)`` hold for every npu ``torch.Event``.  A subclass would not
    do: torch's ``record_event`` and ``elapsed_time`` accept only ``torch.Event`` itself."""

    def __call__(  # type: ignore[override]
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        return torch.Event(
            torch.device("npu", current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "npu"


class Event(metaclass=_EventType):
    """An event of the simulated device: ``torch.npu.Event(enable_timing=False, blocking=False,
    interprocess=False)`` is a ``torch.Event`` on the current npu device.

    ``record(stream=None)`` / ``wait(stream=None)`` default to the current stream; it is complete
    as soon as it is recorded (work is synchronous) and keeps the host time of its recording, so
    ``elapsed_time`` between two events (``enable_timing=True``) measures the host work between
    them, in milliseconds.
    """


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(
        stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type
    )


def default_stream(device: torch.device | str | int | None = None) -> Stream:
    """The default stream (id 0) of ``device`` (default: the current device)."""
    current = torch.accelerator.current_stream(_index(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def current_stream(device: torch.device | str | int | None = None) -> Stream:
    """The current stream of this thread on ``device`` (default: the current device)."""
    return _wrap(torch.accelerator.current_stream(_index(device)))


def set_stream(stream: torch.Stream | None) -> None:
    """Make ``stream`` current on its device, and its device current (as ``torch.cuda`` does);
    ``None`` does nothing."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes a stream current (on its device) and restores the streams, as
    ``torch_npu.npu.StreamContext`` does; a no-op for ``None``."""

    def __init__(self, stream: torch.Stream | None) -> None:
        self.stream = stream
        self.src_prev_stream: Stream | None = None
        self.dst_prev_stream: Stream | None = None

    def __enter__(self) -> torch.Stream | None:
        if self.stream is None:
            return None
        self.src_prev_stream = current_stream()
        if self.src_prev_stream.device != self.stream.device:
            self.dst_prev_stream = current_stream(self.stream.device)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is None:
            return
        if self.dst_prev_stream is not None:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.npu.stream(s):`` runs the block with ``s`` current (:class:`StreamContext`)."""
    return StreamContext(stream)


def is_pinned(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` (on the CPU) lives in pinned host memory of the simulator."""
    return bool(_ops().is_pinned(tensor))
