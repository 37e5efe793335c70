"""The linear_silu family on npu and CPU against the float64 references written from Rec SDK's
formulas (``conformance/specs/mxrec/linear_silu/linear_silu.py``): every dtype at Rec SDK's
shapes (k = 64, n = 256, equal and unequal splits), the autograd against float64 autograd
(Rec SDK's MSE-of-the-mean loss, and a loss on ``linear_output`` too), the backward op."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.linear_silu.linear_silu import backward_reference, forward_reference

M = torch.ops.mxrec
DEVICES = ("npu", "cpu")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# per dtype (rtol = atol), relative to max |reference|: Rec SDK's own bars are 1e-4 / 1e-3 /
# 5e-3 on the fraction of mismatches; we bound every element
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
SPLITS = ([64, 64, 64, 64], [32, 32, 96, 96])  # Rec SDK's equal and [h-32, h-32, h+32, h+32]


def _inputs(m: int, k: int, n: int, dtype: torch.dtype, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.rand(m, k, generator=gen) * 2 - 1).to(dtype)
    w = ((torch.rand(n, k, generator=gen) * 2 - 1) / k**0.5).to(dtype)
    b = torch.rand(n, generator=gen) * 2 - 1  # float32, as Rec SDK's README
    return x, w, b


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    bound = TOL[dtype] * max(expected.abs().max().item(), 1.0)
    err = (actual.cpu().double() - expected).abs().max().item()
    assert err <= bound, (err, bound)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("splits", SPLITS, ids=("equal", "unequal"))
def test_forward_matches_the_reference(device: str, dtype: torch.dtype, splits: list[int]) -> None:
    x, w, b = _inputs(33, 64, 256, dtype)
    for op in (M.in_linear_silu, M.distance_in_linear_silu):
        outs = op(x.to(device), w.to(device), b.to(device), splits)
        ref = forward_reference(x, w, b, splits)
        assert len(outs) == 5
        for o, r in zip(outs, ref, strict=True):
            assert o.device.type == device and o.dtype == dtype and o.is_contiguous()
            _close(o, r, dtype)
        # five fresh buffers: no output is a view of another
        assert len({o.untyped_storage().data_ptr() for o in outs}) == 5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("use_linear_output", [False, True], ids=("uvqk", "with_z"))
def test_autograd_matches_float64_autograd(
    device: str, dtype: torch.dtype, use_linear_output: bool
) -> None:
    splits = SPLITS[1]
    x, w, b = _inputs(17, 64, 256, dtype, seed=1)
    target = torch.rand(17, 32, generator=torch.Generator().manual_seed(2))

    def loss(outs: list[torch.Tensor]) -> torch.Tensor:
        u, v, q, k, z = outs
        mean = (u[:, :32] + v + q[:, :32] + k[:, :32]) / 4  # Rec SDK's loss, on equal widths
        out = ((mean.double() - target.double().to(mean.device)) ** 2).mean()  # MSE
        return out + (z.double() ** 2).mean() if use_linear_output else out

    leaves = [t.to(device).requires_grad_() for t in (x, w, b)]
    grads = torch.autograd.grad(loss(M.in_linear_silu(*leaves, splits)), leaves)
    ref_leaves = [t.double().requires_grad_() for t in (x, w, b)]
    ref = torch.autograd.grad(loss(forward_reference(*ref_leaves, splits)), ref_leaves)
    for g, r, leaf in zip(grads, ref, leaves, strict=True):
        assert g.dtype == leaf.dtype and g.device.type == device
        _close(g, r, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_backward_op_matches_the_reference(
    device: str, dtype: torch.dtype, with_bias: bool
) -> None:
    splits = SPLITS[1]
    x, w, b = _inputs(9, 64, 256, dtype, seed=3)
    gen = torch.Generator().manual_seed(4)
    grads = [torch.randn(9, h, generator=gen).to(dtype) for h in splits]
    z = torch.addmm(b.double(), x.double(), w.double().t()).to(dtype)
    bias = b if with_bias else None
    d = [t.to(device) if t is not None else None for t in (x, w, bias, *grads, z)]
    out = M.in_linear_silu_backward(*d, splits)
    ref = backward_reference(x, w, bias, *grads, z, splits)
    assert len(out) == 4 and out[3] is None
    assert (out[2] is None) == (not with_bias)
    assert out[0].dtype == dtype and out[1].dtype == dtype
    if with_bias:
        assert out[2].dtype == torch.float32  # the bias's dtype (Rec SDK: zeros_like(bias))
    for o, r in zip(out[:3], ref[:3], strict=True):
        if r is not None:
            _close(o, r, dtype)


def test_a_bias_of_x_dtype_and_an_empty_batch() -> None:
    x, w, b = _inputs(0, 16, 64, torch.float16)
    outs = M.in_linear_silu(x.npu(), w.npu(), b.half().npu(), [16] * 4)
    assert [tuple(o.shape) for o in outs] == [(0, 16)] * 4 + [(0, 64)]
    x, w, b = _inputs(3, 16, 64, torch.bfloat16)
    outs = M.in_linear_silu(x.npu(), w.npu(), b.bfloat16().npu(), [16] * 4)
    _close(outs[4], forward_reference(x, w, b.bfloat16(), [16] * 4)[4], torch.bfloat16)


def test_npu_equals_cpu_bit_for_bit() -> None:
    """The same tensor program on both devices (the simulator runs CPU kernels)."""
    x, w, b = _inputs(7, 32, 128, torch.float32)
    a = M.in_linear_silu(x.npu(), w.npu(), b.npu(), [32] * 4)
    c = M.in_linear_silu(x, w, b, [32] * 4)
    assert all(torch.equal(p.cpu(), q) for p, q in zip(a, c, strict=True))
