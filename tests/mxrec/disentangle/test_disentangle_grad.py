"""Autograd of ``mxrec::disentangle_attention`` (Rec SDK has none): ``torch.autograd.gradcheck``
in float64 on CPU for every pos_attr_type and mask rank, all three outputs carrying gradients
(attn_output, attn_probs, attn_weights, as a composite would) into query / key / value /
pos_key / pos_query and the additive mask; on npu, float32 / float16 / bfloat16 gradients
against float64 autograd of the reference; the backward op called directly with any subset of
the output gradients; inference calls not recorded."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.disentangle.reference import backward_reference, forward_reference
from fbgemm_npu.testing.disentangle_inputs import disentangle_inputs, score_scale

M = torch.ops.mxrec
TYPES = ("c2p", "p2c", "c2p|p2c")
TOL = {torch.float32: 2e-5, torch.float16: 5e-3, torch.bfloat16: 5e-2}


@pytest.mark.parametrize("kind", TYPES)
@pytest.mark.parametrize("mask_dims", [3, 4])
def test_gradcheck_float64(kind: str, mask_dims: int) -> None:
    a = disentangle_inputs(2, 2, 3, 2, torch.float64, seed=1, mask_dims=mask_dims, rel_dims=3)
    a[5] = a[5] * 2  # positions past the table: clamped columns get no gradient
    a[6] = torch.randn(a[6].shape, dtype=torch.float64)  # a learnt mask: any values
    leaves = [t.requires_grad_() if t.is_floating_point() else t for t in a]
    f = lambda *x: M.disentangle_attention(*x, kind, 0.7)  # noqa: E731
    assert torch.autograd.gradcheck(f, leaves, eps=1e-6, atol=1e-6)


def test_unused_positional_table_gets_no_gradient() -> None:
    a = [t.requires_grad_() if t.is_floating_point() else t
         for t in disentangle_inputs(2, 2, 4, 3, torch.float64, seed=2)]  # fmt: skip
    out = M.disentangle_attention(*a, "c2p", 0.5)
    grads = torch.autograd.grad(out[0].sum(), a[3:5], allow_unused=True)
    assert grads[0] is not None and grads[1] is None


@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("kind", TYPES)
def test_npu_gradients_match_the_reference(dtype: torch.dtype, kind: str) -> None:
    a = disentangle_inputs(2, 2, 7, 8, dtype, seed=3)
    c = score_scale(kind, 8)
    leaves = [t.to("npu").requires_grad_() if t.is_floating_point() else t.to("npu") for t in a]
    outs = M.disentangle_attention(*leaves, kind, c)
    gen = torch.Generator().manual_seed(4)
    gs = [torch.randn(o.shape, generator=gen) for o in outs]
    wrt = [t for t in leaves if t.requires_grad]
    ours = torch.autograd.grad(outs, wrt, [g.to("npu", dtype) for g in gs], allow_unused=True)
    ref = [t.double().requires_grad_() if t.is_floating_point() else t for t in a]
    expected = torch.autograd.grad(
        forward_reference(*ref, kind, c), [t for t in ref if t.requires_grad], gs,
        allow_unused=True,
    )  # fmt: skip
    for o, e in zip(ours, expected, strict=True):
        assert (o is None) == (e is None)
        if o is not None:
            assert o.dtype == dtype and o.device.type == "npu"
            torch.testing.assert_close(o.cpu().double(), e, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("given", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1), (0, 0, 0)])
@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_backward_op_with_any_output_gradients(given: tuple[int, ...], device: str) -> None:
    a = disentangle_inputs(2, 3, 5, 4, torch.float32, seed=5, mask_dims=3)
    c = 0.35
    probs = forward_reference(*a, "c2p|p2c", c)[1].float()
    gen = torch.Generator().manual_seed(6)
    shapes = ((2, 3, 5, 4), (2, 3, 5, 5), (2, 3, 5, 5))
    gs = [torch.randn(s, generator=gen) if k else None for s, k in zip(shapes, given, strict=True)]
    dev = [None if g is None else g.to(device) for g in gs]
    ours = M.disentangle_attention_backward(*dev, *(t.to(device) for t in a), probs.to(device),
                                            "c2p|p2c", c)  # fmt: skip
    expected = backward_reference(*gs, *a, probs, "c2p|p2c", c)
    assert len(ours) == 6
    for o, e in zip(ours, expected, strict=True):
        torch.testing.assert_close(o.cpu().double(), e, rtol=2e-5, atol=2e-5)
    assert ours[5].shape == a[6].shape


def test_backward_op_leaves_out_what_was_not_asked() -> None:
    a = [t.to("npu") for t in disentangle_inputs(1, 2, 4, 4, torch.float32, seed=7)]
    probs = M.disentangle_attention(*a, "p2c", 0.5)[1]
    g = torch.randn(1, 2, 4, 4, device="npu")
    out = M.disentangle_attention_backward(g, None, None, *a[:6], None, probs, "p2c", 0.5)
    assert out[3] is None and out[4] is not None and out[5] is None
    meta = [t.to("meta") for t in (g, *a[:6], probs)]
    shapes = M.disentangle_attention_backward(meta[0], None, None, *meta[1:7], a[6].to("meta"),
                                              meta[7], "c2p", 0.5)  # fmt: skip
    assert shapes[4] is None and shapes[3].shape == (8, 2, 4) and shapes[5].shape == (1, 1, 4, 4)


def test_inference_is_not_recorded_and_relative_pos_has_no_gradient() -> None:
    a = [t.to("npu") for t in disentangle_inputs(2, 2, 4, 4, torch.float32, seed=8)]
    assert all(o.grad_fn is None for o in M.disentangle_attention(*a, "c2p|p2c", 0.5))
    a[0].requires_grad_()
    with torch.no_grad():
        assert M.disentangle_attention(*a, "c2p|p2c", 0.5)[0].grad_fn is None
    outs = M.disentangle_attention(*a, "c2p|p2c", 0.5)
    assert all(o.requires_grad for o in outs)
    (dq,) = torch.autograd.grad(outs[2].sum(), [a[0]])
    assert dq.shape == a[0].shape
