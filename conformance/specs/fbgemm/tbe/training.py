"""TBE training conformance: upstream's TBE on CPU (or the float64 reference) against ours on npu.

:func:`run_case` runs one :class:`~.cases.TbeCase` and builds

* the subject: upstream's ``SplitTableBatchedEmbeddingBagsCodegen`` on ``npu:0``, in the case's
  construction style -- ``"cpu"`` (torchrec's for a non-CUDA device: ``EmbeddingLocation.HOST``,
  ``ComputeDevice.CPU``) or ``"cuda"`` (a CUDA user's: ``EmbeddingLocation.DEVICE``,
  ``ComputeDevice.CUDA``) -- whose ops dispatch to fbgemm_npu's kernels;
* the oracle: the same TBE built by upstream on the CPU (``"cpu"`` style, the only one upstream's
  CPU build runs) from the same weights, or, where upstream's CPU build cannot run the case
  (:func:`~.cases.oracle_of`), the float64 reference of :mod:`.reference`;

runs both on the same batches and compares, after every step, the outputs, the weights
(``split_embedding_weights()``) and the optimizer states (``split_optimizer_states()``); for the
``NONE`` optimizer, the weights' gradient instead of states.  ``set_learning_rate`` (before step
2) and a ``state_dict`` round trip into a fresh module (after step 1) are part of some cases.
Tolerances: :func:`~.cases.tolerance`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    GlobalWeightDecayDefinition,
    SplitTableBatchedEmbeddingBagsCodegen,
    WeightDecayMode,
)

from conformance.specs.fbgemm.tbe.cases import TbeCase, TbeResult, Trace, oracle_of, tolerance
from conformance.specs.fbgemm.tbe.reference import Batch, RefTbe

__all__ = [
    "build",
    "compare",
    "init_weights",
    "make_batches",
    "run_case",
    "run_module",
    "run_reference",
]

F64 = torch.float64


# --- inputs ---------------------------------------------------------------------------------
def make_batches(case: TbeCase) -> list[Batch]:
    """``case.steps`` random batches (seeded): bag lengths 0..max_len, VBE as torchrec passes
    it (``batch_size_per_feature_per_rank``, 2 ranks), out-of-range indices when asked."""
    gen = torch.Generator().manual_seed(case.seed)
    F = len(case.features)
    batches = []
    for _ in range(case.steps):
        if case.vbe:
            bsz = [torch.randint(0, case.batch + 1, (2,), generator=gen).tolist() for _ in range(F)]
            per_feature = [sum(b) for b in bsz]
        else:
            bsz = None
            per_feature = [case.batch] * F
        lengths, idx = [], []
        for f, n in enumerate(per_feature):
            rows = case.rows[case.features[f]]
            ln = torch.randint(0, case.max_len + 1, (n,), generator=gen)
            lengths.append(ln)
            idx.append(torch.randint(0, rows, (int(ln.sum()),), generator=gen))
            if case.bad_indices and idx[-1].numel() > 0:
                idx[-1][0] = rows + 3  # out of range: IGNORE / WARNING replace it by 0
        lengths_t = torch.cat(lengths)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths_t.cumsum(0)])
        indices = torch.cat(idx)
        psw = torch.rand(indices.numel(), generator=gen) + 0.5 if case.weighted else None
        batches.append(Batch(indices, offsets, psw, bsz))
    return batches


def init_weights(case: TbeCase) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(case.seed + 1000)
    dtype = case.weights_precision.as_dtype()
    return [
        (torch.rand(r, d, generator=gen, dtype=F64) - 0.5).to(dtype).to(F64)
        for r, d in zip(case.rows, case.dims, strict=True)
    ]


def _grad_out(case: TbeCase, shape: torch.Size, step: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(case.seed * 7919 + step)
    g = torch.randn(shape, generator=gen, dtype=F64)
    return g.to(case.output_dtype.as_dtype())


# --- upstream's module (the subject on npu, the oracle on cpu) --------------------------------
def build(case: TbeCase, device: str, style: str) -> SplitTableBatchedEmbeddingBagsCodegen:
    """Upstream's TBE in ``style`` on ``device``, hyper-parameters from the case."""
    loc, cd = (
        (EmbeddingLocation.HOST, ComputeDevice.CPU)
        if style == "cpu"
        else (EmbeddingLocation.DEVICE, ComputeDevice.CUDA)
    )
    kwargs: dict[str, Any] = dict(case.opt)
    if case.gwd_start_iter is not None:
        kwargs["weight_decay_mode"] = WeightDecayMode.DECOUPLE_GLOBAL
        kwargs["global_weight_decay"] = GlobalWeightDecayDefinition(
            start_iter=case.gwd_start_iter, lower_bound=float(kwargs.pop("gwd_lower_bound", 0.0))
        )
    return SplitTableBatchedEmbeddingBagsCodegen(
        [(r, d, loc, cd) for r, d in zip(case.rows, case.dims, strict=True)],
        feature_table_map=case.feature_table_map and list(case.feature_table_map),
        optimizer=case.optimizer,
        weights_precision=case.weights_precision,
        output_dtype=case.output_dtype,
        pooling_mode=case.pooling,
        learning_rate=case.lr,
        stochastic_rounding=False,
        bounds_check_mode=case.bounds_check,
        device=torch.device(device),
        **kwargs,
    )


def _snapshot_states(m: SplitTableBatchedEmbeddingBagsCodegen) -> list[list[torch.Tensor]]:
    if m.optimizer == OptimType.NONE:
        return []
    return [[s.detach().to("cpu", F64) for s in ts] for ts in m.split_optimizer_states()]


def run_module(case: TbeCase, device: str, style: str, batches: list[Batch]) -> Trace:
    """Train upstream's TBE (on ``device``, in ``style``) for the case's steps."""
    m = build(case, device, style)
    for w, w0 in zip(m.split_embedding_weights(), init_weights(case), strict=True):
        w.copy_(w0.to(w.dtype))
    trace = Trace([], [], [], [])
    for step, batch in enumerate(batches):
        if step == 1 and case.set_lr is not None:
            m.set_learning_rate(case.set_lr)
        if step == 1 and case.state_dict_roundtrip:
            state = m.state_dict()
            m = build(case, device, style)
            m.load_state_dict(state)
            if case.set_lr is not None:
                m.set_learning_rate(case.set_lr)
        idx = batch.indices.to(device=device, dtype=case.index_dtype)
        off = batch.offsets.to(device=device, dtype=case.index_dtype)
        psw = None if batch.per_sample_weights is None else batch.per_sample_weights.to(device)
        kwargs: dict[str, Any] = {}
        if batch.batch_size_per_feature_per_rank is not None:
            kwargs["batch_size_per_feature_per_rank"] = batch.batch_size_per_feature_per_rank
        if case.optimizer == OptimType.NONE:
            kwargs["total_unique_indices"] = _total_unique(case, batch)
            m.weights_dev.grad = None
        out = m(idx, off, psw, **kwargs)
        if batch.grad_out is None:
            batch.grad_out = _grad_out(case, out.shape, step)
        out.backward(batch.grad_out.to(device))
        trace.outputs.append(out.detach().to("cpu", F64))
        trace.weights.append([w.detach().to("cpu", F64) for w in m.split_embedding_weights()])
        trace.states.append(_snapshot_states(m))
        if case.optimizer == OptimType.NONE:
            grad = m.weights_dev.grad
            grad = grad.to_dense() if grad is not None and grad.is_sparse else grad
            trace.grads.append(torch.zeros(0) if grad is None else grad.to("cpu", F64))
    return trace


def _total_unique(case: TbeCase, batch: Batch) -> int:
    """Distinct (feature, row) pairs of a batch: upstream's ``total_unique_indices``."""
    F = len(case.features)
    B = (batch.offsets.numel() - 1) // F
    off = batch.offsets.tolist()
    return sum(batch.indices[off[f * B] : off[(f + 1) * B]].unique().numel() for f in range(F))


# --- the float64 reference --------------------------------------------------------------------
def run_reference(case: TbeCase, batches: list[Batch]) -> Trace:
    """The same training run in float64 (see :mod:`.reference`)."""
    hp = {k: float(getattr(v, "value", v)) for k, v in case.opt}
    if case.gwd_start_iter is not None:
        hp["weight_decay_mode"] = float(WeightDecayMode.DECOUPLE_GLOBAL.value)
        hp["gwd_start_iter"] = float(case.gwd_start_iter)
    ref = RefTbe(
        weights=init_weights(case),
        feature_table_map=case.features,
        optimizer=case.optimizer,
        pooling=case.pooling,
        weights_dtype=case.weights_precision.as_dtype(),
        output_dtype=case.output_dtype.as_dtype(),
        lr=case.lr,
        hp=hp,
    )
    trace = Trace([], [], [], [])
    for step, batch in enumerate(batches):
        if step == 1 and case.set_lr is not None:
            ref.lr = case.set_lr
        batch = _zero_bad_indices(case, batch)
        if batch.grad_out is None:
            raise ValueError("run the subject first: it fixes each step's grad_output")
        trace.outputs.append(ref.step(batch))
        trace.weights.append([w.clone() for w in ref.weights])
        trace.states.append([[s.clone() for s in ts] for ts in ref.optimizer_states()])
        if case.optimizer == OptimType.NONE:
            trace.grads.append(_dense_grad(ref, batch))
    return trace


def _zero_bad_indices(case: TbeCase, batch: Batch) -> Batch:
    """IGNORE / WARNING bounds checks replace out-of-range indices by 0 before the lookup."""
    if not case.bad_indices:
        return batch
    rows = torch.tensor(case.rows)[torch.tensor(case.features)]
    F = len(case.features)
    bag_lengths = batch.offsets[1:] - batch.offsets[:-1]
    bags_per_feature = (
        [sum(b) for b in batch.batch_size_per_feature_per_rank]
        if batch.batch_size_per_feature_per_rank is not None
        else [(batch.offsets.numel() - 1) // F] * F
    )
    feature_of_bag = torch.repeat_interleave(torch.arange(F), torch.tensor(bags_per_feature))
    limit = torch.repeat_interleave(rows[feature_of_bag], bag_lengths)
    bad = (batch.indices < 0) | (batch.indices >= limit)
    return dataclasses.replace(batch, indices=torch.where(bad, 0, batch.indices))


def _dense_grad(ref: RefTbe, batch: Batch) -> torch.Tensor:
    D = ref.weights[0].shape[1]
    total = sum(w.shape[0] for w in ref.weights)
    starts = [0]
    for w in ref.weights:
        starts.append(starts[-1] + w.shape[0])
    grad = torch.zeros(total, D, dtype=F64)
    for t, rows in enumerate(ref.row_grads(batch)):
        for row, g in rows.items():
            grad[starts[t] + row] = g.to(ref.weights_dtype).to(F64)
    return grad


# --- comparison -------------------------------------------------------------------------------
def _pairs(case: TbeCase, ours: Trace, exp: Trace) -> Iterator[tuple[str, str, Any, Any]]:
    for s in range(len(exp.outputs)):
        yield "output", f"step {s} output", ours.outputs[s], exp.outputs[s]
        for t, (a, e) in enumerate(zip(ours.weights[s], exp.weights[s], strict=True)):
            yield "weights", f"step {s} weights of table {t}", a, e
        if case.optimizer == OptimType.NONE:
            yield "grads", f"step {s} weights gradient", ours.grads[s], exp.grads[s]
            continue
        if len(ours.states[s]) != len(exp.states[s]):
            raise AssertionError(
                f"step {s}: {len(ours.states[s])} tables of states, expected {len(exp.states[s])}"
            )
        for t, (a_t, e_t) in enumerate(zip(ours.states[s], exp.states[s], strict=True)):
            if len(a_t) != len(e_t):
                raise AssertionError(f"step {s} table {t}: {len(a_t)} states, expected {len(e_t)}")
            for k, (a, e) in enumerate(zip(a_t, e_t, strict=True)):
                yield "states", f"step {s} state {k} of table {t}", a, e


def compare(case: TbeCase, ours: Trace, expected: Trace) -> tuple[float, float]:
    """Raise AssertionError naming step / table / state on the first mismatch."""
    max_abs = max_rel = 0.0
    for kind, where, a, e in _pairs(case, ours, expected):
        rtol, atol = tolerance(case, kind)
        if a.shape != e.shape:
            raise AssertionError(f"{where}: shape {tuple(a.shape)}, expected {tuple(e.shape)}")
        try:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol)
        except AssertionError as exc:
            raise AssertionError(f"{where} (rtol {rtol:g}, atol {atol:g}): {exc}") from None
        if a.numel():
            diff = (a - e).abs()
            max_abs = max(max_abs, float(diff.max()))
            max_rel = max(max_rel, float((diff / e.abs().clamp(min=1e-3)).max()))
    return max_abs, max_rel


def run_case(case: TbeCase, device: str = "npu:0") -> TbeResult:
    """Ours (upstream's module on ``device``) against upstream on CPU or the reference."""
    oracle = oracle_of(case)
    batches = make_batches(case)
    try:
        ours = run_module(case, device, case.style, batches)
    except Exception as exc:  # noqa: BLE001 - reported as the case's failure
        return TbeResult(case, oracle, False, f"ours raised {type(exc).__name__}: {exc}")
    note = ""
    expected = None
    if oracle == "upstream":
        try:
            expected = run_module(case, "cpu", "cpu", batches)
        except Exception as exc:  # noqa: BLE001 - a valid case upstream's CPU build cannot run
            # e.g. 1.8.0's CPU rowwise AdaGrad with mixed dims and a table shared by two
            # features: "num of rows processed by adagrad: 0 does not match c_block size".
            oracle, note = "reference", f"upstream CPU raised {type(exc).__name__}: {exc}"
    if expected is None:
        expected = run_reference(case, batches)
    try:
        max_abs, max_rel = compare(case, ours, expected)
    except AssertionError as exc:
        return TbeResult(case, oracle, False, str(exc), note=note)
    return TbeResult(case, oracle, True, "", max_abs, max_rel, note)
