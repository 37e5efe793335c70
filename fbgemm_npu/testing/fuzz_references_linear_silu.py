"""References for the linear_silu family's fuzz cases (``tests/fuzz/test_fuzz_linear_silu.py``):
the math of ``mxrec::in_linear_silu`` / ``distance_in_linear_silu`` /
``in_linear_silu_backward`` in float64, written apart from the kernels (Rec SDK's formulas),
results in the dtypes the ops return; differentiable, so the fuzz harness compares gradients."""

from __future__ import annotations

import torch


def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, attr_dict: list[int]):
    """``[u, v, q, k, z]``: ``z = x W^T + b`` and ``silu(z)`` split, in x's dtype."""
    z = x.double() @ weight.double().t() + bias.double()
    y = z * torch.sigmoid(z)
    return [t.to(x.dtype) for t in (*torch.split(y, list(attr_dict), dim=1), z)]


def backward(x, weight, bias, user_grad, value_grad, query_grad, key_grad, z, attr_dict):
    """``[x_grad, weight_grad, bias_grad | None, None]``, Rec SDK's golden in float64."""
    zd = z.double()
    s = torch.sigmoid(zd)
    g = torch.cat([t.double() for t in (user_grad, value_grad, query_grad, key_grad)], dim=1)
    dz = g * (s + zd * s * (1 - s))
    bias_grad = None if bias is None else dz.sum(0).to(bias.dtype)
    return [(dz @ weight.double()).to(x.dtype), (dz.t() @ x.double()).to(x.dtype), bias_grad, None]
