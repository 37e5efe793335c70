"""Independent float64 references of the misc family's ops that upstream's CPU build cannot
judge: ``batched_unary_embeddings``' gradient (upstream's backward is CUDA-only), written from
the math with torch's autograd."""

from __future__ import annotations

import torch

__all__ = ["batched_unary_embeddings"]


def batched_unary_embeddings(
    weight: torch.Tensor, table_offsets: torch.Tensor, offsets: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """``out[n, b, t] = sum_l weight.flatten()[n E + table_offsets[t] + indices[l]]`` over the
    bag ``offsets[tB + b] : offsets[tB + b + 1]``, in float64 (differentiable in ``weight``),
    returned in ``weight``'s dtype."""
    n, t = weight.size(0), table_offsets.numel() - 1
    b = (offsets.numel() - 1) // t
    flat = weight.double().reshape(n, -1)
    off = offsets.long()[: t * b + 1]
    lengths = off[1:] - off[:-1]
    bag = torch.arange(t * b).repeat_interleave(lengths)
    positions = torch.arange(int(off[0]), int(off[-1]))
    cols = table_offsets.long()[bag // b] + indices.long()[positions]
    sums = torch.zeros(n, t * b, dtype=torch.float64).index_add(1, bag, flat[:, cols])
    return sums.view(n, t, b).permute(0, 2, 1).to(weight.dtype)
