"""torchrec's sharded quantized inference on npu: ``shard_quant_model`` over one or more npus.

torchrec's unsharded quantized inference needs no adaptation (its quant EBC only tests
``device.type == "cpu"``).  Sharding it - ``torchrec.inference.modules.shard_quant_model``, the
``Quant*Sharder``s and their ``Infer*`` shardings and lookups - does: torchrec 1.9.2 decides
there with ``device.type == "cuda"`` (one string compared, not a device set) and, unless
``set_propogate_device(True)`` was called, with devices it hard-codes to ``"cuda"``.  The
shard_quant_model path was read end to end for such checks (quant_embedding_kernel,
quant_embeddingbag, quant_embedding, embedding_lookup's Infer* lookups, the Infer* classes of
sharding/{tw,rw,cw}_sharding, dist_data's KJTOneToAll / EmbeddingsAllToOne, distributed/utils.py,
shard.py, inference/modules.py); the ones below are what an npu device meets.  Each is a
wrapper that changes nothing unless the device it is given is an npu, so cpu, cuda and meta keep
torchrec's own code:

``QuantBatchedEmbeddingBag.__init__`` (torchrec/distributed/quant_embedding_kernel.py)
    replaces, for an npu ``device``, line 276 ``if device is not None and device.type ==
    "cuda": managed.append(compute_kernel_to_embedding_location(table.compute_kernel)) else:
    managed.append(EmbeddingLocation.HOST)`` and line 299 ``self._tbe_row_alignment = 16 if
    self._runtime_device.type == "cuda" else 1``: the IntNBit TBE of an npu shard gets the
    kernel's location (``quant`` -> ``EmbeddingLocation.DEVICE``: ``weights_dev`` on that npu;
    ``quant_uvm*`` -> MANAGED*, which fbgemm_npu refuses by name) and row alignment 16, as cuda
    does.  HOST on a non-cpu device is refused by upstream's TBE ("EmbeddingLocation.HOST doesn't
    work for CUDA device!"); 16 is also what the unsharded quant EBC uses and what fbgemm_npu's
    lookup gathers fastest (16-byte granules).  The TBE is built with the shard's npu current.
``ShardedQuantEmbeddingBagCollection.__init__`` and ``ShardedQuantEbcInputDist._create_input_dist``
    (torchrec/distributed/quant_embeddingbag.py; the input dist is built at the first forward)
    construct an npu module in torchrec's device-propagating mode, as if
    ``set_propogate_device(True)``: without it quant_embeddingbag.py line 223 passes ``None``
    for the sharding's device, embedding_lookup.py lines 1689 / 1773
    (``Infer{GroupedPooled,Grouped}EmbeddingsLookup``) place every rank's lookup on
    ``"cuda:{rank}"`` and dist_data.py line 1291 (``KJTOneToAll``) sends every rank's features
    to ``"cuda:{rank}"``.  That mode is torchrec's device-generic one (its own inference tests
    set it for cpu and cuda); with it, rank ``r`` of an npu model lives on ``npu:r``
    (``rank_device``), as ``cuda:r`` does.  The global flag is set for these two constructions
    only and restored after (sharding is single-threaded; a cpu or cuda module constructed on
    another thread meanwhile would see the propagating mode).

So ``shard_quant_model(model, world_size=n, compute_device="npu", sharding_device="npu")``
serves in one process on ``npu:0`` .. ``npu:n-1`` (inference sharding uses no process group:
``ShardingEnv.from_local``, ``KJTOneToAll`` copies each rank's features to its device,
``EmbeddingsAllToOne`` merges the pooled outputs on the input's device through
``fbgemm::merge_pooled_embeddings``), table-wise, row-wise and column-wise as the planner or a
plan chooses.  The weights come in as torchrec's do: ``sharded.load_state_dict(state_dict of
the unsharded quantized model)``, its ``embedding_bags`` entries (the TBEs' own buffers differ
per shard).  The sharders default to split scale / bias state dicts (quantize with
``quant_prep_enable_quant_state_dict_split_scale_bias_for_types``), which torchrec supports for
integer tables only; fp16 tables need sharders with
``FUSED_PARAM_QUANT_STATE_DICT_SPLIT_SCALE_BIAS`` False (whole rows: table-wise only; INT4 /
INT2 rows then load as their ``.elem`` bytes, since torchrec's ``UInt4Tensor`` wrapper does not
copy into a plain shard - on the CPU too).

Not adapted (not on this path): ``QuantBatchedEmbedding`` (EmbeddingCollection's kernel: the EC
sharding itself, quant_embedding.py line 218, offers sequence shardings to cuda / mtia only),
``ShardedQuantFeatureProcessedEmbeddingBagCollection``'s per-rank feature-processor copies
(quant_embeddingbag.py line 510: ``npu`` without an index for every rank),
``_copy_config`` (quant_embedding_kernel.py line 69, used by ``QuantBatchedEmbeddingBag.from_float``
only, which torchrec never calls) and ``_convert_weights`` (utils.py line 734, a cuda memory
optimisation of training weights).

:func:`apply` (run with the rest of the torchrec adaptation, see :mod:`fbgemm_npu.integrations`)
checks that each wrapped function still holds the code it replaces (torchrec moved: it raises);
:func:`revert` restores torchrec's functions.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from fbgemm_npu.integrations.torchrec_kernels import _constructor_swap, _npu_device
from fbgemm_npu.integrations.torchrec_planner import DEVICE

__all__ = [
    "PATCHES",
    "ROW_ALIGNMENT",
    "Patch",
    "apply",
    "input_dist_init",
    "is_applied",
    "propagating_device",
    "quant_kernel_init",
    "revert",
    "sharded_init",
]

# Row alignment of an npu shard's IntNBit TBE: cuda's (quant_embedding_kernel.py line 299) and
# the unsharded quant EBC's DEFAULT_ROW_ALIGNMENT.
ROW_ALIGNMENT = 16
_MARK = "__fbgemm_npu_torchrec_quant__"
_KERNEL = "torchrec.distributed.quant_embedding_kernel"


def _is_npu(device: Any) -> bool:
    return isinstance(device, torch.device) and device.type == DEVICE


@contextmanager
def propagating_device() -> Iterator[None]:
    """torchrec's ``get_propogate_device()`` answers True inside the block, then as before."""
    from torchrec.distributed import global_settings

    old = global_settings.get_propogate_device()
    global_settings.set_propogate_device(True)
    try:
        yield
    finally:
        global_settings.set_propogate_device(old)


def quant_kernel_init(orig: Callable[..., None]) -> Callable[..., None]:
    """``QuantBatchedEmbeddingBag.__init__``: an npu shard's TBE at the kernel's location.

    Replaces quant_embedding_kernel.py line 276 (``EmbeddingLocation.HOST`` unless
    ``device.type == "cuda"``) and line 299 (row alignment 1 unless cuda) for an npu
    ``device``: torchrec builds its TBE (``IntNBitTableBatchedEmbeddingBagsCodegen`` or the
    ``...WithLength`` subclass, by module-global name) once; that one construction gets, per
    table, ``compute_kernel_to_embedding_location(table.compute_kernel)`` where torchrec put
    HOST, and ``row_alignment=16``.
    """
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(self, *args, **kwargs)
        device = bound.arguments.get("device")
        if not _is_npu(device):
            orig(*bound.args, **bound.kwargs)
            return
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation

        kernel = importlib.import_module(_KERNEL)
        tables = bound.arguments["config"].embedding_tables
        locations = [kernel.compute_kernel_to_embedding_location(t.compute_kernel) for t in tables]

        def build(real: type, *a: Any, **kw: Any) -> Any:
            specs = []
            for spec, location in zip(kw.pop("embedding_specs"), locations, strict=True):
                name, rows, dims, sparse_type, old = spec
                if old == EmbeddingLocation.HOST:  # torchrec's generic-device default only
                    spec = (name, rows, dims, sparse_type, location)
                specs.append(spec)
            if kw.get("row_alignment") == 1:  # line 299's answer for a non-cuda device
                kw["row_alignment"] = ROW_ALIGNMENT
            return real(*a, embedding_specs=specs, **kw)

        with (
            _npu_device(device),
            _constructor_swap(kernel, "IntNBitTableBatchedEmbeddingBagsCodegen", build),
            _constructor_swap(kernel, "IntNBitTableBatchedEmbeddingBagsCodegenWithLength", build),
        ):
            orig(*bound.args, **bound.kwargs)
        self._tbe_row_alignment = self._emb_module.row_alignment

    return __init__


def _propagating_when_npu(param: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper factory: the wrapped method runs in the propagating mode when its ``param``
    argument is an npu device, else exactly as torchrec's."""

    def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(orig)

        @functools.wraps(orig)
        def method(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            if not _is_npu(bound.arguments.get(param)):
                return orig(*bound.args, **bound.kwargs)
            with propagating_device():
                return orig(*bound.args, **bound.kwargs)

        return method

    return wrap


# ``ShardedQuantEmbeddingBagCollection.__init__``: replaces, for an npu ``device``, the "cuda"
# devices of the non-propagating mode at quant_embeddingbag.py line 223 (the sharding's device)
# and embedding_lookup.py lines 1689 / 1773 (each rank's lookup on "cuda:{rank}").
sharded_init = _propagating_when_npu("device")
# ``ShardedQuantEbcInputDist._create_input_dist`` (run at the first forward): dist_data.py line
# 1291, ``KJTOneToAll`` sending each rank's features to "cuda:{rank}".
input_dist_init = _propagating_when_npu("input_dist_device")


@dataclass(frozen=True)
class Patch:
    """One wrapped torchrec function, and what its code must still hold for the wrap to fit."""

    module: str
    name: str  # "Class.__init__"
    wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]
    consts: tuple[str, ...] = ()  # string constants the replaced lines compare against
    names: tuple[str, ...] = ()  # global / attribute names the replaced lines use
    why: str = ""

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


PATCHES: tuple[Patch, ...] = (
    Patch(_KERNEL, "QuantBatchedEmbeddingBag.__init__", quant_kernel_init,
          consts=("cuda",),
          names=("compute_kernel_to_embedding_location", "IntNBitTableBatchedEmbeddingBagsCodegen",
                 "IntNBitTableBatchedEmbeddingBagsCodegenWithLength", "_tbe_row_alignment"),
          why="lines 276 / 299: HOST tables and row alignment 1 unless device.type == 'cuda'"),
    Patch("torchrec.distributed.quant_embeddingbag", "ShardedQuantEmbeddingBagCollection.__init__",
          sharded_init, names=("get_propogate_device",),
          why="line 223 / embedding_lookup.py 1689, 1773: cuda devices unless propagating"),
    Patch("torchrec.distributed.quant_embeddingbag", "ShardedQuantEbcInputDist._create_input_dist",
          input_dist_init, names=("create_input_dist",),
          why="dist_data.py line 1291: KJTOneToAll sends features to cuda unless propagating"),
)  # fmt: skip

_original: dict[int, tuple[type, str, Any]] = {}


def _resolve(patch: Patch) -> tuple[type, str, Any]:
    owner: Any = importlib.import_module(patch.module)
    *path, name = patch.name.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name, owner.__dict__[name]


def _check_code(patch: Patch, fn: Any) -> None:
    """Raise when ``fn`` no longer holds the constants and names the wrap replaces."""
    consts: set[Any] = set()
    names: set[str] = set()
    todo: list[types.CodeType] = [inspect.unwrap(fn).__code__]
    while todo:  # nested code objects too: a comprehension is one
        code = todo.pop()
        names.update(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                todo.append(c)
            elif isinstance(c, str):
                consts.add(c)
    missing = [c for c in patch.consts if c not in consts]
    missing += [n for n in patch.names if n not in names]
    if missing:
        raise RuntimeError(
            f"fbgemm_npu.integrations.torchrec_quant: {patch.qualname} no longer uses "
            f"{missing} ({patch.why}); torchrec's code moved: re-check this adaptation"
        )


def apply() -> None:
    """Wrap every function of :data:`PATCHES` (idempotent)."""
    for i, patch in enumerate(PATCHES):
        owner, name, stored = _resolve(patch)
        if i in _original or hasattr(stored, _MARK):
            continue
        _check_code(patch, stored)
        wrapped = patch.wrapper(stored)
        setattr(wrapped, _MARK, stored)
        _original[i] = (owner, name, stored)
        setattr(owner, name, wrapped)


def is_applied() -> bool:
    """Whether every function of :data:`PATCHES` is wrapped."""
    return all(hasattr(_resolve(p)[2], _MARK) for p in PATCHES)


def revert() -> None:
    """Restore torchrec's own functions (idempotent)."""
    for i in sorted(_original, reverse=True):
        owner, name, stored = _original.pop(i)
        setattr(owner, name, stored)
