"""Inputs of the permute family's tests: a random jagged batch of any size and a small one whose
permuted result reads by eye, on the host (move them with :func:`on_npu`); and the loop
references by which the fuzz tests judge the inputs upstream's CPU kernels cannot."""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "SMALL",
    "on_npu",
    "permute_1d_reference",
    "permute_2d_reference",
    "permute_features_reference",
    "permute_input1d_reference",
    "sparse_batch",
]

# Three features of batch 2, nine values; permute [2, 0, 1] gives values 6..8, 0, 1..5.
SMALL = {
    "permute": torch.tensor([2, 0, 1], dtype=torch.int32),
    "lengths": torch.tensor([[1, 2], [0, 3], [2, 1]]),
    "values": torch.arange(9),
    "weights": torch.arange(9.0),
}


def sparse_batch(
    t_in: int, b: int, seed: int = 0, weights: bool = False
) -> dict[str, torch.Tensor]:
    """``t_in`` features x ``b`` samples, lengths in 0..11, int64 values, a random int32
    ``permute`` of the features, float32 ``weights`` when asked."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 12, (t_in, b), generator=gen)
    n = int(lengths.sum())
    out = {"lengths": lengths, "values": torch.randint(0, 1000, (n,), generator=gen)}
    out["permute"] = torch.randperm(t_in, generator=gen).to(torch.int32)
    if weights:
        out["weights"] = torch.rand(n, generator=gen)
    return out


def on_npu(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with every tensor moved to the npu device."""
    return {k: v.to("npu") if isinstance(v, torch.Tensor) else v for k, v in d.items()}


# --- references for the fuzz tests (tests/fuzz/test_fuzz_permute.py) -------------------------
# Inputs upstream's CPU kernels cannot judge: int64 ``permute``, bfloat16 / int / 2-D weights,
# gradients with repeated features.  Plain Python over the segments builds the source index;
# the gathers are ``t[idx]``, so autograd gives the adjoint (repeats summed).


def _source_index(permute: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    rows = lengths.tolist()
    starts, pos = [], 0
    for row in rows:
        starts.append([])
        for n in row:
            starts[-1].append(pos)
            pos += n
    perm = [int(p) for p in permute.reshape(-1).tolist()]
    b = lengths.shape[1]
    src = [starts[t][j] + i for t in perm for j in range(b) for i in range(rows[t][j])]
    return torch.tensor(src, dtype=torch.int64)


def permute_2d_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``permute_2D_sparse_data`` of ``(T_in, B)`` lengths; weights ``(N,)`` or ``(N, C)``."""
    idx = _source_index(permute, lengths)
    perm = permute.reshape(-1).long()
    out_lengths = lengths[perm] if perm.numel() else lengths.new_empty((0, lengths.shape[1]))
    out_weights = None if weights is None else weights[idx]
    return out_lengths, values.reshape(-1)[idx], out_weights


def permute_1d_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``permute_1D_sparse_data``: lengths read flat, one segment per entry."""
    out = permute_2d_reference(permute, lengths.reshape(-1, 1), values, weights)
    return out[0].reshape(-1), out[1], out[2]


def permute_input1d_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    stride: int,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``permute_2D_sparse_data_input1D``: lengths viewed ``(-1, stride)``, returned flat."""
    out = permute_2d_reference(permute, lengths.reshape(-1, stride), values, weights)
    return out[0].reshape(-1), out[1], out[2]


def permute_features_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    indices: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``permute_sparse_features``: the 2-D permute without a size argument."""
    return permute_2d_reference(permute, lengths, indices, weights)
