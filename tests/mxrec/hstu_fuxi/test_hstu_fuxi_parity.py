"""``mxrec::hstu_fuxi`` and ``mxrec::hstu_dense_backward_fuxi`` against Rec SDK's own goldens (at
Rec SDK's fraction-allclose tolerances, recsdk-ops.md section 3) and against the float64
reference (conformance/specs/mxrec/hstu_fuxi/), per dtype, jagged and normal, with and without the
bias channels, mask types 0 / 2 / 3, one and several query tiles, npu and CPU; the gradients
through the autograd binding (the layout change inside it) against autograd of the float64 forward.

Where Rec SDK's golden rounds partial sums to the input dtype (dv: three channel products summed in
the dtype; dpositionBias: per-head partials summed in the dtype) our float32 accumulation is closer
to the exact value than the golden: there the test asks for at least the golden's accuracy against
float64 (max and RMS error, plus Rec SDK's atol) instead of fraction-closeness to the golden.
"""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu_fuxi.golden import (
    RECSDK_TOL,
    fraction_close,
    fuxi_backward_golden,
    fuxi_golden,
)
from conformance.specs.mxrec.hstu_fuxi.reference import (
    fuxi_backward_reference,
    fuxi_reference,
    to_backward_layout,
)
from fbgemm_npu.native.mxrec.hstu import _attention

DTYPES = list(RECSDK_TOL)
# |ours - float64| <= TOL * max|float64| (outputs), 3x that for gradients: one rounding of the
# scores to the dtype before @ v, matmuls in the dtype (2**-11 / 2**-8 a term)
TOL = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
B, N, D = 4, 2, 16


def _data(s: int, dtype: torch.dtype, seed: int, jagged: bool = True) -> dict:
    """Rec SDK's test data: q, k, v uniform(-1, 1), biases in [0, 1), a 0 / 1 custom mask,
    random lengths in [1, S] (jagged) -- with one empty sequence inside."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, s + 1, (B,), generator=g).tolist() if jagged else [s] * B
    if jagged:
        lens[1] = 0
    off = [0]
    for n in lens:
        off.append(off[-1] + n)
    shape = (off[-1], N, D) if jagged else (B, s, N, D)

    def u(*size: int) -> torch.Tensor:
        return (torch.rand(*size, generator=g) * 2 - 1).to(dtype)

    return {
        "q": u(*shape), "k": u(*shape), "v": u(*shape),
        "ts": torch.rand(B, s, s, generator=g).to(dtype),
        "pos": torch.rand(1, s, s, generator=g).to(dtype),
        "mask": torch.randint(0, 2, (B, N, s, s), generator=g).to(dtype),
        "grad": u(off[-1], N, 3 * D), "off": off, "s": s,
    }  # fmt: skip


def _assert_fraction(ours: torch.Tensor, golden: torch.Tensor, dtype: torch.dtype, what: str):
    ok, frac = fraction_close(ours, golden, RECSDK_TOL[dtype], RECSDK_TOL[dtype])
    assert ok, f"{what}: {frac:.4f} of the elements off by more than {RECSDK_TOL[dtype]}"


def _assert_near(ours: torch.Tensor, ref: torch.Tensor, tol: float, what: str) -> None:
    bound = tol * (ref.abs().max().item() + 1e-3)
    err = (ours.double().cpu() - ref.detach()).abs().max().item()
    assert err <= bound, f"{what}: max error {err:.3e} > {bound:.3e}"


@pytest.mark.parametrize("s", [15, 64])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("mask_type", [0, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forward_matches_recsdk_golden(dtype, mask_type, bias, s) -> None:  # type: ignore[no-untyped-def]
    x = _data(s, dtype, seed=s + mask_type)
    ts, pos = (x["ts"], x["pos"]) if bias else (None, None)
    gold = fuxi_golden(x["q"], x["k"], x["v"], ts, pos, x["mask"], mask_type, s, 0.0, x["off"])
    args = [t.npu() if t is not None else None for t in (x["q"], x["k"], x["v"], ts, pos)]
    out = torch.ops.mxrec.hstu_fuxi(*args, x["mask"].npu(), mask_type, s, 0.0, "jagged", x["off"])
    assert out.shape == (x["off"][-1], (3 if bias else 1) * N * D) and out.dtype == dtype
    _assert_fraction(out, gold, dtype, "output")


@pytest.mark.parametrize("s", [15, 64])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("mask_type", [0, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_op_matches_recsdk_golden(dtype, mask_type, bias, s) -> None:  # type: ignore[no-untyped-def]
    x = _data(s, dtype, seed=10 + s + mask_type)
    grad = x["grad"] if bias else x["grad"][..., :D].contiguous()
    ts, pos = (x["ts"], x["pos"]) if bias else (None, None)
    mask = x["mask"] if mask_type == 3 else None
    qkv = (x["q"], x["k"], x["v"])
    gold = fuxi_backward_golden(grad, *qkv, mask, pos, ts, mask_type, s, 1 / 256, x["off"])
    ref = fuxi_backward_reference(
        grad, *qkv, mask, pos, ts, "jagged", mask_type, s, 1 / 256, x["off"]
    )
    dev = [t.npu() if t is not None else None for t in (grad, *qkv, mask, pos, ts)]
    ours = torch.ops.mxrec.hstu_dense_backward_fuxi(*dev, "jagged", mask_type, s, 1 / 256, x["off"])
    names = ("dq", "dk", "dv", "dpositionBias", "dtimestampBias")
    for name, a, g, r in zip(names, ours, gold, ref, strict=True):
        if g is None:
            assert a.shape == (0,), name  # no biases: empty bias gradients
            continue
        assert a.shape == g.shape and a.dtype == dtype, name
        if name in ("dv", "dpositionBias") and dtype != torch.float32:
            # at least the golden's accuracy (the module docstring)
            ea, eg = (a.double().cpu() - r).abs(), (g.double() - r).abs()
            atol = RECSDK_TOL[dtype]
            assert ea.max() <= eg.max() + atol, (name, ea.max().item(), eg.max().item())
            assert ea.pow(2).mean().sqrt() <= eg.pow(2).mean().sqrt() + atol, name
        else:
            _assert_fraction(a, g, dtype, name)


def _grads_of_reference(x: dict, bias: bool, mask_type: int, layout: str, w: torch.Tensor):
    leaves = [x[n].double().requires_grad_() for n in ("q", "k", "v", "ts", "pos")]
    ts, pos = (leaves[3], leaves[4]) if bias else (None, None)
    off = x["off"] if layout == "jagged" else None
    ref = fuxi_reference(
        *leaves[:3], ts, pos, x["mask"].double(), mask_type, x["s"], 0.3, layout, off
    )
    (ref * w).sum().backward()
    return ref, leaves


@pytest.mark.parametrize("rows", [None, 4], ids=["one_tile", "tiles"])
@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("layout", ["jagged", "normal"])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("mask_type", [0, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_autograd_matches_the_float64_reference(  # type: ignore[no-untyped-def]
    dtype, mask_type, bias, layout, device, rows, monkeypatch
) -> None:
    if rows is not None:  # tiles of 4 query rows
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", B * (3 if bias else 1) * N * 15 * rows)
    x = _data(15, dtype, seed=mask_type + 3 * bias, jagged=layout == "jagged")
    out_shape = (*x["q"].shape[:-2], (3 if bias else 1) * N * D)
    w = torch.randn(out_shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref, leaves = _grads_of_reference(x, bias, mask_type, layout, w)
    ours_in = [x[n].to(device).requires_grad_() for n in ("q", "k", "v", "ts", "pos")]
    ts, pos = (ours_in[3], ours_in[4]) if bias else (None, None)
    off = x["off"] if layout == "jagged" else None
    out = torch.ops.mxrec.hstu_fuxi(
        *ours_in[:3], ts, pos, x["mask"].to(device), mask_type, 15, 0.3, layout, off
    )
    assert out.shape == out_shape and out.dtype == dtype and out.device.type == device
    _assert_near(out, ref, TOL[dtype], "output")
    (out.double() * w.to(device)).sum().backward()
    names = ("q", "k", "v", "timestampBias", "positionBias")
    for name, ours, theirs in zip(names, ours_in, leaves, strict=True):
        if name in names[3:] and not bias:
            assert ours.grad is None, name  # no bias channels: no bias gradients
            continue
        assert ours.grad.shape == theirs.shape and ours.grad.dtype == dtype, name
        _assert_near(ours.grad, theirs.grad, 3 * TOL[dtype], f"grad of {name}")


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("mask_type", [0, 2, 3])
def test_the_two_references_agree_through_the_layout_change(mask_type: int, bias: bool) -> None:
    """Autograd of the float64 forward (output gradient [T, 3ND], blocks score | ts | pos) equals
    the float64 backward fed that gradient in the backward op's layout [T, N, 3D]: the layout
    change the autograd binding makes is the right one."""
    x = _data(9, torch.float64, seed=5 + mask_type)
    c = 3 if bias else 1
    w = torch.randn(x["off"][-1], c * N * D, generator=torch.Generator().manual_seed(2)).double()
    _, leaves = _grads_of_reference(x, bias, mask_type, "jagged", w)
    g = to_backward_layout(w, N, c)
    ts, pos = (x["ts"], x["pos"]) if bias else (None, None)
    back = fuxi_backward_reference(
        g, x["q"], x["k"], x["v"], x["mask"], pos, ts, "jagged", mask_type, 9, 0.3, x["off"]
    )
    expect = [leaf.grad for leaf in leaves[:3]]
    expect += [leaves[4].grad, leaves[3].grad] if bias else [None, None]
    for a, e in zip(back, expect, strict=True):
        assert (a is None) == (e is None)
        if a is not None:
            torch.testing.assert_close(a, e)


@pytest.mark.parametrize("layout", ["jagged", "normal"])
def test_strided_and_expanded_inputs_give_the_contiguous_results(layout: str) -> None:
    """On the device: a transposed q, a sliced k, a v of one head expanded (stride 0), biases
    and mask expanded from one row; the output and every gradient (of the bases) equal those of
    contiguous copies, and the stride-0 output gradient ``out.sum()`` gives is taken as it is."""
    x = _data(6, torch.float32, seed=11, jagged=layout == "jagged")
    shape = x["q"].shape
    views = (
        lambda t: t.transpose(-1, -2),  # base [..., D, N]: q transposed
        lambda t: t[..., :D],  # base [..., N, 2D]: a slice
        lambda t: t.expand(shape),  # base [..., 1, D]: every head one row, stride 0
        lambda t: t.expand(B, 6, 6),  # timestampBias from one batch row
        lambda t: t,
    )
    bases = (
        x["q"].transpose(-1, -2).contiguous(),
        torch.cat([x["k"], x["k"]], -1),
        x["v"][..., :1, :].contiguous(),
        x["ts"][:1].contiguous(),
        x["pos"],
    )
    off = x["off"] if layout == "jagged" else None
    results = []
    for contiguous in (False, True):
        leaves = [t.npu().requires_grad_() for t in bases]
        args = [view(leaf) for view, leaf in zip(views, leaves, strict=True)]
        mask = x["mask"][:1].npu().expand(B, N, 6, 6)
        if contiguous:
            args, mask = [a.contiguous() for a in args], mask.contiguous()
        else:
            assert args[2].stride()[-2] == 0 and not args[0].is_contiguous()
        out = torch.ops.mxrec.hstu_fuxi(*args, mask, 3, 6, 0.0, layout, off)
        out.sum().backward()
        results.append([out, *(leaf.grad for leaf in leaves)])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
