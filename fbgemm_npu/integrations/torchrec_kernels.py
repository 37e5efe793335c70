"""Wrappers for torchrec's embedding kernels, sharding entry points and comm ops on npu.

See :mod:`.torchrec_symbols` for the list.  Each wrapper changes nothing unless the device it is
given (or would default to) is an npu.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from fbgemm_npu.integrations.torchrec_planner import DEVICE, npu_available

__all__ = [
    "default_device_shard",
    "dense_init",
    "fused_init",
    "thread_device_init",
    "thread_device_run",
    "wait_impl",
]


def _is_npu(device: Any) -> bool:
    return isinstance(device, torch.device) and device.type == DEVICE


@contextmanager
def _npu_device(device: torch.device) -> Iterator[None]:
    """``device`` is the current npu device inside the block (TBEs allocate on the current one)."""
    if device.index is None:
        yield
        return
    with torch.npu.device(device):
        yield


@contextmanager
def _constructor_swap(module: Any, name: str, build: Callable[..., Any]) -> Iterator[None]:
    """``module.name(...)`` is ``build(...)`` for its next call inside the block, then is restored.

    torchrec's kernels construct their TBE through the module-global class name; replacing the
    name by a subclass whose ``__new__`` builds the real object with npu arguments changes that
    one construction.  The name is restored as soon as it has been called, so ``isinstance``
    checks later in the constructor see upstream's class.
    """
    real = getattr(module, name)

    class _NpuConstruction(real):  # type: ignore[misc, valid-type]
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            setattr(module, name, real)
            return build(real, *args, **kwargs)

    setattr(module, name, _NpuConstruction)
    try:
        yield
    finally:
        setattr(module, name, real)


def _npu_construction_init(
    orig: Callable[..., None],
    class_name: str,
    builder: Callable[[inspect.BoundArguments], Callable[..., Any]],
) -> Callable[..., None]:
    """``orig`` (a torchrec kernel's ``__init__``), changed only for an npu ``device``: then it
    runs with that device current and with its one construction of ``class_name`` (a TBE class
    of ``batched_embedding_kernel``) done by ``builder(bound arguments)`` (see
    :func:`_constructor_swap`).  The fused and the dense kernels differ only in that builder.
    """
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(self, *args, **kwargs)
        device = bound.arguments.get("device")
        if not _is_npu(device):
            orig(*bound.args, **bound.kwargs)
            return
        from torchrec.distributed import batched_embedding_kernel as bek

        build = builder(bound)
        with _npu_device(device), _constructor_swap(bek, class_name, build):
            orig(*bound.args, **bound.kwargs)

    return __init__


def fused_init(orig: Callable[..., None]) -> Callable[..., None]:
    """Build the fused TBE of an npu kernel as ``ComputeDevice.CUDA`` + the kernel's location.

    torchrec 1.9.2 gives every device but cuda/mtia ``ComputeDevice.CPU`` +
    ``EmbeddingLocation.HOST``: upstream's CPU mode (``weights_host``, and only the sgd / adagrad /
    rowwise adagrad optimizers).  An npu is an accelerator with its own memory: its tables belong
    in ``weights_dev`` (``EmbeddingLocation.DEVICE`` for the ``fused`` kernel), with every
    optimizer of upstream's device path, which our pt2 lookup kernels implement.
    """

    def builder(bound: inspect.BoundArguments) -> Callable[..., Any]:
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
        from fbgemm_gpu.tbe.config.embedding_config import ComputeDevice
        from torchrec.distributed import batched_embedding_kernel as bek

        config = bound.arguments["config"]
        locations = [
            bek.compute_kernel_to_embedding_location(t.compute_kernel)
            for t in config.embedding_tables
        ]

        def build(real: type, *a: Any, **kw: Any) -> Any:
            if "embedding_specs" in kw:
                given = kw.pop("embedding_specs")
            else:
                given, a = a[0], a[1:]
            specs = []
            for spec, location in zip(given, locations, strict=True):
                rows, dims, old_location, old_compute = spec
                # only the generic-device default is replaced; anything else is left to upstream
                if (old_location, old_compute) == (EmbeddingLocation.HOST, ComputeDevice.CPU):
                    spec = (rows, dims, location, ComputeDevice.CUDA)
                specs.append(spec)
            return real(*a, embedding_specs=specs, **kw)

        return build

    return _npu_construction_init(orig, "SplitTableBatchedEmbeddingBagsCodegen", builder)


def dense_init(orig: Callable[..., None]) -> Callable[..., None]:
    """Build the dense TBE of an npu kernel on npu (``use_cpu=False``).

    torchrec 1.9.2 sets ``use_cpu`` whenever CUDA and MTIA are absent, which would put an npu
    kernel's weights on the CPU.
    """

    def builder(bound: inspect.BoundArguments) -> Callable[..., Any]:
        def build(real: type, *a: Any, **kw: Any) -> Any:
            kw["use_cpu"] = False
            return real(*a, **kw)

        return build

    return _npu_construction_init(orig, "DenseTableBatchedEmbeddingBagsCodegen", builder)


def default_device_shard(orig: Callable[..., Any]) -> Callable[..., Any]:
    """``shard`` / ``shard_modules`` with ``device=None``: the current npu device, not the CPU.

    torchrec picks the current cuda device when CUDA is available, else the CPU.
    """
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        if bound.arguments.get("device") is None and not torch.cuda.is_available():
            from torchrec.distributed.utils import get_device_type

            if npu_available() and get_device_type() == DEVICE:
                bound.arguments["device"] = torch.device(DEVICE, torch.npu.current_device())
        return orig(*bound.args, **bound.kwargs)

    return wrapper


def wait_impl(orig: Callable[..., Any]) -> Callable[..., Any]:
    """A collective's npu output is recorded on the current stream, as torchrec does for cuda."""

    @functools.wraps(orig)
    def _wait_impl(self: Any) -> Any:
        ret = orig(self)
        if isinstance(ret, torch.Tensor) and ret.device.type == DEVICE:
            ret.record_stream(torch.npu.current_stream())
        return ret

    return _wait_impl


def thread_device_run(orig: Callable[..., Any]) -> Callable[..., Any]:
    """torchrec's data-loading thread makes its npu device current, as it does for cuda."""

    @functools.wraps(orig)
    def run(self: Any) -> Any:
        device = getattr(self, "_device", None)
        if _is_npu(device) and device.index is not None:
            torch.npu.set_device(device)
        return orig(self)

    return run


def thread_device_init(orig: Callable[[torch.device], None]) -> Callable[[torch.device], None]:
    """The in-place batch-copy worker makes its npu device current, as it does for cuda."""

    @functools.wraps(orig)
    def init(device: torch.device) -> None:
        if _is_npu(device) and device.index is not None:
            torch.npu.set_device(device)
        orig(device)

    return init
