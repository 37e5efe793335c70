"""References for the rab family's fuzz cases (``tests/fuzz/test_fuzz_rab.py``): the math of
``mxrec::relative_attn_bias_*`` in float64, written apart from the kernels, results in the
dtypes the ops return.  The time bucket follows Rec SDK's golden (``rab_time_golden``): the
exact difference rounded once to float32, its float32 log, the float32 quotient, truncated; so
a bucket at an integer boundary is the contract's, not float64's neighbour."""

from __future__ import annotations

import torch


def pos(rel_pos_bias: torch.Tensor, identity: torch.Tensor, past_valid_lens: list[int]):
    x, ident = rel_pos_bias.double(), identity.double()
    n = x.size(0)
    rows = torch.tensor([[min(r, p) for r in range(n)] for p in past_valid_lens])
    g = x[rows.reshape(-1)].reshape(len(past_valid_lens), n, n)
    return (g * (1 - ident) + ident * x[0, 0]).to(rel_pos_bias.dtype)


def _bucket(timestamps: torch.Tensor, w: int, divisor: float) -> torch.Tensor:
    t = timestamps.double()
    dt = (t[:, None, :] - t[:, :, None]).abs().clamp_min(1).float()
    return (dt.log() / divisor).clamp_max(w - 1).long()


def time_with_index(
    timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float
):
    w = timestamps_weights
    k = _bucket(timestamps, w.size(1), bucket_divisor)
    rab = w[:, k].repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
    return [rab, k.int()]


def time(timestamps: torch.Tensor, timestamps_weights: torch.Tensor, bucket_divisor: float):
    return time_with_index(timestamps, timestamps_weights, bucket_divisor)[0]


def time_backward(rab_time_grad: torch.Tensor, bucket_timestamps: torch.Tensor, num_buckets: int):
    g = rab_time_grad.double()
    n = g.size(0)
    k = bucket_timestamps.long().repeat_interleave(2, 1).repeat_interleave(2, 2).reshape(-1)
    out = torch.zeros(n, num_buckets, dtype=torch.float64).index_add_(1, k, g.reshape(n, -1))
    return out.to(rab_time_grad.dtype)
