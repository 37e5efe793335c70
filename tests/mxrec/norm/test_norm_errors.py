"""Hostile input to the norm family: every error names the op and the argument (rule 9), on
npu and CPU; Rec SDK's own refusals among them (norm_multiply_dropout: float64, a weight of
another width, dropout_ratio outside [0, 1], eps = 0), and what we accept beyond its tiling
limits (C not in {512, 1024}, B = 0, eps outside [1e-10, 1e-4], ln_mul in float16)."""

from __future__ import annotations

import pytest
import torch

M = torch.ops.mxrec


def _raises(fn, op: str, arg: str) -> None:
    with pytest.raises((ValueError, RuntimeError)) as info:
        fn()
    text = str(info.value)
    assert op in text and f"'{arg}'" in text, text


def _rows(device: str, b: int = 3, c: int = 8, dtype: torch.dtype = torch.float32):
    return [torch.randn(b, c).to(device, dtype), torch.randn(b, c).to(device, dtype),
            torch.randn(c).to(device, dtype), torch.randn(c).to(device, dtype)]  # fmt: skip


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_ln_mul_errors(device: str) -> None:
    op, f = "ln_mul", M.ln_mul
    x, u, g, b = _rows(device)
    _raises(lambda: f(x.double(), u.double(), g.double(), b.double()), op, "x")
    _raises(lambda: f(x.int(), u, g, b), op, "x")
    _raises(lambda: f(x[:, :0], u[:, :0], g[:0], b[:0]), op, "x")
    _raises(lambda: f(x, u[:2], g, b), op, "u")
    _raises(lambda: f(x, u.half(), g, b), op, "u")
    _raises(lambda: f(x, u, g[:4], b), op, "gamma")
    _raises(lambda: f(x, u, g, b[None]), op, "beta")
    _raises(lambda: f(x, u, g, b.half()), op, "beta")
    _raises(lambda: f(x, u, None, b), op, "gamma")


def test_mixed_devices_are_refused() -> None:
    x, u, g, b = _rows("npu")
    _raises(lambda: M.ln_mul(x, u.cpu(), g, b), "ln_mul", "u")
    _raises(lambda: M.token_mixing(x.view(3, 8, 1)[:, :1].expand(3, 1, 1), g.cpu()[:1], b[:1]),
            "token_mixing", "gamma")  # fmt: skip
    _raises(lambda: M.norm_multiply_dropout(x, u, g, b.cpu(), 1e-5, 0.0), "norm_multiply", "bias")


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_token_mixing_errors(device: str) -> None:
    op, f = "token_mixing", M.token_mixing
    x, g, b = torch.randn(2, 4, 4).to(device), torch.randn(4).to(device), torch.randn(4).to(device)
    _raises(lambda: f(x[:, :3], g, b), op, "x")  # S != H
    _raises(lambda: f(x[0], g, b), op, "x")
    _raises(lambda: f(x.double(), g.double(), b.double()), op, "x")
    _raises(lambda: f(x, g[:3], b), op, "gamma")
    _raises(lambda: f(x, g, b.half()), op, "beta")
    for eps in (0.0, -1e-7, float("nan"), float("inf")):
        _raises(lambda eps=eps: f(x, g, b, eps), op, "epsilon")


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_norm_multiply_dropout_errors(device: str) -> None:
    op, f = "norm_multiply_dropout", M.norm_multiply_dropout
    x, u, w, b = _rows(device, c=512)
    _raises(lambda: f(x.double(), u.double(), w.double(), b.double(), 1e-5, 0.3), op, "x")
    _raises(lambda: f(x, u, w[:256], b, 1e-5, 0.3), op, "weight")
    _raises(lambda: f(x, u, w, b.half(), 1e-5, 0.3), op, "bias")
    _raises(lambda: f(x, u.t(), w, b, 1e-5, 0.3), op, "u")
    _raises(lambda: f(x[None], u[None], w, b, 1e-5, 0.3), op, "x")
    for p in (-0.2, 1.3, float("nan")):
        _raises(lambda p=p: f(x, u, w, b, 1e-5, p), op, "dropout_ratio")
    for eps in (0.0, -1e-5, float("inf")):
        _raises(lambda eps=eps: f(x, u, w, b, eps, 0.3), op, "eps")


def test_norm_multiply_dropout_backward_errors() -> None:
    op, f = "norm_multiply_dropout_backward", M.norm_multiply_dropout_backward
    x, u, w, b = _rows("npu")
    g, keep = torch.randn(3, 8).npu(), torch.ones(3, 8, dtype=torch.bool).npu()
    _raises(lambda: f(g, x, u, w, b, None, 1e-5, 0.5), op, "mask")
    _raises(lambda: f(g, x, u, w, b, keep[:, :4], 1e-5, 0.5), op, "mask")
    _raises(lambda: f(g, x, u, w, b, keep.float(), 1e-5, 0.5), op, "mask")
    _raises(lambda: f(g, x, u, w, b, keep.cpu(), 1e-5, 0.5), op, "mask")
    _raises(lambda: f(g[:2], x, u, w, b, keep, 1e-5, 0.5), op, "grad")
    _raises(lambda: f(g.half(), x, u, w, b, keep, 1e-5, 0.5), op, "grad")
    # no dropout: the mask is not needed and not read
    assert len(f(g, x, u, w, b, None, 1e-5, 0.0)) == 4


def test_beyond_rec_sdk_limits() -> None:
    """C = 7 (Rec SDK: 512 / 1024), B = 0 (Rec SDK: >= 1), eps = 1e-2 (Rec SDK: <= 1e-4),
    ln_mul in float16 (Rec SDK: float32 only): accepted, the math holds."""
    x, u, w, b = _rows("npu", b=2, c=7)
    (y,) = M.norm_multiply_dropout(x, u, w, b, 1e-2, 0.0)
    ref = torch.nn.functional.layer_norm(x.cpu().double(), [7], w.cpu().double(),
                                         b.cpu().double(), 1e-2) * u.cpu().double()  # fmt: skip
    torch.testing.assert_close(y.cpu().double(), ref)
    e = _rows("npu", b=0, c=512)
    assert M.norm_multiply_dropout(*e, 1e-5, 0.3)[0].shape == (0, 512)
    h = _rows("npu", dtype=torch.float16)
    assert M.ln_mul(*h).dtype == torch.float16
