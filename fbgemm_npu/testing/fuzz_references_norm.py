"""References for the norm family's fuzz cases (``tests/fuzz/test_fuzz_norm.py``): the math of
``mxrec::ln_mul`` / ``token_mixing`` / ``norm_multiply_dropout`` (+ backward) in float64,
written apart from the kernels, results in the ops' dtypes; differentiable, so the harness
compares gradients.  The dropout cases run as programs that seed torch's generator first
(:func:`nmd_seeded`), the reference drawing the contract's mask ``torch.rand(x.shape) >= p``
after the same seed (the simulated npu shares the CPU generator)."""

from __future__ import annotations

import torch


def _ln(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.double()
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w.double() + b.double()


def ln_mul(x, u, gamma, beta):
    return (_ln(x, gamma, beta, 1e-5) * u.double()).to(x.dtype)


def token_mixing(x, gamma, beta, epsilon=1e-7):
    xd = x.double()
    return _ln(xd + xd.transpose(1, 2), gamma, beta, epsilon).to(x.dtype)


def nmd_seeded(seed, x, u, weight, bias, eps, dropout_ratio):
    """The op after ``torch.manual_seed(seed)`` (the target of a dropout case)."""
    torch.manual_seed(seed)
    return torch.ops.mxrec.norm_multiply_dropout(x, u, weight, bias, eps, dropout_ratio)


def nmd(seed, x, u, weight, bias, eps, dropout_ratio):
    y = _ln(x, weight, bias, eps) * u.double()
    if dropout_ratio > 1e-10:
        torch.manual_seed(seed)
        keep = torch.rand(x.shape, dtype=torch.float32) >= dropout_ratio
        y = y * keep * (0.0 if dropout_ratio >= 1 else 1 / (1 - dropout_ratio))
    return [y.to(x.dtype)]


def nmd_backward(grad, x, u, weight, bias, mask, eps, dropout_ratio):
    """``[dx, du, dweight, dbias]``: float64 autograd of the forward with the given mask."""
    leaves = [t.detach().double().requires_grad_() for t in (x, u, weight, bias)]
    y = _ln(leaves[0], leaves[2], leaves[3], eps) * leaves[1]
    if dropout_ratio > 1e-10:
        y = y * mask * (0.0 if dropout_ratio >= 1 else 1 / (1 - dropout_ratio))
    grads = torch.autograd.grad(y, leaves, grad.double())
    return [g.to(t.dtype) for g, t in zip(grads, (x, u, weight, bias), strict=True)]
