"""The TBE conformance cases: what one case describes, which oracle judges it, and how closely.

A :class:`TbeCase` describes one TBE (tables, optimizer and its hyper-parameters, pooling,
dtypes, index dtype, VBE, bounds-check mode, construction style) and a short training run
(3 steps by default, each with its own random batch and random ``grad_output``);
:mod:`.training` runs it.  :func:`oracle_of` says whether upstream's CPU build can judge it
(``"upstream"``) or the float64 reference of :mod:`.reference` must (``"reference"``), with the
measured reason for every exclusion.

Tolerances (``|ours - expected| <= atol + rtol |expected|``), measured, stated per output kind
(:func:`tolerance`):

* fp32 weights and output: 1e-5 for EXACT_SGD, 1e-4 for the adaptive optimizers;
* fp16 output or weights: 1e-2 (one fp16 rounding is 4.9e-4 relative; sums of a few rounded
  rows and updates computed from rounded rows compound it), bf16: 4e-2 (one rounding is 3.9e-3);
* optimizer states are float32 whatever the weights: the fp32 tolerance, or the weights' when the
  weights are half (the states see gradients and rows computed from rounded values).

Upstream's stochastic rounding of half weights is switched off in every case so both sides round
to nearest and can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode, PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import WeightDecayMode

__all__ = ["CPU_OPTIMIZERS", "TbeCase", "TbeResult", "Trace", "oracle_of", "tolerance"]

CPU_OPTIMIZERS = (
    OptimType.EXACT_SGD,
    OptimType.EXACT_ADAGRAD,
    OptimType.EXACT_ROWWISE_ADAGRAD,
    OptimType.EMAINPLACE_ROWWISE_ADAGRAD,
)
_HALF_TOL = {SparseType.FP32: 0.0, SparseType.FP16: 1e-2, SparseType.BF16: 4e-2}


@dataclass(frozen=True)
class TbeCase:
    """One TBE and its training run; ``opt`` holds constructor keyword arguments
    (``eps``, ``weight_decay``, ``weight_decay_mode``, ``max_norm``, ``beta1``, ...)."""

    optimizer: OptimType = OptimType.EXACT_ROWWISE_ADAGRAD
    style: str = "cpu"  # "cpu": HOST + ComputeDevice.CPU; "cuda": DEVICE + ComputeDevice.CUDA
    rows: tuple[int, ...] = (20, 30)
    dims: tuple[int, ...] = (8, 8)
    feature_table_map: tuple[int, ...] | None = None
    batch: int = 3
    max_len: int = 4
    pooling: PoolingMode = PoolingMode.SUM
    weighted: bool = False
    weights_precision: SparseType = SparseType.FP32
    output_dtype: SparseType = SparseType.FP32
    index_dtype: torch.dtype = torch.int64
    vbe: bool = False
    bounds_check: BoundsCheckMode = BoundsCheckMode.WARNING
    bad_indices: bool = False  # out-of-range indices (IGNORE / WARNING zero them)
    opt: tuple[tuple[str, Any], ...] = ()
    gwd_start_iter: int | None = None  # global weight decay (WeightDecayMode.DECOUPLE_GLOBAL)
    lr: float = 0.1
    set_lr: float | None = None  # set_learning_rate before step 2
    state_dict_roundtrip: bool = False  # after step 1, continue on a fresh module
    steps: int = 3
    seed: int = 0

    @property
    def features(self) -> list[int]:
        return list(self.feature_table_map or range(len(self.rows)))

    def label(self) -> str:
        parts = [self.optimizer.name, self.style, self.pooling.name, f"D{list(self.dims)}"]
        parts += [f"w={self.weights_precision.name}", f"out={self.output_dtype.name}"]
        parts += [str(self.index_dtype).removeprefix("torch.")]
        flags = {
            "weighted": self.weighted,
            "vbe": self.vbe,
            "bad_idx": self.bad_indices,
            "set_lr": self.set_lr is not None,
            "state_dict": self.state_dict_roundtrip,
            "gwd": self.gwd_start_iter is not None,
        }
        parts += [k for k, v in flags.items() if v]
        if self.bounds_check != BoundsCheckMode.WARNING:
            parts.append(f"bounds={self.bounds_check.name}")
        parts += [f"{k}={getattr(v, 'name', v)}" for k, v in self.opt]
        return " ".join(parts)


@dataclass
class Trace:
    """What one run produced, on the CPU, per step."""

    outputs: list[torch.Tensor]
    weights: list[list[torch.Tensor]]
    states: list[list[list[torch.Tensor]]]
    grads: list[torch.Tensor]  # NONE optimizer: dense weights gradient per step


@dataclass
class TbeResult:
    case: TbeCase
    oracle: str  # "upstream" or "reference"
    ok: bool
    message: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    note: str = ""  # why the reference judged a case upstream was expected to judge


def oracle_of(case: TbeCase) -> str:
    """``"upstream"`` where upstream's CPU build runs the case, else ``"reference"``."""
    opt = dict(case.opt)
    wd_mode = int(getattr(opt.get("weight_decay_mode"), "value", opt.get("weight_decay_mode", 0)))
    cpu_ok = (
        case.optimizer in CPU_OPTIMIZERS
        and SparseType.BF16 not in (case.weights_precision, case.output_dtype)
        and float(opt.get("max_norm", 0.0)) == 0.0  # upstream's CPU kernel ignores max_norm
        and case.gwd_start_iter is None  # no CPU global-weight-decay forward upstream
        # Measured on fbgemm-gpu-cpu 1.8.0: the CPU rowwise AdaGrad ignores weight_decay in the
        # L2 and DECOUPLE modes (weights are bit-identical with and without it); CUDA applies it.
        and not (
            case.optimizer == OptimType.EXACT_ROWWISE_ADAGRAD
            and wd_mode in (WeightDecayMode.L2.value, WeightDecayMode.DECOUPLE.value)
            and float(opt.get("weight_decay", 0.0)) != 0.0
        )
        # Measured likewise: with per-sample weights and MEAN pooling the CPU backward drops the
        # 1 / bag-length factor its forward applies (gradient w_i g instead of w_i g / L); CUDA
        # divides (its mean-gradient pass runs before the weighted backward).
        and not (case.weighted and case.pooling == PoolingMode.MEAN)
        # Measured likewise: VBE with int32 indices corrupts the CPU heap ("free(): invalid next
        # size") -- the process dies, so the reference judges these.
        and not (case.vbe and case.index_dtype == torch.int32)
        # Measured likewise: with mixed dims and a table shared by several features the CPU
        # (rowwise) AdaGrad does not apply one aggregated update per touched row as CUDA's
        # sorted, de-duplicated backward does (ours and the reference agree; SGD is linear, so
        # the order of updates cannot show there).
        and not (
            len(set(case.dims)) > 1
            and len(set(case.features)) < len(case.features)
            and case.optimizer != OptimType.EXACT_SGD
        )
    )
    return "upstream" if cpu_ok else "reference"


def tolerance(case: TbeCase, kind: str) -> tuple[float, float]:
    """(rtol, atol) for one output kind: ``"output"``, ``"weights"``, ``"states"``, ``"grads"``."""
    base = 1e-5 if case.optimizer in (OptimType.EXACT_SGD, OptimType.NONE) else 1e-4
    half = {
        "output": max(_HALF_TOL[case.output_dtype], _HALF_TOL[case.weights_precision]),
        "weights": _HALF_TOL[case.weights_precision],
        "states": _HALF_TOL[case.weights_precision],
        "grads": max(_HALF_TOL[case.output_dtype], _HALF_TOL[case.weights_precision]),
    }[kind]
    tol = max(base, half)
    return tol, tol
