"""Loop references of the permute family: plain Python over the segments, the oracle wherever
upstream's CPU kernels cannot judge (``cuda_forms.py``) and for the tests' expected values."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["expand_reference", "invert_reference", "permute_1d_reference", "permute_reference"]


def permute_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Segment-by-segment permute of 2-D ``lengths`` (``(T_in, B)``); weights 1-D or 2-D."""
    perm = [int(p) for p in permute.reshape(-1).tolist()]
    rows = lengths.tolist()
    b = lengths.shape[1]
    starts, pos = [], 0
    for row in rows:
        starts.append([])
        for n in row:
            starts[-1].append(pos)
            pos += n
    src = [starts[t][j] + i for t in perm for j in range(b) for i in range(rows[t][j])]
    idx = torch.tensor(src, dtype=torch.int64)
    out_lengths = torch.tensor([rows[t] for t in perm], dtype=lengths.dtype).view(len(perm), b)
    out_weights = None if weights is None else weights[idx]
    return out_lengths, values.reshape(-1)[idx], out_weights


def permute_1d_reference(
    permute: torch.Tensor,
    lengths: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor | None = None,
    permuted_lengths_sum: int | None = None,
) -> Any:
    out = permute_reference(permute, lengths.reshape(-1, 1), values, weights)
    return out[0].view(-1), out[1], out[2]


def expand_reference(
    permute: torch.Tensor, input_offset: torch.Tensor, output_offset: torch.Tensor, output_size: int
) -> torch.Tensor:
    ins, outs = input_offset.reshape(-1).tolist(), output_offset.reshape(-1).tolist()
    out = [0] * output_size
    for t, p in enumerate(permute.reshape(-1).tolist()):
        for i in range(outs[t + 1] - outs[t]):
            out[outs[t] + i] = ins[p] + i
    return torch.tensor(out, dtype=input_offset.dtype)


def invert_reference(permute: torch.Tensor) -> torch.Tensor:
    """``out[p] = i`` over ``permute`` read in logical (row-major) order."""
    flat = permute.reshape(-1).tolist()
    out = [0] * len(flat)
    for i, p in enumerate(flat):
        out[p] = i
    return torch.tensor(out, dtype=permute.dtype).view(permute.shape)
