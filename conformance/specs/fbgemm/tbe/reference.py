"""A float64 reference of upstream's table-batched embedding (TBE) training step.

The oracle wherever upstream's CPU build cannot judge a configuration: for the TBE conformance
harness (:mod:`.training`: ADAM, PARTIAL_ROWWISE_ADAM, LAMB, PARTIAL_ROWWISE_LAMB, LARS_SGD,
NONE, rowwise AdaGrad's ``max_norm`` and global weight decay, bf16 weights or outputs) and for
the tbe family's tests (``tests/fbgemm/tbe/``: the same optimizers, Adam's rowwise bias
correction, the CUDA-only weight-decay modes of rowwise AdaGrad, weighted MEAN).  It is written
from upstream's documented math (``fbgemm_gpu/codegen/genscript/optimizers.py``: the CUDA
``split_precomputation`` / ``split_weight_update`` / ``split_post_update`` snippets, and
``test/tbe/training/backward_adagrad_global_weight_decay_test.py`` for global weight decay), one
bag and one row at a time, in float64, and shares no code with fbgemm_npu's kernels.

One training step of upstream's fused TBE, as the reference models it:

1. forward: ``out[b, D_offsets[f]:D_offsets[f+1]] = sum_{i in bag(f, b)} w_i * W_t[idx_i]``
   (``t = feature_table_map[f]``; MEAN divides by the bag length, empty bags give 0; NONE gives
   one row per index); VBE lays the output out rank-major, then feature, then bag; the result is
   cast to the output dtype;
2. backward: the gradient of row ``r`` of table ``t`` is the sum over every occurrence of ``r``
   in the batch of ``w_i * grad_out[bag]`` (``/ len`` for MEAN) -- "exact" optimizers see each
   touched row once with its summed gradient;
3. the optimizer updates each touched row in float64 from the stored (possibly half) weights;
   half weights are rounded to nearest when stored (the conformance cases turn upstream's
   stochastic rounding off); optimizer states are stored in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import WeightDecayMode

from fbgemm_npu.testing.tbe_inputs import Batch

__all__ = ["Batch", "RefTbe", "STATE_LAYOUT"]

F64 = torch.float64

# split_optimizer_states() order per optimizer: (name, rowwise).
STATE_LAYOUT: dict[OptimType, tuple[tuple[str, bool], ...]] = {
    OptimType.EXACT_SGD: (),
    OptimType.EXACT_ADAGRAD: (("momentum1", False),),
    OptimType.EXACT_ROWWISE_ADAGRAD: (("momentum1", True),),
    OptimType.ADAM: (("momentum1", False), ("momentum2", False)),
    OptimType.PARTIAL_ROWWISE_ADAM: (("momentum1", False), ("momentum2", True)),
    OptimType.LAMB: (("momentum1", False), ("momentum2", False)),
    OptimType.PARTIAL_ROWWISE_LAMB: (("momentum1", False), ("momentum2", True)),
    OptimType.LARS_SGD: (("momentum1", False),),
    OptimType.NONE: (),
}


@dataclass
class RefTbe:
    """The tables, optimizer states and hyper-parameters of one reference TBE.

    ``hp`` holds the hyper-parameters by upstream's names (``eps``, ``weight_decay``,
    ``weight_decay_mode`` as its int value, ``max_norm``, ``beta1``, ``eta``, ...);
    ``use_rowwise_bias_correction`` (Adam) counts each row's updates and adds the counts to the
    states, as upstream's ``split_optimizer_states()`` does.
    """

    weights: list[torch.Tensor]  # float64 [rows_t, D_t], values representable in weights_dtype
    feature_table_map: list[int]
    optimizer: OptimType
    pooling: PoolingMode
    weights_dtype: torch.dtype
    output_dtype: torch.dtype
    lr: float
    hp: dict[str, float]
    states: list[list[torch.Tensor]] = field(default_factory=list)  # per table, per state
    prev_iter: list[torch.Tensor] = field(default_factory=list)  # global weight decay only
    row_counter: list[torch.Tensor] = field(default_factory=list)  # rowwise bias correction
    iter: int = 0

    def __post_init__(self) -> None:
        layout = STATE_LAYOUT[self.optimizer]
        self.states = [
            [torch.zeros(w.shape[0] if rw else w.shape, dtype=F64) for _, rw in layout]
            for w in self.weights
        ]
        self.prev_iter = [torch.zeros(w.shape[0], dtype=F64) for w in self.weights]
        self.row_counter = [torch.zeros(w.shape[0], dtype=F64) for w in self.weights]

    @property
    def gwd(self) -> bool:
        return self.hp.get("weight_decay_mode", 0) == WeightDecayMode.DECOUPLE_GLOBAL.value

    @property
    def rowwise_bias_correction(self) -> bool:
        return self.optimizer == OptimType.ADAM and bool(
            self.hp.get("use_rowwise_bias_correction", 0.0)
        )

    # --- forward -------------------------------------------------------------------------
    def _bags(self, batch: Batch) -> list[tuple[int, int, int, int, int]]:
        """(feature, rank, bag within (feature, rank), start, end) for every bag in order."""
        F = len(self.feature_table_map)
        off = batch.offsets.tolist()
        bsz = batch.batch_size_per_feature_per_rank
        if bsz is None:
            B = (len(off) - 1) // F
            bsz = [[B] for _ in range(F)]
        bags, k = [], 0
        for f in range(F):
            for r, n in enumerate(bsz[f]):
                for b in range(n):
                    bags.append((f, r, b, off[k], off[k + 1]))
                    k += 1
        return bags

    def _layout(self, batch: Batch) -> tuple[list[int], int, dict[tuple[int, int], int]]:
        """Output column/offset of each (feature, rank) block, and the output size."""
        dims = [self.weights[t].shape[1] for t in self.feature_table_map]
        bsz = batch.batch_size_per_feature_per_rank
        if bsz is None:
            return dims, 0, {}
        ranks = len(bsz[0])
        starts, pos = {}, 0
        for r in range(ranks):
            for f, d in enumerate(dims):
                starts[(f, r)] = pos
                pos += bsz[f][r] * d
        return dims, pos, starts

    def forward(self, batch: Batch) -> torch.Tensor:
        """The pooled (or sequence) output, in float64, rounded through the output dtype."""
        if self.gwd:
            self._global_weight_decay(batch, self.iter + 1)
        idx = batch.indices.tolist()
        psw = batch.per_sample_weights
        dims, size, starts = self._layout(batch)
        bags = self._bags(batch)
        if self.pooling == PoolingMode.NONE:
            out = torch.zeros(len(idx), dims[0], dtype=F64)
            for f, _, _, s, e in bags:
                W = self.weights[self.feature_table_map[f]]
                for i in range(s, e):
                    out[i] = W[idx[i]]
            return out.to(self.output_dtype).to(F64)
        vbe = batch.batch_size_per_feature_per_rank is not None
        B = 0 if vbe else len(bags) // len(dims)
        out = torch.zeros(size, dtype=F64) if vbe else torch.zeros(B, sum(dims), dtype=F64)
        col = [0]
        for d in dims:
            col.append(col[-1] + d)
        for f, r, b, s, e in bags:
            W = self.weights[self.feature_table_map[f]]
            acc = torch.zeros(dims[f], dtype=F64)
            for i in range(s, e):
                wi = 1.0 if psw is None else float(psw[i])
                acc += wi * W[idx[i]]
            if self.pooling == PoolingMode.MEAN and e > s:
                acc /= e - s
            if vbe:
                p = starts[(f, r)] + b * dims[f]
                out[p : p + dims[f]] = acc
            else:
                out[b, col[f] : col[f + 1]] = acc
        return out.to(self.output_dtype).to(F64)

    # --- backward + optimizer --------------------------------------------------------------
    def row_grads(self, batch: Batch) -> list[dict[int, torch.Tensor]]:
        """Per table: touched row -> summed gradient (float64)."""
        assert batch.grad_out is not None
        go = batch.grad_out.to(F64)
        idx = batch.indices.tolist()
        psw = batch.per_sample_weights
        dims, _, starts = self._layout(batch)
        bags = self._bags(batch)
        vbe = batch.batch_size_per_feature_per_rank is not None
        col = [0]
        for d in dims:
            col.append(col[-1] + d)
        grads: list[dict[int, torch.Tensor]] = [{} for _ in self.weights]
        for f, r, b, s, e in bags:
            t = self.feature_table_map[f]
            for i in range(s, e):
                if self.pooling == PoolingMode.NONE:
                    g = go[i]
                else:
                    if vbe:
                        p = starts[(f, r)] + b * dims[f]
                        g = go[p : p + dims[f]]
                    else:
                        g = go[b, col[f] : col[f + 1]]
                    wi = 1.0 if psw is None else float(psw[i])
                    g = g * wi
                    if self.pooling == PoolingMode.MEAN:
                        g = g / (e - s)
                row = idx[i]
                grads[t][row] = grads[t].get(row, torch.zeros(dims[f], dtype=F64)) + g
        return grads

    def step(self, batch: Batch) -> torch.Tensor:
        """Forward, then the optimizer on every touched row; returns the forward output."""
        out = self.forward(batch)
        self.iter += 1
        if self.optimizer == OptimType.NONE:
            return out
        for t, rows in enumerate(self.row_grads(batch)):
            for row, g in rows.items():
                self._update_row(t, row, g)
        return out

    def _store(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.weights_dtype).to(F64)

    def _global_weight_decay(self, batch: Batch, it: int) -> None:
        """Before the forward of iteration ``it``: each row touched now (once, however often it
        occurs) decays by ``max(gwd_lower_bound, (1 - lr wd)^(it - prev_iter - 1))``, except on
        its first touch (``prev_iter == 0``); ``prev_iter`` becomes ``it``.  Before
        ``gwd_start_iter`` nothing happens (upstream runs its plain kernel then)."""
        wd, lb = self.hp.get("weight_decay", 0.0), self.hp.get("gwd_lower_bound", 0.0)
        idx = batch.indices.tolist()
        touched = {
            (self.feature_table_map[f], idx[i])
            for f, _, _, s, e in self._bags(batch)
            for i in range(s, e)
        }
        if it < self.hp.get("gwd_start_iter", 0):
            return  # upstream runs the plain kernel before the start: no decay, prev_iter kept
        for t, row in sorted(touched):
            prev = float(self.prev_iter[t][row])
            if prev != 0:
                decay = max(lb, (1.0 - self.lr * wd) ** (it - prev - 1))
                self.weights[t][row] = self._store(self.weights[t][row] * decay)
            self.prev_iter[t][row] = it

    def _update_row(self, t: int, row: int, g: torch.Tensor) -> None:
        w = self.weights[t][row].clone()
        st = [s[row].clone() for s in self.states[t]]
        hp, lr, it = self.hp, self.lr, self.iter
        eps, wd = hp.get("eps", 1e-8), hp.get("weight_decay", 0.0)
        b1, b2 = hp.get("beta1", 0.9), hp.get("beta2", 0.999)
        o = self.optimizer
        if o == OptimType.EXACT_SGD:
            w = w - lr * g
        elif o == OptimType.EXACT_ADAGRAD:
            st[0] = st[0] + g * g
            w = w - lr * g / (st[0].sqrt() + eps)
        elif o == OptimType.EXACT_ROWWISE_ADAGRAD:
            w, st = self._rowwise_adagrad(w, g, st)
        elif o in (OptimType.ADAM, OptimType.PARTIAL_ROWWISE_ADAM):
            st[0] = b1 * st[0] + (1 - b1) * g
            if o == OptimType.ADAM:
                st[1] = b2 * st[1] + (1 - b2) * g * g
            else:
                st[1] = b2 * st[1] + (1 - b2) * (g * g).mean()
            k = float(it)
            if self.rowwise_bias_correction:  # each row's own step count
                self.row_counter[t][row] += 1
                k = float(self.row_counter[t][row])
            m_hat = st[0] / (1 - b1**k)
            v_hat = st[1] / (1 - b2**k)
            w = w - lr * (m_hat / (v_hat.sqrt() + eps) + wd * w)
        elif o in (OptimType.LAMB, OptimType.PARTIAL_ROWWISE_LAMB):
            st[0] = b1 * st[0] + (1 - b1) * g
            if o == OptimType.LAMB:
                st[1] = b2 * st[1] + (1 - b2) * g * g
            else:
                st[1] = b2 * st[1] + (1 - b2) * (g * g).mean()
            r = (st[0] / (1 - b1**it)) / ((st[1] / (1 - b2**it)).sqrt() + eps) + wd * w
            ratio = w.norm() / r.norm()
            w = w - lr * ratio * r
        elif o == OptimType.LARS_SGD:
            eta, mom = hp.get("eta", 0.001), hp.get("momentum", 0.9)
            w_norm, g_norm = w.norm(), g.norm()
            adj = lr * eta * w_norm / (g_norm + wd * w_norm)
            st[0] = mom * st[0] + adj * (g + wd * w)
            w = w - st[0]
        else:
            raise NotImplementedError(f"reference: optimizer {o} has no reference")
        self.weights[t][row] = self._store(w)
        for s, new in zip(self.states[t], st, strict=True):
            s[row] = new.to(torch.float32).to(F64)  # states are stored in float32

    def _rowwise_adagrad(
        self, w: torch.Tensor, g: torch.Tensor, st: list[torch.Tensor]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        hp, lr = self.hp, self.lr
        eps, wd = hp.get("eps", 1e-8), hp.get("weight_decay", 0.0)
        mode = int(hp.get("weight_decay_mode", 0))
        g_eff = g + wd * w if mode == WeightDecayMode.L2.value else g
        st[0] = st[0] + (g_eff * g_eff).mean()
        mult = lr / (math.sqrt(float(st[0])) + eps)
        if mode == WeightDecayMode.L2.value:
            corr = 1.0 - mult * wd
        elif mode in (WeightDecayMode.DECOUPLE.value, WeightDecayMode.DECOUPLE_GLOBAL.value):
            corr = 1.0 - lr * wd
        else:
            corr = 1.0
        w = corr * w - mult * g
        max_norm = hp.get("max_norm", 0.0)
        if max_norm > 0:
            n = float(w.norm())
            if n > max_norm:
                w = w * (max_norm / n)
        return w, st

    def optimizer_states(self) -> list[list[torch.Tensor]]:
        """In ``split_optimizer_states()`` order (global weight decay adds ``prev_iter``, Adam's
        rowwise bias correction the row counters)."""
        if self.gwd:
            return [s + [p] for s, p in zip(self.states, self.prev_iter, strict=True)]
        if self.rowwise_bias_correction:
            return [s + [c] for s, c in zip(self.states, self.row_counter, strict=True)]
        if not STATE_LAYOUT[self.optimizer]:
            return []  # upstream's zip(*states) of no states
        return [list(s) for s in self.states]
