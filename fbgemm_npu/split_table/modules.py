"""npu-aware TBE classes: what the fbgemm_gpu mirror gives for upstream's three TBE classes.

``fbgemm_npu.split_table_batched_embeddings_ops_training.SplitTableBatchedEmbeddingBagsCodegen``
(and every other mirrored module that re-exports one of these names) is the subclass below, not
upstream's class (:data:`fbgemm_npu._mirror.REPLACEMENTS`). Each is a thin subclass: same
``__name__`` / ``__qualname__``, ``isinstance`` with upstream's class holds, and only the default
device differs -- and only on a host with an npu device and no CUDA
(:func:`fbgemm_npu.split_table.device._cuda_absent_npu_present`). Elsewhere (CPU-only, CUDA) each
behaves exactly like upstream's class. The rest of the npu handling (MANAGED tables refused,
layout registration, ``prefetch``) is the constructor patch of
:mod:`fbgemm_npu.split_table.device`, which upstream's classes, and hence these, carry.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from fbgemm_gpu import split_table_batched_embeddings_ops_inference as _inference
from fbgemm_gpu import split_table_batched_embeddings_ops_training as _training
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation

from fbgemm_npu.split_table.device import _cuda_absent_npu_present, _current_npu_device

__all__ = [
    "INT_NBIT_LOOKUP_OP",
    "DenseTableBatchedEmbeddingBagsCodegen",
    "IntNBitTableBatchedEmbeddingBagsCodegen",
    "SplitTableBatchedEmbeddingBagsCodegen",
    "int_nbit_lookup_on_npu",
]

_HOST, _DEVICE = EmbeddingLocation.HOST, EmbeddingLocation.DEVICE
# The op behind IntNBitTableBatchedEmbeddingBagsCodegen.forward.
INT_NBIT_LOOKUP_OP = "fbgemm::int_nbit_split_embedding_codegen_lookup_function"


def int_nbit_lookup_on_npu() -> bool:
    """Whether :data:`INT_NBIT_LOOKUP_OP` has a PrivateUse1 (npu) kernel registered now."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(INT_NBIT_LOOKUP_OP, "PrivateUse1")


def _with_default_device(
    cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` for ``cls.__init__`` (less ``self``), ``device`` defaulting to npu.

    Unchanged unless ``device`` is not given (or ``None``), an npu device is present and CUDA
    absent; then ``device`` is the current npu device.
    """
    bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    if bound.arguments.get("device") is None and _cuda_absent_npu_present():
        bound.arguments["device"] = _current_npu_device()
    return bound.args[1:], bound.kwargs


class SplitTableBatchedEmbeddingBagsCodegen(_training.SplitTableBatchedEmbeddingBagsCodegen):
    """Upstream's training TBE; with no ``device`` given, it builds on the current npu device.

    Differs from upstream's class only on a host with an npu device and no CUDA, and only when
    ``device`` is ``None``: then ``device`` becomes ``torch.device("npu",
    torch.npu.current_device())``, whatever the specs' ``ComputeDevice`` (upstream would build
    ``ComputeDevice.CPU`` specs on the CPU and fail on ``ComputeDevice.CUDA`` ones). So a script
    written for fbgemm_gpu on a CPU host (``EmbeddingLocation.HOST``, ``ComputeDevice.CPU``)
    runs on npu once it imports fbgemm_npu. ``device="cpu"`` builds on the CPU, as upstream.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        args, kwargs = _with_default_device(
            _training.SplitTableBatchedEmbeddingBagsCodegen, args, kwargs
        )
        super().__init__(*args, **kwargs)


class DenseTableBatchedEmbeddingBagsCodegen(_training.DenseTableBatchedEmbeddingBagsCodegen):
    """Upstream's dense TBE; with ``use_cpu=False`` (the default) it builds on the current npu.

    Upstream's class has no ``device`` argument: ``use_cpu=False, use_mtia=False`` means the
    current CUDA device. On a host with an npu device and no CUDA, the current npu device is used
    instead -- by the constructor patch 3 of :mod:`fbgemm_npu.split_table.device`, which this
    class inherits; it adds no code of its own, so that the default is decided in one place.
    ``use_cpu=True`` builds on the CPU, as upstream.
    """


class IntNBitTableBatchedEmbeddingBagsCodegen(_inference.IntNBitTableBatchedEmbeddingBagsCodegen):
    """Upstream's inference TBE; with no ``device`` given, it builds on the current npu device.

    The lookup it calls (:data:`INT_NBIT_LOOKUP_OP`) runs on npu (the inference family,
    ``fbgemm_npu/native/fbgemm/inference/``); while that op has no PrivateUse1 kernel
    (:func:`int_nbit_lookup_on_npu`, checked at each construction) this class is upstream's.
    Otherwise, on a host with an npu device and no CUDA:

    * ``device=None`` builds on the current npu device (upstream would ask
      ``torch.cuda.current_device()``), and tables the specs place at
      ``EmbeddingLocation.HOST`` (a script written for a CPU host) are placed at
      ``EmbeddingLocation.DEVICE``, which upstream requires off the CPU;
    * on an npu device (this class or upstream's: the constructor patches 5 and 6 of
      :mod:`fbgemm_npu.split_table.device`), ``EmbeddingLocation.MANAGED`` /
      ``MANAGED_CACHING`` tables are refused by name, and the layout is handed to the lookup's
      host cache from the module's host lists, so no forward reads it back.

    ``device="cpu"`` builds on the CPU, as upstream.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        upstream = _inference.IntNBitTableBatchedEmbeddingBagsCodegen
        if int_nbit_lookup_on_npu():
            bound = inspect.signature(upstream.__init__).bind(None, *args, **kwargs)
            if bound.arguments.get("device") is None and _cuda_absent_npu_present():
                bound.arguments["device"] = _current_npu_device()
                # a CPU host's script: HOST tables, which upstream refuses off the CPU
                bound.arguments["embedding_specs"] = [
                    (*s[:4], _DEVICE if s[4] == _HOST else s[4])
                    for s in bound.arguments["embedding_specs"]
                ]
                args, kwargs = bound.args[1:], bound.kwargs
        super().__init__(*args, **kwargs)


for _cls in (SplitTableBatchedEmbeddingBagsCodegen, IntNBitTableBatchedEmbeddingBagsCodegen):
    # help() and inspect.signature show upstream's arguments
    _cls.__init__.__signature__ = inspect.signature(_cls.__mro__[1].__init__)  # type: ignore[attr-defined]
del _cls
