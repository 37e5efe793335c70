"""What upstream's TBE Python frontend needs to run on an ``npu`` device, without editing upstream.

fbgemm_gpu's ``SplitTableBatchedEmbeddingBagsCodegen`` and ``DenseTableBatchedEmbeddingBagsCodegen``
know three devices: CPU, CUDA and MTIA.  Most of their Python is device-generic (buffers are made
on ``self.current_device``, the lookup invokers pass them to ``torch.ops.fbgemm.*``, which
dispatch to our PrivateUse1 / AutogradPrivateUse1 kernels), but a few spots ask ``torch.cuda``
directly.  Each is patched below, as narrowly as possible: a wrapper that changes nothing unless
an npu device is involved and CUDA is absent (in which case upstream would have raised), so CPU
and CUDA behaviour stay exactly upstream's.

Patches (checked against fbgemm_gpu 1.8.0, :data:`PATCHED_FOR`;
``tests/fbgemm/tbe/test_tbe_module_device.py`` fails loudly when the installed version differs,
since line-level assumptions may have moved):

| # | upstream symbol (module ``fbgemm_gpu.split_table_batched_embeddings_ops_training``) |
|---|---|
| 1 | ``SplitTableBatchedEmbeddingBagsCodegen.__init__``: ``device=None`` with CUDA-style specs
|   | (``ComputeDevice.CUDA``), no CUDA, an npu device present -> the current npu device is
|   | passed.  Why: upstream calls ``torch.cuda.current_device()`` (1.8.0 line ~854), which raises.
| 2 | ``SplitTableBatchedEmbeddingBagsCodegen.__init__``: npu device with a table at
|   | ``EmbeddingLocation.MANAGED`` or ``MANAGED_CACHING`` -> ``NotImplementedError`` naming the
|   | table.  Why: those need unified memory (``new_unified_tensor``) and the CUDA software cache,
|   | which an Ascend device lacks; upstream would fail deep inside (cache sizing asks
|   | ``torch.cuda.get_device_properties``) or, on the simulator, silently fake unified memory.
| 3 | ``DenseTableBatchedEmbeddingBagsCodegen.__init__``: ``use_cpu=False``, ``use_mtia=False``,
|   | no CUDA, an npu device present -> ``torch.cuda.current_device`` answers the current npu
|   | device while the constructor runs.  Why: upstream calls it (1.8.0 line ~4677) and the class
|   | has no ``device`` argument.
| 4 | ``SplitTableBatchedEmbeddingBagsCodegen.prefetch``: module on npu ->
|   | ``torch.cuda.current_stream`` answers ``torch.npu.current_stream`` during the call.  Why:
|   | ``prefetch`` evaluates ``torch.cuda.current_stream()`` unconditionally (1.8.0 line ~2961);
|   | with no cache on npu it then only prepares the inputs and books the timestep.
| 5 | ``IntNBitTableBatchedEmbeddingBagsCodegen.__init__`` (module ``..._inference``): npu device
|   | with a table at ``EmbeddingLocation.MANAGED`` or ``MANAGED_CACHING`` ->
|   | ``NotImplementedError`` naming the table (as 2; upstream would fail in
|   | ``new_unified_tensor`` or ``torch.cuda.get_device_properties``); built on npu, its layout
|   | (``D_offsets``, ``weights_tys``) is handed to the lookup's host cache.
| 6 | ``IntNBitTableBatchedEmbeddingBagsCodegen.initialize_logical_weights_placements_and_offsets``:
|   | on npu, the new ``weights_offsets`` / ``weights_placements`` are handed to that cache too,
|   | so no forward reads the layout back (torchrec builds upstream's class directly).

Checked on npu and needing no patch (the tests exercise each): ``split_embedding_weights()``
(offsets and placements are host lists), ``split_optimizer_states()``, ``get_optimizer_state()``,
``set_learning_rate`` / ``get_learning_rate`` / ``update_hyper_parameters`` (the learning rate is a
CPU scalar tensor by upstream's design), ``set_optimizer_step``, ``state_dict`` /
``load_state_dict``, ``init_embedding_weights_uniform``, VBE metadata (built on the host, copied to
``current_device``), ``prepare_inputs`` / ``bounds_check_indices``.
``get_available_compute_device`` (and ``ComputeDevice.get_available``) returns ``CPU`` on an
npu host, which is the construction style torchrec uses for non-CUDA devices
(``ComputeDevice.CPU``, ``EmbeddingLocation.HOST``, ``device=npu``), so it is left alone:
changing a global answer would change CPU users' behaviour.

:func:`apply` installs the patches; it is idempotent.  :func:`revert` restores upstream's functions
(used by tests).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

import fbgemm_gpu
import torch
from fbgemm_gpu import split_table_batched_embeddings_ops_inference as _inference
from fbgemm_gpu import split_table_batched_embeddings_ops_training as _training
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
from fbgemm_gpu.tbe.config.embedding_config import ComputeDevice

__all__ = ["PATCHED_FOR", "PATCHES", "apply", "is_applied", "npu_available", "revert"]

# The fbgemm_gpu version whose Python these patches were written and checked against.
PATCHED_FOR = "1.8.0"

_SPLIT = _training.SplitTableBatchedEmbeddingBagsCodegen
_DENSE = _training.DenseTableBatchedEmbeddingBagsCodegen
_INT_NBIT = _inference.IntNBitTableBatchedEmbeddingBagsCodegen
_MARK = "__fbgemm_npu_patch__"
_UNSUPPORTED_ON_NPU = (EmbeddingLocation.MANAGED, EmbeddingLocation.MANAGED_CACHING)


def npu_available() -> bool:
    """Whether an ``npu`` device (torch_npu's or the simulator's) is usable in this process."""
    if torch._C._get_privateuse1_backend_name() != "npu":
        return False
    mod = getattr(torch, "npu", None)
    return mod is not None and bool(mod.is_available())


def _cuda_absent_npu_present() -> bool:
    return not torch.cuda.is_available() and npu_available()


def _current_npu_device() -> torch.device:
    return torch.device("npu", torch.npu.current_device())


def _is_npu(device: Any) -> bool:
    if device is None:
        return False
    if isinstance(device, int):  # a bare index means a CUDA device to upstream
        return False
    return torch.device(device).type == "npu"


@contextlib.contextmanager
def _swap(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name = value`` for the duration of the block.

    Process-global while it lasts; only used where upstream's call would have raised (no CUDA), so
    another thread could only see a working answer where it would have seen an error.
    """
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def _register_layout(tbe: Any) -> None:
    """Seed the kernels' layout cache from host data, so even the first lookup needs no sync."""
    from fbgemm_npu.split_table import register_tbe_layout

    register_tbe_layout(tbe)


def _split_init(orig: Callable[..., None]) -> Callable[..., None]:
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(self, *args, **kwargs)
        specs = bound.arguments.get("embedding_specs") or []
        device = bound.arguments.get("device")
        compute = specs[0][3] if specs and len(specs[0]) > 3 else None
        if device is None and compute == ComputeDevice.CUDA and _cuda_absent_npu_present():
            device = _current_npu_device()
            bound.arguments["device"] = device
        if _is_npu(device):
            for t, spec in enumerate(specs):
                if len(spec) > 2 and spec[2] in _UNSUPPORTED_ON_NPU:
                    raise NotImplementedError(
                        f"SplitTableBatchedEmbeddingBagsCodegen on {torch.device(device)}: table "
                        f"{t} has EmbeddingLocation.{EmbeddingLocation(spec[2]).name}, which needs "
                        "unified memory and the CUDA software cache; an npu device supports "
                        "EmbeddingLocation.DEVICE (with ComputeDevice.CUDA) and "
                        "EmbeddingLocation.HOST (with ComputeDevice.CPU)"
                    )
        orig(*bound.args, **bound.kwargs)
        if _is_npu(device):
            _register_layout(self)

    setattr(__init__, _MARK, orig)
    return __init__


def _dense_init(orig: Callable[..., None]) -> Callable[..., None]:
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        on_npu = (
            not bound.arguments["use_cpu"]
            and not bound.arguments["use_mtia"]
            and _cuda_absent_npu_present()
        )
        if not on_npu:
            orig(*bound.args, **bound.kwargs)
            return
        with _swap(torch.cuda, "current_device", _current_npu_device):
            orig(*bound.args, **bound.kwargs)
        _register_layout(self)

    setattr(__init__, _MARK, orig)
    return __init__


def _prefetch(orig: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(orig)
    def prefetch(self: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(self, "current_device", torch.device("cpu")).type != "npu":
            return orig(self, *args, **kwargs)
        with _swap(torch.cuda, "current_stream", torch.npu.current_stream):
            return orig(self, *args, **kwargs)

    setattr(prefetch, _MARK, orig)
    return prefetch


def _register_int_nbit_layout(tbe: Any) -> None:
    """Seed the inference lookup's host cache with an IntNBit TBE's layout (host lists only)."""
    from fbgemm_npu.split_table import register_host_values

    ftm = tbe.feature_table_map
    specs = tbe.embedding_specs
    dims = [int(specs[t][2]) for t in ftm]
    seeds = [
        (getattr(tbe, "D_offsets", None), [0, *accumulate(dims)]),
        (getattr(tbe, "weights_tys", None), [int(specs[t][3].as_int()) for t in ftm]),
    ]
    offsets = getattr(tbe, "weights_physical_offsets", None)
    placements = getattr(tbe, "weights_physical_placements", None)
    if offsets is not None and placements is not None:
        seeds.append((getattr(tbe, "weights_offsets", None), [offsets[t] for t in ftm]))
        seeds.append((getattr(tbe, "weights_placements", None), [placements[t] for t in ftm]))
    for buf, values in seeds:
        if isinstance(buf, torch.Tensor) and buf.numel() == len(values):
            register_host_values(buf, values)


def _int_nbit_init(orig: Callable[..., None]) -> Callable[..., None]:
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(self, *args, **kwargs)
        device = bound.arguments.get("device")
        if _is_npu(device):
            for t, spec in enumerate(bound.arguments.get("embedding_specs") or []):
                if len(spec) > 4 and spec[4] in _UNSUPPORTED_ON_NPU:
                    raise NotImplementedError(
                        f"IntNBitTableBatchedEmbeddingBagsCodegen on {torch.device(device)}: "
                        f"table {t} has EmbeddingLocation.{EmbeddingLocation(spec[4]).name}, "
                        "which needs unified memory and the CUDA software cache; an npu device "
                        "supports EmbeddingLocation.DEVICE"
                    )
        orig(*bound.args, **bound.kwargs)
        if getattr(self, "current_device", torch.device("cpu")).type == "npu":
            _register_int_nbit_layout(self)

    setattr(__init__, _MARK, orig)
    return __init__


def _int_nbit_offsets(orig: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(orig)
    def initialize_logical_weights_placements_and_offsets(self: Any) -> None:
        orig(self)
        if getattr(self, "current_device", torch.device("cpu")).type == "npu":
            _register_int_nbit_layout(self)

    setattr(initialize_logical_weights_placements_and_offsets, _MARK, orig)
    return initialize_logical_weights_placements_and_offsets


# (class, attribute, wrapper factory): the table of the module docstring, in code.
PATCHES: tuple[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]], ...] = (
    (_SPLIT, "__init__", _split_init),
    (_DENSE, "__init__", _dense_init),
    (_SPLIT, "prefetch", _prefetch),
    (_INT_NBIT, "__init__", _int_nbit_init),
    (_INT_NBIT, "initialize_logical_weights_placements_and_offsets", _int_nbit_offsets),
)


def is_applied() -> bool:
    """Whether every patch of :data:`PATCHES` is installed."""
    return all(hasattr(getattr(cls, name), _MARK) for cls, name, _ in PATCHES)


def apply() -> None:
    """Install the patches (idempotent); warn if fbgemm_gpu is not the version checked."""
    version = getattr(fbgemm_gpu, "__version__", "?")
    if version != PATCHED_FOR:
        warnings.warn(
            f"fbgemm_npu.split_table.device: patches were written for fbgemm_gpu {PATCHED_FOR}, "
            f"installed is {version}; re-check them (see the table in this module)",
            RuntimeWarning,
            stacklevel=2,
        )
    for cls, name, wrap in PATCHES:
        current = cls.__dict__[name]
        if not hasattr(current, _MARK):
            setattr(cls, name, wrap(current))


def revert() -> None:
    """Restore upstream's functions (idempotent)."""
    for cls, name, _ in PATCHES:
        current = cls.__dict__[name]
        orig = getattr(current, _MARK, None)
        if orig is not None:
            setattr(cls, name, orig)
