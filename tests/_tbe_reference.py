"""A float64 reference of TBE training, for what upstream's CPU build cannot judge.

Written from the math of upstream's optimizer descriptions (the CUDA kernels of
``fbgemm_gpu/codegen/genscript/optimizers.py``), with plain Python loops over bags and rows: slow,
obvious, and independent of fbgemm_npu's kernels.  One feature per table.
"""

from __future__ import annotations

import math

import torch

Tensor = torch.Tensor

# state name -> rowwise, per optimizer (upstream's split_optimizer_states order)
STATES: dict[str, list[tuple[str, bool]]] = {
    "sgd": [],
    "adagrad": [("momentum1", False)],
    "rowwise_adagrad": [("momentum1", True)],
    "adam": [("momentum1", False), ("momentum2", False)],
    "partial_rowwise_adam": [("momentum1", False), ("momentum2", True)],
    "lamb": [("momentum1", False), ("momentum2", False)],
    "partial_rowwise_lamb": [("momentum1", False), ("momentum2", True)],
    "lars_sgd": [("momentum1", False)],
}


class ReferenceTBE:
    """Tables as float64 ``[E_t, D_t]``; ``hp`` holds the hyper-parameters by upstream's names."""

    def __init__(self, tables: list[Tensor], optimizer: str, pooling: int, **hp: float) -> None:
        self.tables = [t.detach().double().clone() for t in tables]
        self.opt = optimizer
        self.pooling = pooling
        self.hp = hp
        self.iter = 0
        self.states = [
            [
                torch.zeros(t.size(0) if rw else t.shape, dtype=torch.float64)
                for _, rw in STATES[optimizer]
            ]
            for t in self.tables
        ]
        self.row_counter = [torch.zeros(t.size(0), dtype=torch.float64) for t in self.tables]

    def _bags(self, offsets: Tensor, vbe: list[list[int]] | None) -> list[tuple[int, int, int]]:
        """(feature, output position, length) of every bag, in offsets order."""
        T = len(self.tables)
        dims = [t.size(1) for t in self.tables]
        n_bags = offsets.numel() - 1
        if vbe is None:
            B = n_bags // T
            total_D = sum(dims)
            starts = [sum(dims[:t]) for t in range(T)]
            return [
                (k // B, (k % B) * total_D + starts[k // B], dims[k // B]) for k in range(n_bags)
            ]
        R = len(vbe[0])
        block_start, pos = {}, 0
        for r in range(R):
            for t in range(T):
                block_start[(t, r)] = pos
                pos += vbe[t][r] * dims[t]
        out = []
        for t in range(T):
            for r in range(R):
                for b in range(vbe[t][r]):
                    out.append((t, block_start[(t, r)] + b * dims[t], dims[t]))
        return out

    def forward_backward(
        self,
        indices: Tensor,
        offsets: Tensor,
        psw: Tensor | None,
        grad_output: Tensor,
        vbe: list[list[int]] | None = None,
    ) -> Tensor:
        """One training step; returns the forward output (flat for VBE)."""
        self.iter += 1
        indices, offsets = indices.tolist(), offsets.tolist()
        go = grad_output.detach().double().reshape(-1)
        bags = self._bags(torch.tensor(offsets), vbe)
        grads: list[dict[int, Tensor]] = [{} for _ in self.tables]
        if self.pooling == 2:  # sequence
            D = self.tables[0].size(1)
            out = torch.zeros(len(indices), D, dtype=torch.float64)
            for k, (t, _, _) in enumerate(bags):
                for i in range(offsets[k], offsets[k + 1]):
                    out[i] = self.tables[t][indices[i]]
                    g = go[i * D : (i + 1) * D]
                    grads[t][indices[i]] = grads[t].get(indices[i], 0) + g
        else:
            out = torch.zeros(go.numel(), dtype=torch.float64)
            for k, (t, pos, D) in enumerate(bags):
                n = offsets[k + 1] - offsets[k]
                for i in range(offsets[k], offsets[k + 1]):
                    w = 1.0 if psw is None else float(psw[i])
                    if self.pooling == 1:
                        w /= n
                    out[pos : pos + D] += w * self.tables[t][indices[i]]
                    g = w * go[pos : pos + D]
                    grads[t][indices[i]] = grads[t].get(indices[i], 0) + g
        for t, rows in enumerate(grads):
            for r, g in rows.items():
                self._update(t, r, g)
        return out

    def _update(self, t: int, r: int, g: Tensor) -> None:
        hp, it = self.hp, self.iter
        lr = hp.get("learning_rate", 0.01)
        eps = hp.get("eps", 1e-8)
        wd = hp.get("weight_decay", 0.0)
        b1, b2 = hp.get("beta1", 0.9), hp.get("beta2", 0.999)
        w = self.tables[t][r].clone()
        st = self.states[t]
        if self.opt == "sgd":
            w = w - lr * g
        elif self.opt == "adagrad":
            st[0][r] += g * g
            w = w - lr * g / (st[0][r].sqrt() + eps)
        elif self.opt == "rowwise_adagrad":
            mode = int(hp.get("weight_decay_mode", 0))
            gg = g + wd * w if mode == 1 else g
            st[0][r] += float((gg * gg).mean())
            mult = lr / (math.sqrt(float(st[0][r])) + eps)
            corr = 1 - mult * wd if mode == 1 else (1 - lr * wd if mode in (2, 5) else 1.0)
            w = corr * w - mult * g
            max_norm = hp.get("max_norm", 0.0)
            norm = float(w.norm())
            if max_norm > 0 and norm > max_norm:
                w = w * (max_norm / norm)
        elif self.opt == "adam":
            st[0][r] = b1 * st[0][r] + (1 - b1) * g
            st[1][r] = b2 * st[1][r] + (1 - b2) * g * g
            k = it
            if hp.get("use_rowwise_bias_correction"):
                self.row_counter[t][r] += 1
                k = float(self.row_counter[t][r])
            m_hat = st[0][r] / (1 - b1**k)
            v_hat = st[1][r] / (1 - b2**k)
            w = w - lr * (m_hat / (v_hat.sqrt() + eps) + wd * w)
        elif self.opt == "partial_rowwise_adam":
            st[0][r] = b1 * st[0][r] + (1 - b1) * g
            st[1][r] = b2 * st[1][r] + (1 - b2) * float((g * g).mean())
            v_hat = float(st[1][r]) / (1 - b2**it)
            w = w - lr * (st[0][r] / (1 - b1**it) / (math.sqrt(v_hat) + eps) + wd * w)
        elif self.opt in ("lamb", "partial_rowwise_lamb"):
            st[0][r] = b1 * st[0][r] + (1 - b1) * g
            if self.opt == "lamb":
                st[1][r] = b2 * st[1][r] + (1 - b2) * g * g
                denom = (st[1][r] / (1 - b2**it)).sqrt() + eps
            else:
                st[1][r] = b2 * st[1][r] + (1 - b2) * float((g * g).mean())
                denom = math.sqrt(float(st[1][r]) / (1 - b2**it)) + eps
            rt = st[0][r] / (1 - b1**it) / denom + wd * w
            w = w - lr * float(w.norm() / rt.norm()) * rt
        elif self.opt == "lars_sgd":
            eta, mom = hp.get("eta", 0.001), hp.get("momentum", 0.9)
            wn, gn = float(w.norm()), float(g.norm())
            adj = lr * eta * wn / (gn + wd * wn)
            st[0][r] = mom * st[0][r] + adj * (g + wd * w)
            w = w - st[0][r]
        else:
            raise ValueError(self.opt)
        self.tables[t][r] = w
