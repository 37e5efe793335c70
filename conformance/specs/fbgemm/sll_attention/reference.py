"""float64 references of the sll_attention ops where upstream's CPU kernel cannot judge: its
multi-head attention has no CPU kernel (the math of its Triton kernel,
``fbgemm_gpu/sll/triton/triton_multi_head_jagged_flash_attention.py``, written out per head
and batch row), and its jagged softmax / dense flash attention leave rows past ``max_seq_len``
uninitialised (their forward and backward).  Plain loops over the batch: a reference, not a
kernel."""

from __future__ import annotations

from typing import Any

import torch

from conformance.specs.fbgemm.jagged.inputs import real

__all__ = [
    "dense_flash_attention_reference",
    "jagged_softmax_reference",
    "multi_head_reference",
]


def _spans(offsets: torch.Tensor, max_seq_len: int) -> list[tuple[int, int]]:
    """``(start, n_b)`` with ``n_b = clamp(len_b, 0, max_seq_len)``."""
    o = offsets.tolist()
    m = max(max_seq_len, 0)
    return [(o[i], min(max(o[i + 1] - o[i], 0), m)) for i in range(len(o) - 1)]


def _real(t: Any) -> torch.Tensor:
    return real(t)  # a TensorView: the view it stands for


def multi_head_reference(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """``out[h, s + i] = sum_j softmax_j(q_i . k_j) v_j / max_seq_len`` for ``i, j < n_b``
    (rows from ``s = offsets[b]``), 0 on every other row; float64."""
    q, k, v = (_real(t).double() for t in (q_weights, k_weights, v_weights))
    out = q * 0  # a gradient path to every input, also where no row is read
    out = out + 0 * k.sum() + 0 * v.sum()
    for s, n in _spans(offsets, max_seq_len):
        if n == 0:
            continue
        qs, ks, vs = q[:, s : s + n], k[:, s : s + n], v[:, s : s + n]
        p = torch.softmax(qs @ ks.transpose(1, 2), -1) / max_seq_len
        full = torch.zeros_like(out)
        full[:, s : s + n] = p @ vs
        out = out + full
    return out


def dense_flash_attention_reference(
    q_weights: torch.Tensor,
    k_weights: torch.Tensor,
    v_weights: torch.Tensor,
    attn_bias: torch.Tensor,
    offsets: torch.Tensor,
    max_seq_len: int,
    allow_tf32: bool = True,
) -> torch.Tensor:
    """``out[b] = softmax_l(q_l . k_b + bias_b[l]) ^T v_l`` over ``l < n_b`` (bias rows past
    its ``Nb`` are 0); float64."""
    q, k, v, bias = (_real(t).double() for t in (q_weights, k_weights, v_weights, attn_bias))
    b_count, t_count, dv = k.size(0), k.size(2), v.size(1)
    outs = []
    for b, (s, n) in enumerate(_spans(offsets, max_seq_len)):
        if n == 0:
            outs.append(torch.zeros(t_count, dv, dtype=torch.float64) + 0 * q.sum())
            continue
        scores = q[s : s + n] @ k[b]
        rows = min(n, bias.size(1))
        pad = torch.zeros(n - rows, t_count, dtype=torch.float64)
        scores = scores + torch.cat([bias[b, :rows], pad])
        outs.append(torch.softmax(scores, 0).T @ v[s : s + n])
    if b_count == 0:
        return torch.zeros(0, t_count, dv, dtype=torch.float64)
    return torch.stack(outs) + 0 * (k.sum() + v.sum() + bias.sum())


def jagged_softmax_reference(
    x: torch.Tensor, x_offsets: torch.Tensor, max_seq_len: int, use_fbgemm_kernel: bool = True
) -> torch.Tensor:
    """softmax over each batch row's first ``n_b`` rows, 0 elsewhere; float64."""
    v = _real(x).double()
    out = v * 0
    for s, n in _spans(x_offsets, max_seq_len):
        if n > 0:
            full = torch.zeros_like(v)
            full[s : s + n] = torch.softmax(v[s : s + n], 0)
            out = out + full
    return out
