"""Wrappers for torchrec's planner and device queries (see :mod:`.torchrec_symbols`).

Each wrapper changes nothing unless an npu device is involved.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "DEFAULT_HBM_BYTES",
    "HBM_ENV",
    "get_device_type",
    "kernel_bw_lookup",
    "npu_available",
    "npu_hbm_bytes",
    "topology_init",
]

DEVICE = "npu"
# Planner HBM per npu when the device reports none: an Ascend 910B has 64 GiB.
DEFAULT_HBM_BYTES = 64 * 1024**3
# Overrides what the device reports (bytes), e.g. to plan for a smaller share of the device.
HBM_ENV = "FBGEMM_NPU_HBM_BYTES"

# Kernels whose bandwidth on npu is cuda's: tables in device memory (HBM).  UVM, caching and
# key-value kernels are not offered on npu (no unified memory), so they get no bandwidth.
_HBM_KERNELS = frozenset({"dense", "fused", "quant"})


def npu_available() -> bool:
    """Whether an ``npu`` device (torch_npu's or the simulator's) is usable in this process."""
    if torch._C._get_privateuse1_backend_name() != DEVICE:
        return False
    mod = getattr(torch, DEVICE, None)
    return mod is not None and bool(mod.is_available())


def npu_hbm_bytes(device: torch.device | int | None = None) -> int:
    """HBM capacity of one npu for the planner, in bytes.

    ``$FBGEMM_NPU_HBM_BYTES`` when set; else the device's total memory (``torch.npu.mem_get_info``,
    as torchrec users pass ``torch.cuda.get_device_properties().total_memory``); else
    :data:`DEFAULT_HBM_BYTES`.
    """
    override = os.environ.get(HBM_ENV, "").strip()
    if override:
        try:
            value = int(float(override))
        except ValueError as exc:
            raise ValueError(f"{HBM_ENV}={override!r}: expected a number of bytes") from exc
        if value <= 0:
            raise ValueError(f"{HBM_ENV}={override!r}: expected a positive number of bytes")
        return value
    if npu_available():
        mod = torch.npu
        try:
            if hasattr(mod, "mem_get_info"):
                return int(mod.mem_get_info(device)[1])
            return int(mod.get_device_properties(device).total_memory)
        except (RuntimeError, AttributeError, ValueError):
            pass  # a device that cannot say: the documented default
    return DEFAULT_HBM_BYTES


def topology_init(orig: Callable[..., None]) -> Callable[..., None]:
    """``Topology(compute_device="npu")`` with ``hbm_cap`` from :func:`npu_hbm_bytes`."""

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        names = ("world_size", "compute_device", "hbm_cap")
        bound = dict(zip(names, args, strict=False))  # the leading positionals
        compute_device = kwargs.get("compute_device", bound.get("compute_device"))
        if compute_device == DEVICE and kwargs.get("hbm_cap", bound.get("hbm_cap")) is None:
            if len(args) > 2:
                args = (*args[:2], npu_hbm_bytes(), *args[3:])
            else:
                kwargs["hbm_cap"] = npu_hbm_bytes()
        orig(self, *args, **kwargs)

    return __init__


def kernel_bw_lookup(orig: Callable[..., float | None]) -> Callable[..., float | None]:
    """Bandwidth of npu's HBM kernels (dense, fused, quant) from cuda's entries."""

    @functools.wraps(orig)
    def lookup(compute_device: str, compute_kernel: str, *args: Any, **kwargs: Any) -> Any:
        if compute_device == DEVICE:
            if compute_kernel not in _HBM_KERNELS:
                return None
            compute_device = "cuda"
        return orig(compute_device, compute_kernel, *args, **kwargs)

    return lookup


def get_device_type(orig: Callable[[], str]) -> Callable[[], str]:
    """``"npu"`` where torchrec would answer ``"cpu"`` while an npu device is present."""

    @functools.wraps(orig)
    def get_device_type() -> str:
        device_type = orig()
        if device_type == "cpu" and npu_available():
            return DEVICE
        return device_type

    return get_device_type
