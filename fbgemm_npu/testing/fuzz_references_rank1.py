"""References for the rank1 family's fuzz cases (``tests/fuzz/test_fuzz_rank1.py``): the math
of ``mxrec::gather_for_rank1`` and its backward in float64, written apart from the kernels,
results in the dtypes the ops return."""

from __future__ import annotations

import torch


def gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``y[i] = x[index[i]]`` (a float64 gather by Python-int rows: the gradient flows)."""
    xs = x.double()
    rows = [xs[int(k)] for k in index.tolist()]
    return (torch.stack(rows) if rows else xs[:0]).to(x.dtype)


def backward(grad: torch.Tensor, x: torch.Tensor, index: torch.Tensor) -> list:
    """``[grad_x, None]``: ``grad_x[e]`` the float64 sum of ``grad`` where ``index == e``."""
    out = [0.0] * x.numel()
    for g, k in zip(grad.double().reshape(-1).tolist(), index.reshape(-1).tolist(), strict=True):
        out[k] += g
    return [torch.tensor(out, dtype=torch.float64).to(x.dtype), None]
