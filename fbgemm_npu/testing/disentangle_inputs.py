"""Inputs of ``mxrec::disentangle_attention`` as Rec SDK's test draws them
(``cust_op/test/disetangle_attention/torch/gendata.py``): Q, K, V, P_k, P_q uniform in [-1, 1];
``relative_pos`` from DeBERTa's ``build_relative_position`` (``q_id - k_id``, optionally log
buckets); an additive mask of 0 and float16's -65504 (each key masked with probability 1/2, the
diagonal kept so no row is fully masked); ``score_scale = (d (1 + #types)) ** -0.5``.  Shared
by the disentangle tests, benches and fuzz cases."""

from __future__ import annotations

import math

import torch

__all__ = ["MASKED", "build_relative_position", "disentangle_inputs", "score_scale"]

MASKED = -65504.0  # float16's lowest finite value, Rec SDK's masked entry


def build_relative_position(s: int, bucket_size: int = -1, max_position: int = -1) -> torch.Tensor:
    """``(s, s)`` int64 ``i - j``; with ``bucket_size, max_position > 0`` DeBERTa's log buckets
    beyond ``bucket_size // 2`` (Rec SDK's gendata, DeBERTa's ``make_log_bucket_position``)."""
    ids = torch.arange(s, dtype=torch.long)
    rel = ids[:, None] - ids[None, :]
    if bucket_size > 0 and max_position > 0:
        mid = bucket_size // 2
        sign = rel.sign()
        near = (rel < mid) & (rel > -mid)
        abs_pos = torch.where(near, torch.full_like(rel, mid - 1), rel.abs()).double()
        ratio = math.log((max_position - 1) / mid)
        log_pos = torch.ceil(torch.log(abs_pos / mid) / ratio * (mid - 1)).long() + mid
        rel = torch.where(abs_pos <= mid, rel, log_pos * sign)
    return rel


def score_scale(pos_attr_type: str, d: int) -> float:
    """Rec SDK's test scale ``(d (1 + number of pos types)) ** -0.5``."""
    return (d * (1 + len(pos_attr_type.split("|")))) ** -0.5


def disentangle_inputs(
    b: int,
    n: int,
    s: int,
    d: int,
    dtype: torch.dtype = torch.float16,
    *,
    seed: int = 0,
    mask_dims: int = 4,
    rel_dims: int = 2,
    rel_dtype: torch.dtype = torch.int64,
    buckets: tuple[int, int] | None = None,
    masked: float = MASKED,
) -> list[torch.Tensor]:
    """CPU ``[Q, K, V, P_k, P_q, relative_pos, attn_mask]`` in ``dtype`` (positions in
    ``rel_dtype`` of ``rel_dims`` dims, the mask ``(b, 1, s, s)`` or ``(b, s, s)``)."""
    g = torch.Generator().manual_seed(seed)
    qkv = [(torch.rand(b, n, s, d, generator=g) * 2 - 1).to(dtype) for _ in range(3)]
    pos = [(torch.rand(2 * s, n, d, generator=g) * 2 - 1).to(dtype) for _ in range(2)]
    rel = build_relative_position(s, *(buckets or (-1, -1)))
    rel = rel.reshape((1,) * (rel_dims - 2) + (s, s)).to(rel_dtype)
    keep = (torch.rand(b, 1, s, s, generator=g) <= 0.5) | torch.eye(s, dtype=torch.bool)
    mask = torch.where(keep, 0.0, masked).to(dtype)
    return [*qkv, *pos, rel, mask if mask_dims == 4 else mask[:, 0]]
