"""Upstream's TBE modules train on npu in both construction styles (torchrec's, a CUDA
user's): a toy regression's loss falls and each step moves only the rows the batch touched; the
backward of a 10-million-row table needs extra device memory O(indices x D), not O(table).
Value-level conformance of every optimizer and mode is ``conformance/specs/fbgemm/tbe/``; the
step's launch budget is ``test_tbe_budgets_module.py``."""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_embedding_configs import EmbOptimType as O

from fbgemm_npu.testing.tbe_inputs import STYLES, build_tbe, fixed_batch


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("optimizer", [O.EXACT_SGD, O.EXACT_ROWWISE_ADAGRAD, O.EXACT_ADAGRAD])
def test_toy_problem_trains(style: str, optimizer: O) -> None:
    """Pooled embeddings regress onto a fixed target: the loss falls, and each step moves only
    the rows the batch touched."""
    T, E, B, L = 2, 50, 4, 3
    m = build_tbe([(E, 8)] * T, style, optimizer=optimizer, learning_rate=0.2)
    gen = torch.Generator().manual_seed(1)
    target = torch.randn(B, 8 * T, generator=gen).to("npu")
    idx, off = fixed_batch(T, E, B, L, 2)
    touched = [torch.zeros(E, dtype=torch.bool) for _ in range(T)]
    for t in range(T):
        touched[t][idx[t * B * L : (t + 1) * B * L].cpu()] = True
    losses = []
    for _ in range(30):
        before = [w.detach().cpu().clone() for w in m.split_embedding_weights()]
        loss = torch.nn.functional.mse_loss(m(idx, off), target)
        loss.backward()
        losses.append(float(loss))
        after = [w.detach().cpu() for w in m.split_embedding_weights()]
        for t in range(T):
            assert torch.equal(after[t][~touched[t]], before[t][~touched[t]])
            assert not torch.equal(after[t][touched[t]], before[t][touched[t]])
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("style", list(STYLES))
def test_backward_memory_is_o_of_indices(style: str) -> None:
    """A 10-million-row table (D=4 fp32: 160 MB) trains one step on 300 indices with peak extra
    device memory O(indices x D): far below one table-sized gradient."""
    E, D, n, L = 10_000_000, 4, 300, 10
    m = build_tbe([(E, D)], style, optimizer=O.EXACT_ROWWISE_ADAGRAD)
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, E, (n,), generator=gen).to("npu")
    off = torch.arange(0, n + 1, L).to("npu")
    grad = torch.ones(n // L, D, device="npu")
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    out = m(idx, off)
    out.backward(grad)
    del out
    torch.npu.synchronize()
    peak = torch.npu.max_memory_allocated() - base
    bound = 64 * n * D * 4 + (1 << 16)
    assert peak < bound, f"peak extra device memory {peak} B > {bound} B (table {E * D * 4} B)"
    assert torch.npu.memory_allocated() - base < (1 << 16)  # nothing table-sized kept either
