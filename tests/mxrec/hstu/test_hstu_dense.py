"""``mxrec::hstu_dense`` (normal layout ``[B, S, N, D]``) and its backward against the float64
reference (conformance/specs/mxrec/hstu/reference.py), on npu and CPU: mask types 0, 2, 3, a
bias, GQA, D_qk != D_v, several tiles; gradients of q, k, v, attn_bias through autograd; errors."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu.reference import hstu_dense_reference
from fbgemm_npu.native.mxrec.hstu import _attention

B, S, NQ, NK, DQK, DV = 3, 6, 4, 2, 8, 5
TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    return {
        "q": torch.randn(B, S, NQ, DQK, generator=g, dtype=torch.float64),
        "k": torch.randn(B, S, NK, DQK, generator=g, dtype=torch.float64),
        "v": torch.randn(B, S, NK, DV, generator=g, dtype=torch.float64),
        "bias": torch.randn(B, NQ, S, S, generator=g, dtype=torch.float64),
        "mask": (torch.rand(B, NQ, S, S, generator=g) > 0.3).double(),
        "w": torch.randn(B, S, NQ, DV, generator=g, dtype=torch.float64),
    }


@pytest.mark.parametrize("rows", [None, 2], ids=["one_tile", "three_tiles"])
@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("mask_type", [0, 2, 3])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_matches_the_float64_reference(bias, mask_type, dtype, device, rows, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if rows is not None:
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", B * NQ * S * rows)
    x = _inputs()
    ref_in = [x[n].clone().requires_grad_() for n in ("q", "k", "v", "bias")]
    mask = x["mask"] if mask_type == 3 else None
    ref = hstu_dense_reference(*ref_in[:3], mask, ref_in[3] if bias else None, mask_type, 0, 0.3)
    (ref * x["w"]).sum().backward()
    ours_in = [x[n].to(device, dtype).requires_grad_() for n in ("q", "k", "v", "bias")]
    m = None if mask is None else mask.to(device, dtype)
    out = torch.ops.mxrec.hstu_dense(
        *ours_in[:3], m, ours_in[3] if bias else None, mask_type, S, 0.3
    )
    assert out.shape == (B, S, NQ, DV) and out.dtype == dtype
    tol = TOL[dtype] * (ref.abs().max().item() + 1e-3)
    torch.testing.assert_close(out.double().cpu(), ref.detach(), rtol=0, atol=tol)
    (out.double() * x["w"].to(device)).sum().backward()
    for ours, theirs in zip(ours_in if bias else ours_in[:3], ref_in, strict=False):
        scale = theirs.grad.abs().max().item() + 1e-3
        torch.testing.assert_close(
            ours.grad.double().cpu(), theirs.grad, rtol=0, atol=5 * TOL[dtype] * scale
        )
    assert bias or ours_in[3].grad is None


@pytest.mark.parametrize(
    ("over", "arg"),
    [
        ({"q": torch.zeros(B, S, NQ)}, "q"),
        ({"k": torch.zeros(B, S, 3, DQK)}, "k"),
        ({"k": torch.zeros(B, S + 1, NK, DQK)}, "k"),
        ({"max_seq_len": S + 1}, "max_seq_len"),
        ({"mask_type": 1}, "mask_type"),
        ({"mask_type": 3}, "mask"),
        ({"attn_bias": torch.zeros(B, NQ, S, S + 1)}, "attn_bias"),
        ({"q": torch.zeros(B, S, NQ, DQK, dtype=torch.int32)}, "q"),
    ],
)
def test_argument_errors_name_the_op_and_argument(over: dict, arg: str) -> None:
    x = _inputs()
    args = {"q": x["q"].float(), "k": x["k"].float(), "v": x["v"].float()}
    args.update(over)
    args = {n: (a.npu() if isinstance(a, torch.Tensor) else a) for n, a in args.items()}
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_dense.*{arg}"):
        torch.ops.mxrec.hstu_dense(**args)


def test_backward_op_without_bias_returns_an_empty_bias_grad() -> None:
    x = _inputs()
    q, k, v, w = (x[n].float().npu() for n in ("q", "k", "v", "w"))
    dq, dk, dv, db = torch.ops.mxrec.hstu_dense_backward(w, q, k, v, None, None)
    assert (dq.shape, dk.shape, dv.shape, db.shape) == (q.shape, k.shape, v.shape, (0,))
    with pytest.raises(ValueError, match="hstu_dense_backward.*grad"):
        torch.ops.mxrec.hstu_dense_backward(q, q, k, v, None, None)
