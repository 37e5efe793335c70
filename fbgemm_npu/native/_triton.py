"""Fused Triton kernels beside the tensor programs: which one runs, and how it is launched.

Why: on a 910B every eager op costs ~12 us of host enqueue time, so a tensor program of 9-34
launches is launch-bound at torchrec batch sizes; one Triton kernel is one launch.  Triton is
the one kernel language with an Ascend backend (triton-ascend) and GPU backends, and its
interpreter runs here, so one source serves both and is proven without hardware.

The tensor program stays the reference implementation and the fallback.  A registered kernel
asks :func:`use_triton` and either runs its Triton kernel (a module ``_triton_<topic>.py`` in its
family package, imported only then: Triton stays optional) or its tensor program.

Selection, ``FBGEMM_NPU_KERNEL`` (read at each call) or :func:`kernel_mode` (a context manager
that overrides it, process-wide while its block runs, so autograd's device threads see it too):

* ``tensor``: the tensor program, always.
* ``auto`` (the default): Triton where a native Triton backend for the tensor's device is
  importable (triton-ascend on a torch_npu device; Triton's nvidia / amd backend on CUDA / ROCm;
  a ``cpu`` backend where one is installed) and the op's kernel supports the call; else the
  tensor program.  It never fails because Triton is absent.  The interpreter is never picked by
  ``auto``: it is a proof tool, hundreds of times slower than the tensor program.
* ``triton``: Triton where the kernel supports the call, natively or under the interpreter
  (``TRITON_INTERPRET=1``, set before the first kernel module is imported: Triton reads it when a
  kernel is decorated), else the tensor program; an error naming the op when no Triton can run on
  that device at all.

Counting: :func:`launch` is one device launch (``triton.<kernel>`` in ``testing/counters.py``);
the interpreter's host copies of the arguments are hidden from the counters, as on a device no
such copies exist.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes, _get_current_dispatch_mode_stack

__all__ = ["MODES", "backend_for", "kernel_mode", "launch", "mode", "use_triton"]

MODES = ("tensor", "triton", "auto")
ENV = "FBGEMM_NPU_KERNEL"
# kernel_mode's stack is process-wide, not a context variable: autograd runs a device's backward
# on its own thread, which a context variable does not reach, and a backward must select as its
# forward did.  (As torch's own backend flags, it applies to every thread while the block runs.)
_stack: list[str] = []
_lock = threading.Lock()
# Triton backend packages (triton/backends/<name>) per device type; triton-ascend has shipped
# its backend as "ascend" (3.2) and "cann" (later).
_NATIVE = {"cuda": ("nvidia", "amd"), "npu": ("ascend", "cann", "npu"), "cpu": ("cpu",)}


def _check_mode(value: str, where: str) -> str:
    if value not in MODES:
        raise ValueError(f"{where} must be one of {', '.join(MODES)}, got {value!r}")
    return value


def mode() -> str:
    """The kernel mode now: :func:`kernel_mode`'s, else ``$FBGEMM_NPU_KERNEL``, else ``auto``."""
    if _stack:
        return _stack[-1]
    return _check_mode(os.environ.get(ENV, "auto").strip().lower() or "auto", ENV)


@contextmanager
def kernel_mode(value: str) -> Iterator[None]:
    """Run the block with kernel mode ``value`` (``tensor``, ``triton`` or ``auto``)."""
    value = _check_mode(value, "kernel_mode")
    with _lock:
        _stack.append(value)
        depth = len(_stack)
    try:
        yield
    finally:
        with _lock:
            del _stack[depth - 1]


@functools.cache
def _triton_backends() -> frozenset[str] | None:
    """The Triton backends installed, ``None`` when Triton cannot be imported."""
    if importlib.util.find_spec("triton") is None:
        return None
    try:
        from triton.backends import backends
    except Exception:  # a broken install (no driver libs): as good as absent
        return None
    return frozenset(backends)


def interpreting() -> bool:
    """``TRITON_INTERPRET=1``: Triton kernels run in its interpreter, on any device's tensors."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def _device_type(device: torch.device) -> str:
    backend = torch._C._get_privateuse1_backend_name()
    return "npu" if device.type in (backend, "privateuseone") else device.type


def _native(device: torch.device) -> bool:
    kind = _device_type(device)
    installed = _triton_backends()
    if not installed or not any(name in installed for name in _NATIVE.get(kind, ())):
        return False
    if kind == "npu":  # the simulated device has no Ascend driver behind it
        from fbgemm_npu._device import device_kind

        return device_kind() == "real"
    if kind == "cuda":
        return torch.cuda.is_available()
    return True


def backend_for(device: torch.device) -> str | None:
    """How a Triton kernel would run on ``device``: ``"native"``, ``"interpreter"`` or ``None``."""
    if interpreting():
        return "interpreter" if _triton_backends() is not None else None
    return "native" if _native(device) else None


def use_triton(op: str, device: torch.device, supported: bool = True) -> bool:
    """Whether ``op``'s call on ``device`` runs its Triton kernel (the module docstring's rules).

    ``supported``: the op's kernel handles this call (dtypes, sizes within its block limits).
    """
    chosen = mode()
    if chosen == "tensor" or (chosen == "auto" and interpreting()):
        return False
    if chosen == "auto":
        return supported and _native(device)
    if backend_for(device) is None:
        raise RuntimeError(
            f"{op}: {ENV}=triton but no Triton backend runs on device '{device}' "
            f"(installed: {sorted(_triton_backends() or ()) or 'triton not importable'}); install "
            "triton-ascend on an Ascend host, Triton on a GPU host, or set TRITON_INTERPRET=1 "
            "before the first call to run the interpreter; or use FBGEMM_NPU_KERNEL=auto"
        )
    return supported


def launch(name: str, kernel: Any, grid: tuple[int, ...], *args: Any, **meta: Any) -> None:
    """``kernel[grid](*args, **meta)``, counted as one launch named ``triton.<name>``.

    An empty grid launches nothing (a device refuses a zero-size grid).
    """
    if any(g <= 0 for g in grid):
        return
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    for m in _get_current_dispatch_mode_stack():
        record = getattr(m, "record_launch", None)
        if record is not None:
            record(f"triton.{name}", tensors)
    # The interpreter copies each tensor to the host and back: not device work, so not counted.
    with _disable_current_modes():
        kernel[grid](*args, **meta)
