"""Build, load and switch on the simulated ``npu`` device (docs/design.md rule 5).

The C++ source ``csrc/npu_sim.cpp`` is compiled on first use with ``torch.utils.cpp_extension`` and
cached under ``$FBGEMM_NPU_CACHE`` (default ``~/.cache/fbgemm_npu``), keyed by the source, the torch
version and the Python ABI, so a second process loads it in milliseconds.  Loading registers the
PrivateUse1 backend, renames it ``npu`` and installs ``torch.npu`` (:mod:`.npu_module`).

Only for machines without torch_npu: on a real Ascend host torch_npu owns PrivateUse1.

Exit: torch's autograd engine runs the backward of npu nodes on one worker thread per device
(``pt_autograd_<i>``, one for each device the guard counts), and the worker that finishes a
backward drops its reference to the graph task *after* waking the caller, so it often drops the
last one.  The graph task holds a snapshot of the caller's thread-local state, and that holds
Python objects: torch 2.13's ``torch.autograd.backward`` stashes ``contextvars.copy_context()``
there for every backward (and modes or saved-tensor hooks add theirs).  Releasing them takes the
GIL; if the caller has reached interpreter finalisation by then, CPython ends the worker with
``pthread_exit``, whose unwinding through the graph task's ``noexcept`` destructor calls
``std::terminate`` ("terminate called without an active exception", SIGABRT).
:func:`_drain_autograd_device_threads`, registered with :mod:`atexit` on load, closes that window.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import sys
import sysconfig
import threading
import time
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("csrc") / "npu_sim.cpp"
_loaded = False
build_seconds: float | None = None  # wall time of this process's build, None if it was cached
# How long the exit-time drain waits for the autograd workers (a hung backward must not hang exit).
DRAIN_TIMEOUT_S = 10.0


def cache_dir() -> Path:
    """Where the compiled simulator lives: one folder per source, torch and Python ABI."""
    root = Path(os.environ.get("FBGEMM_NPU_CACHE", Path.home() / ".cache" / "fbgemm_npu"))
    key = hashlib.sha256()
    key.update(_SOURCE.read_bytes())
    key.update(torch.__version__.encode())
    key.update((sysconfig.get_config_var("SOABI") or sys.version).encode())
    return root / f"npu_sim-{key.hexdigest()[:16]}"


def _library_path() -> Path:
    return cache_dir() / "fbgemm_npu_sim.so"


def _build() -> Path:
    """Compile the extension into the cache (a lock in cpp_extension guards concurrent builds)."""
    global build_seconds
    from torch.utils import cpp_extension

    build = cache_dir()
    build.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    cpp_extension.load(
        name="fbgemm_npu_sim",
        sources=[str(_SOURCE)],
        build_directory=str(build),
        extra_cflags=["-O2"],
        is_python_module=False,
        verbose=os.environ.get("FBGEMM_NPU_VERBOSE_BUILD") == "1",
    )
    build_seconds = time.perf_counter() - start
    return _library_path()


def load() -> None:
    """Load (building first if needed) the simulator and install ``torch.npu``; idempotent."""
    global _loaded
    if _loaded:
        return
    if importlib.util.find_spec("torch_npu") is not None:
        raise RuntimeError(
            "fbgemm_npu.testing: torch_npu is installed, so the real npu device is used; "
            "the simulator is only for machines without torch_npu"
        )
    backend = torch._C._get_privateuse1_backend_name()
    if backend not in ("privateuseone", "npu"):
        raise RuntimeError(
            f"fbgemm_npu.testing: PrivateUse1 is already taken by backend {backend!r}"
        )
    lib = _library_path()
    if lib.exists():
        torch.ops.load_library(str(lib))
    else:
        _build()
    from fbgemm_npu.testing import npu_module

    if backend != "npu":
        torch.utils.rename_privateuse1_backend("npu")
        torch._register_device_module("npu", npu_module)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    from fbgemm_npu.testing import collectives

    collectives.register()  # "hccl" for npu tensors, staged through gloo
    atexit.register(_drain_autograd_device_threads)  # early, so it runs after later handlers
    _loaded = True


def is_loaded() -> bool:
    """Whether this process runs the simulated npu device."""
    return _loaded


def autograd_device_threads() -> list[str] | None:
    """Names of the autograd engine's device worker threads in this process (``pt_autograd_<i>``,
    started by the first backward); ``None`` where threads cannot be listed (no ``/proc``)."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    names = []
    for tid in tids:
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if name.startswith("pt_autograd_"):
            names.append(name)
    return sorted(names)


def _empty_backward_per_device() -> None:
    """One backward per simulated device, each run by that device's autograd worker.

    It calls the engine itself: ``torch.autograd.backward`` would stash a Python object (the
    ``contextvars`` context) in the graph task, the very thing the drain must not leave behind.
    """
    engine = torch.autograd.Variable._execution_engine
    for index in range(torch.npu.device_count()):
        device = torch.device("npu", index)
        leaf = torch.zeros((), device=device, requires_grad=True)
        out = leaf.mul(1.0)
        engine.run_backward((out,), (torch.ones((), device=device),), False, False, (), True, True)
        # ``leaf`` and ``out`` (the graph's nodes) are released here, by this thread, under the GIL


def _drain_autograd_device_threads() -> None:
    """At exit, before finalisation: let every autograd worker let go of earlier graph tasks.

    A worker takes tasks one at a time and drops the previous graph task (taking the GIL, which
    this thread releases while it waits) before it takes the next, so once it has run a task of
    the empty backward below, it holds nothing of an earlier backward.  The empty backward runs on
    a fresh thread, whose thread-local state holds no Python object (no mode, no hooks, no stashed
    context), so the graph task a worker drops last needs no GIL.  Skipped when no worker was
    started (no backward ran, or this is a forked child, which has none).
    """
    if autograd_device_threads() == []:
        return

    def drain() -> None:
        try:
            _empty_backward_per_device()
        except Exception:  # noqa: BLE001 - exit must go on; a broken engine aborts nothing here
            pass

    try:
        thread = threading.Thread(target=drain, name="fbgemm_npu-autograd-drain", daemon=True)
        thread.start()
    except RuntimeError:  # no new threads at this point of shutdown: drain from this thread
        drain()
        return
    thread.join(DRAIN_TIMEOUT_S)
