"""``torch.npu`` for the simulated device: the subset of torch_npu's device module that torch,
torchrec and fbgemm_gpu ask of an accelerator.

Work runs synchronously on the host, so streams and events are complete as soon as they exist and
``synchronize`` has nothing to wait for.  Memory statistics are real: they count the bytes the
simulator's allocator holds per device.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
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


class Stream:
    """A stream of the simulated device: work is synchronous, so every stream is always idle.

    Streams are distinct objects with their own ids (the default stream of a device is id 0), so
    code that checks two streams differ, as fbgemm's prefetch does, sees what a device shows it.
    """

    _next_id = 1

    def __init__(
        self, device: torch.device | str | int | None = None, priority: int = 0, *, _id: int = -1
    ) -> None:
        self.device = torch.device("npu", _index(device))
        self.priority = priority
        if _id < 0:
            _id, Stream._next_id = Stream._next_id, Stream._next_id + 1
        self.stream_id = _id

    def wait_stream(self, stream: Stream) -> None:
        """Nothing to wait for."""

    def wait_event(self, event: Event) -> None:
        """Nothing to wait for."""

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Stream)
            and other.device == self.device
            and other.stream_id == self.stream_id
        )

    def __hash__(self) -> int:
        return hash(("npu-stream", self.device, self.stream_id))


class Event:
    """An event of the simulated device: complete as soon as recorded."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False) -> None:
        self.enable_timing = enable_timing

    def record(self, stream: Stream | None = None) -> None:
        """Complete at once."""

    def wait(self, stream: Stream | None = None) -> None:
        """Nothing to wait for."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def elapsed_time(self, end_event: Event) -> float:
        return 0.0


_default_streams: dict[int, Stream] = {}


def default_stream(device: torch.device | str | int | None = None) -> Stream:
    idx = _index(device)
    if idx not in _default_streams:
        _default_streams[idx] = Stream(idx, _id=0)
    return _default_streams[idx]


def current_stream(device: torch.device | str | int | None = None) -> Stream:
    return default_stream(device)


def set_stream(stream: Stream) -> None:
    """All streams are the default stream of their device."""


@contextlib.contextmanager
def stream(stream: Stream | None) -> Iterator[None]:
    """Streams change nothing on the simulated device; kept so stream-aware code runs."""
    yield


def is_pinned(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` (on the CPU) lives in pinned host memory of the simulator."""
    return bool(_ops().is_pinned(tensor))
