"""Hostile input to the linear_silu family: every error names the op and the argument (rule
9), on npu and CPU alike; Rec SDK's own refusals (a split list of 3, a split sum off, a weight
width off, a float64 input) among them, and what we accept beyond its tiling limits."""

from __future__ import annotations

import pytest
import torch

M = torch.ops.mxrec
FWD = "in_linear_silu"


def _ok(device: str = "npu", dtype: torch.dtype = torch.float16):
    x = torch.randn(4, 16).to(device, dtype)
    w = torch.randn(64, 16).to(device, dtype)
    return x, w, torch.randn(64).to(device), [16, 16, 16, 16]


def _raises(fn, op: str, arg: str) -> None:
    with pytest.raises((ValueError, RuntimeError)) as info:
        fn()
    text = str(info.value)
    assert op in text and f"'{arg}'" in text, text


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("op", ["in_linear_silu", "distance_in_linear_silu"])
def test_forward_errors_name_the_argument(device: str, op: str) -> None:
    f = getattr(M, op)
    x, w, b, s = _ok(device)
    _raises(lambda: f(x.double(), w.double(), b, s), op, "x")
    _raises(lambda: f(x[0], w, b, s), op, "x")
    _raises(lambda: f(x, w.float(), b, s), op, "weight")
    _raises(lambda: f(x, w[:, :8], b, s), op, "weight")
    _raises(lambda: f(x, w, b.double(), s), op, "bias")
    _raises(lambda: f(x, w, b[:32], s), op, "bias")
    _raises(lambda: f(x, w, b[None], s), op, "bias")
    _raises(lambda: f(x, w, b, [16, 16, 32]), op, "attr_dict")
    _raises(lambda: f(x, w, b, [16, 16, 16, 17]), op, "attr_dict")
    _raises(lambda: f(x, w, b, [-16, 48, 16, 16]), op, "attr_dict")
    _raises(lambda: f(x, w, None, s), op, "bias")


def test_mixed_devices_are_refused() -> None:
    x, w, b, s = _ok()
    _raises(lambda: M.in_linear_silu(x, w, b.cpu(), s), FWD, "bias")
    _raises(lambda: M.in_linear_silu(x, w.cpu(), b, s), FWD, "weight")


def test_backward_errors_name_the_argument() -> None:
    op = "in_linear_silu_backward"
    x, w, b, s = _ok()
    g = [torch.randn(4, 16).npu().half() for _ in range(4)]
    z = torch.randn(4, 64).npu().half()
    f = M.in_linear_silu_backward
    _raises(lambda: f(x, w, b, g[0][:2], *g[1:], z, s), op, "user_grad")
    _raises(lambda: f(x, w, b, g[0], g[1].float(), *g[2:], z, s), op, "value_grad")
    _raises(lambda: f(x, w, b, *g[:3], g[3][:, :8], z, s), op, "key_grad")
    _raises(lambda: f(x, w, b, *g, z[:, :32], s), op, "linear_output")
    _raises(lambda: f(x, w, b, *g, z.float(), s), op, "linear_output")
    _raises(lambda: f(x, w, b, *g, z.cpu(), s), op, "linear_output")
    _raises(lambda: f(x, w, b, *g, z, [64]), op, "attr_dict")


def test_beyond_rec_sdk_tiling_limits() -> None:
    """k = 3, n = 10 (not multiples of 16, n % 4k != 0), a zero split: accepted (the math)."""
    x, w, b = torch.randn(2, 3).npu(), torch.randn(10, 3).npu(), torch.randn(10).npu()
    outs = M.in_linear_silu(x, w, b, [0, 4, 5, 1])
    assert [tuple(o.shape) for o in outs] == [(2, 0), (2, 4), (2, 5), (2, 1), (2, 10)]
