"""Inputs of the tbe family's tests: upstream's TBE modules built in either construction style,
random batches, one training step, and the raw pt2 lookup call no upstream module builds.

Everything is built on the CPU and moved where the caller asks; the tests compare ours on npu
against upstream's CPU kernels or the float64 reference of ``conformance/specs/fbgemm/tbe``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)

__all__ = [
    "MIXED",
    "NPU",
    "ONE_D",
    "STYLES",
    "COUNTER_CASES",
    "Batch",
    "HostLayout",
    "assert_close",
    "build_tbe",
    "counter_regularization",
    "fixed_batch",
    "host_layout",
    "make_batches",
    "rmsprop_ar_kwargs",
    "rmsprop_ar_lookup",
    "same_weights",
    "total_unique_indices",
    "train_step",
    "training_tbe",
]

# A name, not a torch.device: importable before the npu device is switched on (the conformance
# registry imports its modules first).
NPU = "npu"
MIXED = [(40, 8), (25, 16), (30, 8)]  # (rows, dim) per table: two distinct dims
ONE_D = [(40, 8), (25, 8), (30, 8)]
# How users build a TBE for npu: torchrec's for a non-CUDA device, and a CUDA user's with only
# the device changed (upstream's Python refuses most optimizers in the first style).
STYLES = {
    "torchrec": (EmbeddingLocation.HOST, ComputeDevice.CPU),
    "cuda_user": (EmbeddingLocation.DEVICE, ComputeDevice.CUDA),
}

TBE = SplitTableBatchedEmbeddingBagsCodegen


def build_tbe(
    specs: list[tuple[int, int]],
    style: str,
    device: str | torch.device | None = "npu",
    **kwargs: Any,
) -> TBE:
    """Upstream's TBE of ``(rows, dim)`` tables in ``style`` (a key of :data:`STYLES`) on
    ``device`` (``None``: upstream picks it); every other argument is upstream's default."""
    loc, cd = STYLES[style]
    device = torch.device(device) if isinstance(device, str) else device
    return TBE([(e, d, loc, cd) for e, d in specs], device=device, **kwargs)


def training_tbe(
    optimizer: EmbOptimType,
    specs: list[tuple[int, int]],
    device: str,
    style: str = "torchrec",
    **kwargs: Any,
) -> TBE:
    """A TBE to train with ``optimizer`` (learning rate 0.05 unless given); upstream's CPU
    build runs only the torchrec style, so ``device="cpu"`` always gets that one."""
    kwargs.setdefault("learning_rate", 0.05)
    return build_tbe(
        specs, "torchrec" if device == "cpu" else style, device, optimizer=optimizer, **kwargs
    )


@dataclass
class Batch:
    """One step's inputs on the CPU (int64 indices; callers cast them per side).  ``grad_out``:
    the step's output gradient, fixed by whoever runs the batch first."""

    indices: torch.Tensor
    offsets: torch.Tensor
    per_sample_weights: torch.Tensor | None
    batch_size_per_feature_per_rank: list[list[int]] | None = None
    grad_out: torch.Tensor | None = None


def make_batches(
    specs: list[tuple[int, int]],
    B: int,
    steps: int,
    seed: int,
    weighted: bool = False,
    vbe: list[list[int]] | None = None,
    max_len: int = 4,
) -> list[Batch]:
    """``steps`` batches of ``B`` bags per feature (``vbe``: per feature, per rank) of 0 to
    ``max_len`` indices; rows are drawn from the first 7 so that they repeat inside a batch
    (which exercises the backward's de-duplication)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        idx, lens = [], []
        for t, (rows, _) in enumerate(specs):
            n_bags = sum(vbe[t]) if vbe else B
            lt = torch.randint(0, max_len + 1, (n_bags,), generator=g)
            lens.append(lt)
            idx.append(torch.randint(0, min(rows, 7), (int(lt.sum()),), generator=g))
        lengths = torch.cat(lens)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        indices = torch.cat(idx)
        psw = torch.rand(indices.numel(), generator=g) if weighted else None
        out.append(Batch(indices, offsets, psw, vbe))
    return out


def total_unique_indices(batch: Batch, T: int) -> int:
    """Distinct rows each of ``T`` tables sees in a fixed-batch ``batch``, summed: what the
    ``NONE`` optimizer's ``total_unique_indices`` asks for."""
    B = (batch.offsets.numel() - 1) // T
    off = batch.offsets
    return sum(
        int(torch.unique(batch.indices[off[t * B] : off[(t + 1) * B]]).numel()) for t in range(T)
    )


def fixed_batch(
    T: int, E: int, B: int, L: int, seed: int, device: str = "npu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(indices, offsets)`` of ``T * B`` bags of exactly ``L`` indices drawn from ``E`` rows."""
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, E, (T * B * L,), generator=gen)
    off = torch.arange(0, T * B * L + 1, L)
    return idx.to(device), off.to(device)


def same_weights(source: TBE, target: TBE) -> None:
    """Copy every table of ``source`` into ``target`` (any devices)."""
    with torch.no_grad():
        pairs = zip(source.split_embedding_weights(), target.split_embedding_weights(), strict=True)
        for x, y in pairs:
            y.copy_(x.to(y.device))


def train_step(
    tbe: TBE,
    batch: Batch,
    device: str,
    idx_dtype: torch.dtype,
    grad_seed: int,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One training step (the fused optimizer runs in the backward); returns (output, the
    random grad_output it was given, on the CPU)."""
    psw = batch.per_sample_weights
    out = tbe(
        batch.indices.to(device=device, dtype=idx_dtype),
        batch.offsets.to(device=device, dtype=idx_dtype),
        per_sample_weights=None if psw is None else psw.to(device),
        batch_size_per_feature_per_rank=batch.batch_size_per_feature_per_rank,
        **kwargs,
    )
    g = torch.Generator().manual_seed(grad_seed)
    grad = torch.randn(out.shape, generator=g).to(out.dtype)
    out.backward(grad.to(device))
    return out, grad


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: float, what: str) -> None:
    """``actual`` within ``tol`` (absolute and relative) of ``expected``, compared in float64."""
    torch.testing.assert_close(
        actual.detach().cpu().double(),
        expected.detach().cpu().double(),
        rtol=tol,
        atol=tol,
        msg=lambda m: f"{what}: {m}",
    )


def counter_regularization(case: str) -> dict[str, Any]:
    """Constructor arguments of the ``rowwise_adagrad_with_counter`` lookup: upstream's
    rowwise AdaGrad with COUNTER (``counter_*``, ``adagradw``) or COWCLIP (``cowclip_*``)
    weight decay."""
    from fbgemm_gpu.tbe.config.optimizer_config import (
        CounterBasedRegularizationDefinition,
        CounterWeightDecayMode,
        CowClipDefinition,
        LearningRateMode,
        WeightDecayMode,
    )

    if case.startswith("cowclip"):
        l2 = case == "cowclip_l2"
        wd_mode = CounterWeightDecayMode.L2 if l2 else CounterWeightDecayMode.DECOUPLE
        cowclip = CowClipDefinition(
            counter_weight_decay_mode=wd_mode,
            counter_halflife=2,
            weight_norm_coefficient=0.5,
            lower_bound=0.01,
        )
        return {
            "weight_decay": 0.05,
            "weight_decay_mode": WeightDecayMode.COWCLIP,
            "cowclip_regularization": cowclip,
        }
    modes = {
        "counter_decouple": (
            CounterWeightDecayMode.DECOUPLE,
            3,
            LearningRateMode.TAIL_ID_LR_INCREASE,
        ),
        "counter_l2": (CounterWeightDecayMode.L2, -1, LearningRateMode.TAIL_ID_LR_DECREASE),
        "counter_sgd": (CounterWeightDecayMode.DECOUPLE, 0, LearningRateMode.COUNTER_SGD),
        "adagradw": (CounterWeightDecayMode.ADAGRADW, -1, LearningRateMode.EQUAL),
    }
    wd_mode, halflife, lr_mode = modes[case]
    counter = CounterBasedRegularizationDefinition(
        counter_weight_decay_mode=wd_mode,
        counter_halflife=halflife,
        adjustment_iter=-1,
        adjustment_ub=2.0,
        learning_rate_mode=lr_mode,
    )
    return {
        "weight_decay": 0.05,
        "weight_decay_mode": WeightDecayMode.COUNTER,
        "counter_based_regularization": counter,
    }


COUNTER_CASES = (
    "counter_decouple",
    "counter_l2",
    "counter_sgd",
    "adagradw",
    "cowclip_l2",
    "cowclip_decouple",
)


@dataclass
class HostLayout:
    """A TBE layout as the pt2 lookups take it in the torchrec (host) style, on ``device``."""

    dims: list[int]
    rows: list[int]
    D_offsets: torch.Tensor
    weights_offsets: torch.Tensor
    rows_offsets: torch.Tensor  # of a rowwise state, per table
    hash_size_cumsum: torch.Tensor
    placements: torch.Tensor

    @property
    def total_rows(self) -> int:
        return sum(self.rows)

    @property
    def total_weights(self) -> int:
        return sum(r * d for r, d in zip(self.rows, self.dims, strict=True))


def host_layout(specs: list[tuple[int, int]], device: str | torch.device) -> HostLayout:
    """The layout tensors of ``(rows, dim)`` tables, registered with the kernels' layout cache
    (as upstream's module registers its own), so that no call needs a sync to learn them."""
    from fbgemm_npu.split_table import register_host_values

    rows = [r for r, _ in specs]
    dims = [d for _, d in specs]
    w_off, r_off, d_off = [0], [0], [0]
    for r, d in specs:
        w_off.append(w_off[-1] + r * d)
        r_off.append(r_off[-1] + r)
        d_off.append(d_off[-1] + d)
    d = torch.device(device)
    values = {
        "D_offsets": (d_off, torch.int32),
        "weights_offsets": (w_off[:-1], torch.int64),
        "rows_offsets": (r_off[:-1], torch.int64),
        "hash_size_cumsum": (r_off, torch.int64),
    }
    tensors = {}
    for name, (host, dtype) in values.items():
        tensors[name] = torch.tensor(host, dtype=dtype, device=d)
        register_host_values(tensors[name], host)
    placements = torch.full((len(specs),), 3, dtype=torch.int32, device=d)  # HOST
    return HostLayout(dims, rows, placements=placements, **tensors)


def rmsprop_ar_kwargs(
    layout: HostLayout,
    weights: torch.Tensor,
    states: list[torch.Tensor],
    indices: torch.Tensor,
    offsets: torch.Tensor,
    iteration: int,
) -> dict[str, Any]:
    """The arguments of one ``rowwise_rmsprop_ar`` pt2 lookup (no ``EmbOptimType`` in
    fbgemm_gpu 1.8.0 builds it) on ``weights``' device; its backward steps the optimizer.
    ``states``: ``[momentum1, prev_iter]``, one value per row."""
    d = weights.device
    rowwise = [layout.placements, layout.rows_offsets]
    return {
        "placeholder_autograd_tensor": torch.zeros(0, device=d, requires_grad=True),
        "weights": [weights, layout.placements, layout.weights_offsets],
        "D_offsets": layout.D_offsets,
        "total_D": sum(layout.dims),
        "max_D": max(layout.dims),
        "hash_size_cumsum": layout.hash_size_cumsum,
        "total_hash_size_bits": layout.total_rows.bit_length(),
        "indices": indices,
        "offsets": offsets,
        "pooling_mode": 0,
        "indice_weights": None,
        "feature_requires_grad": None,
        "output_dtype": 0,
        "aux_tensor": [None, None, None, torch.zeros(0, dtype=torch.int32, device=d), *[None] * 3],
        "aux_int": [iteration, 30, (1 << 30) - 1],
        "aux_float": [0.0, 1.0],
        "aux_bool": [False, False, True, False, False, False, True],
        "momentum1": [states[0], *rowwise],
        "prev_iter": [states[1], *rowwise],
        "learning_rate_tensor": torch.tensor(0.05),
        "optim_float": [1e-8, 0.3, 0.9, 0.2],
    }


def rmsprop_ar_lookup(**kwargs: Any) -> torch.Tensor:
    """``split_embedding_codegen_lookup_rowwise_rmsprop_ar_function_pt2(**kwargs)``."""
    return torch.ops.fbgemm.split_embedding_codegen_lookup_rowwise_rmsprop_ar_function_pt2(**kwargs)
