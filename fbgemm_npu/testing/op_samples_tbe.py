"""Sample calls of the tbe family's ops for ``torch.library.opcheck`` (see :mod:`.op_samples`).

The pt2 lookups and ``dense_embedding_codegen_lookup_function`` take what upstream's modules
pass them, so their samples are captured: a small upstream TBE is built on the device (its layout
registered with the kernels, as :mod:`fbgemm_npu.split_table` does for a user's module), one
forward runs under a :class:`torch.overrides.TorchFunctionMode` that records the lookup op's
exact ``(args, kwargs)``, and the op is not run past the record.  ``rowwise_rmsprop_ar`` has no
``EmbOptimType`` in fbgemm_gpu 1.8.0: its call is :func:`.tbe_inputs.rmsprop_ar_kwargs`.  The
captured tensors are the module's own (weights, optimizer states, the registered layout), and
``placeholder_autograd_tensor`` requires grad, as upstream's module makes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["LOOKUP_OPTIMIZERS", "OPS", "builder", "captured_call"]

Sample = tuple[tuple[Any, ...], dict[str, Any]]
I32, I64 = torch.int32, torch.int64

# optimizer of the pt2 lookup -> the EmbOptimType name that builds it (None: built by hand)
LOOKUP_OPTIMIZERS: dict[str, str | None] = {
    "adagrad": "EXACT_ADAGRAD",
    "adam": "ADAM",
    "lamb": "LAMB",
    "lars_sgd": "LARS_SGD",
    "none": "NONE",
    "partial_rowwise_adam": "PARTIAL_ROWWISE_ADAM",
    "partial_rowwise_lamb": "PARTIAL_ROWWISE_LAMB",
    "rowwise_adagrad": "EXACT_ROWWISE_ADAGRAD",
    "rowwise_adagrad_with_counter": "EXACT_ROWWISE_ADAGRAD",
    "rowwise_rmsprop_ar": None,
    "sgd": "EXACT_SGD",
}
SPECS = [(10, 4), (12, 8)]  # (rows, dim) per table: two distinct dims
ONE_D = [(10, 4), (12, 4)]  # the none optimizer takes one dim
DENSE = "fbgemm::dense_embedding_codegen_lookup_function"
BOUNDS = "fbgemm::bounds_check_indices"
INFOS = "fbgemm::get_infos_metadata"
VBE = "fbgemm::generate_vbe_metadata"


def _lookup(optimizer: str) -> str:
    return f"fbgemm::split_embedding_codegen_lookup_{optimizer}_function_pt2"


OPS: tuple[str, ...] = (*map(_lookup, LOOKUP_OPTIMIZERS), DENSE, BOUNDS, INFOS, VBE)


class _Stop(Exception):
    """Raised once the call is recorded: the op itself does not run."""


def _qualname(func: Any) -> str | None:
    """``"ns::name"`` of an op packet (how upstream calls ops) or overload; else None."""
    if isinstance(func, torch._ops.OpOverloadPacket):
        return func._qualified_op_name
    if isinstance(func, torch._ops.OpOverload):
        return func._schema.name
    return None


class _Record(TorchFunctionMode):
    def __init__(self, qualname: str) -> None:
        super().__init__()
        self.qualname = qualname
        self.call: Sample | None = None

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if _qualname(func) == self.qualname:
            self.call = (tuple(args), dict(kwargs or {}))
            raise _Stop
        return func(*args, **(kwargs or {}))


def captured_call(qualname: str, run: Callable[[], Any]) -> Sample:
    """The ``(args, kwargs)`` with which ``run()`` calls op ``qualname`` first."""
    with _Record(qualname) as rec:
        try:
            run()
        except _Stop:
            pass
    if rec.call is None:
        raise RuntimeError(f"op_samples: the module never called {qualname}")
    return rec.call


def _batch(specs: list[tuple[int, int]], device: str, seed: int) -> dict[str, Any]:
    """Batch 2 per table, 0 to 3 indices per bag (repeated rows), per-sample weights."""
    from fbgemm_npu.testing.tbe_inputs import make_batches, total_unique_indices

    b = make_batches(specs, 2, 1, seed=seed, weighted=True, max_len=3)[0]
    return {
        "indices": b.indices.to(device),
        "offsets": b.offsets.to(device),
        "per_sample_weights": b.per_sample_weights.to(device),
        "unique": total_unique_indices(b, len(specs)),
    }


def _split_lookup(optimizer: str, device: str) -> Sample:
    from fbgemm_gpu.split_embedding_configs import EmbOptimType

    from fbgemm_npu.split_table import register_tbe_layout
    from fbgemm_npu.testing.tbe_inputs import counter_regularization, training_tbe

    specs = ONE_D if optimizer == "none" else SPECS
    kwargs: dict[str, Any] = {}
    if optimizer == "rowwise_adagrad_with_counter":
        kwargs = counter_regularization("counter_decouple")
    opt = EmbOptimType[LOOKUP_OPTIMIZERS[optimizer] or ""]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the module's initial weights
        tbe = training_tbe(opt, specs, device, "cuda_user", **kwargs)
    register_tbe_layout(tbe)
    b = _batch(specs, device, seed=1)
    call = {"total_unique_indices": b["unique"]} if optimizer == "none" else {}
    return captured_call(_lookup(optimizer), lambda: tbe(b["indices"], b["offsets"], **call))


def _rmsprop_ar(device: str) -> Sample:
    from fbgemm_npu.testing.tbe_inputs import host_layout, rmsprop_ar_kwargs

    layout = host_layout(SPECS, device)
    g = torch.Generator().manual_seed(0)
    weights = torch.rand(layout.total_weights, generator=g).to(device)
    states = [torch.zeros(layout.total_rows, device=device) for _ in range(2)]
    b = _batch(SPECS, device, seed=1)
    return (), rmsprop_ar_kwargs(layout, weights, states, b["indices"], b["offsets"], 1)


def _lookup_builder(optimizer: str) -> Callable[[str], list[Sample]]:
    def build(device: str) -> list[Sample]:
        if LOOKUP_OPTIMIZERS[optimizer] is None:
            return [_rmsprop_ar(device)]
        return [_split_lookup(optimizer, device)]

    return build


def _dense(device: str) -> list[Sample]:
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        DenseTableBatchedEmbeddingBagsCodegen,
    )

    from fbgemm_npu.split_table import register_tbe_layout

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        tbe = DenseTableBatchedEmbeddingBagsCodegen(SPECS, use_cpu=False).to(device)
    register_tbe_layout(tbe)
    b = _batch(SPECS, device, seed=2)
    return [
        captured_call(DENSE, lambda: tbe(b["indices"], b["offsets"])),
        captured_call(DENSE, lambda: tbe(b["indices"], b["offsets"], b["per_sample_weights"])),
    ]


def _bounds(device: str) -> list[Sample]:
    def t(v: list[int], dtype: torch.dtype = I64) -> torch.Tensor:
        return torch.tensor(v, dtype=dtype, device=device)

    rows = t([5, 5])
    warning = torch.zeros(1, dtype=I64, device=device)
    # mode WARNING (1): index 9 is out of bounds and is zeroed, the warning counted
    plain = ((rows, t([0, 9, 3, 4]), t([0, 1, 2, 3, 4]), 1, warning), {})
    vbe = {"B_offsets": t([0, 1, 3], I32), "max_B": 2}
    warning2 = torch.zeros(1, dtype=I64, device=device)
    return [plain, ((rows, t([0, 4, 3]), t([0, 1, 2, 3]), 1, warning2), vbe)]


def _infos(device: str) -> list[Sample]:
    return [((torch.zeros(4, dtype=I32, device=device), 13, 3), {})]


def _vbe(device: str) -> list[Sample]:
    """Three tables (dims 4, 8, 12), two ranks; batch sizes per table per rank."""
    bs = [[1, 2], [3, 0], [2, 2]]
    dims = [4, 8, 12]

    def t(v: Any, dtype: torch.dtype = I32) -> torch.Tensor:
        return torch.tensor(v, dtype=dtype, device=device)

    b_off = [0]
    for row in bs:
        b_off.append(b_off[-1] + sum(row))
    per_rank = [[0, row[0], row[0] + row[1]] for row in bs]
    ofr = [0]
    for r in range(2):
        for k in range(3):
            ofr.append(ofr[-1] + bs[k][r] * dims[k])
    bits = torch.ops.fbgemm.get_infos_metadata(torch.zeros(1), 10, 3)[0]  # upstream's, on the CPU
    args = (t(b_off), t(per_rank), t(ofr, I64), t([0, 4, 12, 24]), 12, False, 3, bits, 10)
    return [(args, {})]


def builder(qualname: str) -> Callable[[str], list[Sample]]:
    """The sample builder of tbe op ``qualname`` (one of :data:`OPS`)."""
    fixed = {DENSE: _dense, BOUNDS: _bounds, INFOS: _infos, VBE: _vbe}
    if qualname in fixed:
        return fixed[qualname]
    prefix, suffix = "fbgemm::split_embedding_codegen_lookup_", "_function_pt2"
    return _lookup_builder(qualname.removeprefix(prefix).removesuffix(suffix))
