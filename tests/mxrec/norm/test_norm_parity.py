"""The norm family on npu and CPU against the float64 references written from the formulas
(``conformance/specs/mxrec/norm/norm.py``): every dtype at Rec SDK's shapes (ln_mul and
norm_multiply_dropout C = 512, token_mixing S = H = 128), the autograd against float64
autograd, the backward op against Rec SDK's backward golden, and the dropout mask: drawn from
torch's generator, so ``torch.manual_seed`` reproduces it, the same on npu and CPU."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.norm.norm import (
    ln_mul_reference,
    nmd_backward_reference,
    token_mixing_reference,
)

M = torch.ops.mxrec
DEVICES = ("npu", "cpu")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# per dtype, relative to max(|reference|, 1): a few roundings in the dtype (float32: the
# statistics over C = 512 values)
TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def _u(gen: torch.Generator, *shape: int, dtype: torch.dtype) -> torch.Tensor:
    return (torch.rand(*shape, generator=gen) * 2 - 1).to(dtype)  # Rec SDK: uniform [-1, 1)


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    bound = TOL[dtype] * max(expected.abs().max().item(), 1.0)
    err = (actual.detach().cpu().double() - expected).abs().max().item()
    assert err <= bound, (err, bound)


def _grads(fn, leaves: list[torch.Tensor], dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out = fn(*leaves)
    out = out[0] if isinstance(out, list) else out
    return torch.autograd.grad(out, leaves, dy.to(out.device, out.dtype))


def _check_autograd(op, ref, args: list[torch.Tensor], device: str, dtype: torch.dtype):
    gen = torch.Generator().manual_seed(9)
    leaves = [t.to(device).requires_grad_() for t in args]
    y = op(*leaves)
    y = y[0] if isinstance(y, list) else y
    dy = torch.randn(y.shape, generator=gen)
    ours = _grads(op, leaves, dy)
    theirs = _grads(ref, [t.double().requires_grad_() for t in args], dy.double())
    for g, r, leaf in zip(ours, theirs, leaves, strict=True):
        assert g.dtype == leaf.dtype and g.device.type == device
        _close(g, r, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_ln_mul(device: str, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    args = [_u(gen, 24, 512, dtype=dtype), _u(gen, 24, 512, dtype=dtype)]
    args += [_u(gen, 512, dtype=dtype), _u(gen, 512, dtype=dtype)]
    y = M.ln_mul(*(t.to(device) for t in args))
    assert y.device.type == device and y.dtype == dtype
    _close(y, ln_mul_reference(*args), dtype)
    _check_autograd(M.ln_mul, ln_mul_reference, args, device, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_token_mixing(device: str, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(1)
    args = [_u(gen, 2, 128, 128, dtype=dtype), _u(gen, 128, dtype=dtype), _u(gen, 128, dtype=dtype)]
    y = M.token_mixing(*(t.to(device) for t in args))
    assert y.shape == (2, 128, 128) and y.dtype == dtype
    _close(y, token_mixing_reference(*args), dtype)
    # Rec SDK's golden: torch's LayerNorm(eps=1e-7) with gamma = 1, beta = 0
    x = args[0].float()
    ln = torch.nn.functional.layer_norm(x + x.transpose(1, 2), [128], eps=1e-7)
    ones, zeros = torch.ones(128, dtype=dtype), torch.zeros(128, dtype=dtype)
    _close(
        M.token_mixing(args[0].to(device), ones.to(device), zeros.to(device)), ln.double(), dtype
    )
    _check_autograd(
        lambda x, g, b: M.token_mixing(x, g, b, 1e-5),
        lambda x, g, b: token_mixing_reference(x, g, b, 1e-5),
        args,
        device,
        dtype,
    )


def _nmd_args(dtype: torch.dtype, b: int = 16, c: int = 512) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(2)
    return [_u(gen, b, c, dtype=dtype), _u(gen, b, c, dtype=dtype), _u(gen, c, dtype=dtype),
            _u(gen, c, dtype=dtype)]  # fmt: skip


def _nmd_reference(x, u, w, b, keep_scaled: torch.Tensor) -> torch.Tensor:
    return ln_mul_reference(x, u, w, b) * keep_scaled


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_norm_multiply_dropout(device: str, dtype: torch.dtype, p: float) -> None:
    args = _nmd_args(dtype)
    torch.manual_seed(11)
    keep = torch.rand(args[0].shape) >= p  # the contract: torch.rand after the seed
    scaled = torch.ones(keep.shape, dtype=torch.float64) if p == 0 else keep / (1 - p)
    scaled = torch.zeros_like(scaled) if p == 1 else scaled
    torch.manual_seed(11)
    out = M.norm_multiply_dropout(*(t.to(device) for t in args), 1e-5, p)
    assert isinstance(out, list) and len(out) == 1 and out[0].dtype == dtype
    _close(out[0], _nmd_reference(*args, scaled.double()), dtype)
    torch.manual_seed(11)
    _check_autograd(
        lambda *a: (torch.manual_seed(11), M.norm_multiply_dropout(*a, 1e-5, p))[1],
        lambda *a: _nmd_reference(*a, scaled.double()),
        args,
        device,
        dtype,
    )


def test_the_same_seed_gives_the_same_mask_on_npu_and_cpu() -> None:
    """The simulated npu draws from the CPU generator; seeds reproduce, new draws differ."""
    u, w, b = torch.ones(64, 64), torch.ones(64), torch.zeros(64)
    masks = {}
    for device in DEVICES:
        for seed in (0, 0, 1):
            torch.manual_seed(seed)
            x = torch.arange(64.0).repeat(64, 1)  # every row the same non-zero layer norm
            (y,) = M.norm_multiply_dropout(x.to(device), u.to(device), w.to(device),
                                           b.to(device), 1e-5, 0.5)  # fmt: skip
            masks.setdefault((device, seed), []).append((y != 0).cpu())
    assert torch.equal(masks["npu", 0][0], masks["npu", 0][1])
    assert torch.equal(masks["npu", 0][0], masks["cpu", 0][0])
    assert torch.equal(masks["npu", 1][0], masks["cpu", 1][0])
    assert not torch.equal(masks["npu", 0][0], masks["npu", 1][0])
    kept = masks["npu", 0][0].double().mean().item()
    assert 0.4 < kept < 0.6  # p = 0.5 over 4096 draws


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [0.0, 0.4])
def test_backward_op_matches_rec_sdk_golden(device: str, dtype: torch.dtype, p: float) -> None:
    x, u, w, b = _nmd_args(dtype, b=8)
    gen = torch.Generator().manual_seed(3)
    grad = torch.randn(x.shape, generator=gen).to(dtype)
    mask = torch.rand(x.shape, generator=gen) >= p
    out = M.norm_multiply_dropout_backward(
        *(t.to(device) for t in (grad, x, u, w, b, mask)), 1e-5, p
    )
    ref = nmd_backward_reference(grad, x, u, w, b, mask, 1e-5, p)
    assert len(out) == 4
    for o, r in zip(out, ref, strict=True):
        assert o.dtype == dtype and o.device.type == device
        _close(o, r, dtype)
