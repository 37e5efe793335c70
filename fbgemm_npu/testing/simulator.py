"""Build, load and switch on the simulated ``npu`` device (docs/design.md rule 5).

The C++ source ``csrc/npu_sim.cpp`` is compiled on first use with ``torch.utils.cpp_extension`` and
cached under ``$FBGEMM_NPU_CACHE`` (default ``~/.cache/fbgemm_npu``), keyed by the source, the torch
version and the Python ABI, so a second process loads it in milliseconds.  Loading registers the
PrivateUse1 backend, renames it ``npu`` and installs ``torch.npu`` (:mod:`.npu_module`).

Only for machines without torch_npu: on a real Ascend host torch_npu owns PrivateUse1.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import sysconfig
import time
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("csrc") / "npu_sim.cpp"
_loaded = False
build_seconds: float | None = None  # wall time of this process's build, None if it was cached


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
    _loaded = True


def is_loaded() -> bool:
    """Whether this process runs the simulated npu device."""
    return _loaded
