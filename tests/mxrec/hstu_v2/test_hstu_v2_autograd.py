"""``mxrec::hstu_forward_v2``'s autograd binding (AutogradCPU / AutogradPrivateUse1: Rec SDK has
none): ``torch.autograd.gradcheck`` in float64 on CPU -- our analytic gradients (the backward op,
or the shared core for the custom mask) against finite differences of our forward -- for every
mask rule, GQA and q shorter than k; the gradient slots (None for a missing rab, for the custom
mask, the offsets and the interval table); the npu autograd equals the backward op.

The shared tile program scores in float32 whatever the input dtype, so the finite differences
use ``eps = 1e-3`` and the comparison ``atol = 1e-4, rtol = 1e-3`` (float32 scores: relative
error about 1e-7, over an ``eps`` of 1e-3 about 1e-4 of the slope)."""

from __future__ import annotations

import pytest
import torch

F64 = torch.float64
OFF_Q, OFF_K = [0, 2, 3], [0, 3, 5]  # q lengths 2, 1 of k lengths 3, 2
SQ, SK, NQ, NK, D, DV = 2, 3, 2, 1, 3, 2
CASES: dict[str, dict[str, object]] = {
    "causal_rab_alpha": {"rab": True, "alpha": 0.7, "silu_scale": 0.5},
    "none": {"mask_type": 2, "rab": True},
    "window": {"window_size_left": 1, "window_size_right": 1},
    "ctx_targets": {"num_context": [1, 0], "num_target": [0, 0], "target_group_size": 1},
    "arbitrary": {"arbitrary_func": [[0, 1, 2, 3], [1, 3, 0, 0], [0, 2, 0, 0], [0, 0, 0, 0]]},
    "custom_mask": {"mask_type": 3, "mask": True, "rab": True},
}  # fmt: skip


def _inputs(cfg: dict, seed: int = 3) -> tuple[list[torch.Tensor], dict]:
    g = torch.Generator().manual_seed(seed)
    leaves = [
        torch.randn(OFF_Q[-1], NQ, D, generator=g, dtype=F64),
        torch.randn(OFF_K[-1], NK, D, generator=g, dtype=F64),
        torch.randn(OFF_K[-1], NK, DV, generator=g, dtype=F64),
    ]
    kw: dict[str, object] = {
        "max_seq_len": SQ,
        "max_seq_len_k": SK,
        "seq_offset": torch.tensor(OFF_Q),
        "seq_offset_k": torch.tensor(OFF_K),
    }
    for n, val in cfg.items():
        if n == "rab":
            leaves.append(torch.randn(2, NQ, SQ, SK, generator=g, dtype=F64))
        elif n == "mask":
            kw["mask"] = (torch.rand(2, NQ, SQ, SK, generator=g) > 0.3).to(F64)
        elif n == "arbitrary_func":
            kw[n] = torch.tensor(val, dtype=torch.int32).view(2, 1, 2, 4)
        else:
            kw[n] = torch.tensor(val) if isinstance(val, list) else val
    return leaves, kw


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck_float64_cpu(name: str) -> None:
    leaves, kw = _inputs(CASES[name])
    leaves = [t.requires_grad_() for t in leaves]

    def fn(*xs: torch.Tensor) -> torch.Tensor:
        rab = xs[3] if len(xs) > 3 else None
        return torch.ops.mxrec.hstu_forward_v2(*xs[:3], rab=rab, **kw)

    assert torch.autograd.gradcheck(fn, leaves, eps=1e-3, atol=1e-4, rtol=1e-3)


def test_gradient_slots() -> None:
    """q, k, v (and rab) get gradients; the custom mask, offsets and intervals get none, and no
    rab means no rab gradient (Rec SDK's backward returns an undefined tensor there)."""
    leaves, kw = _inputs(CASES["custom_mask"])
    q, k, v, rab = (t.requires_grad_() for t in leaves)
    mask = kw["mask"].requires_grad_()  # type: ignore[union-attr]
    torch.ops.mxrec.hstu_forward_v2(q, k, v, rab=rab, **kw).sum().backward()
    assert all(t.grad is not None for t in (q, k, v, rab))
    assert mask.grad is None
    leaves, kw = _inputs(CASES["window"])
    q, k, v = (t.requires_grad_() for t in leaves)
    out = torch.ops.mxrec.hstu_forward_v2(q, k, v, **kw)
    assert out.grad_fn is not None
    dq, dk, dv = torch.autograd.grad(out.sum(), (q, k, v))
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape


def test_no_grad_needed_records_nothing() -> None:
    leaves, kw = _inputs({})
    out = torch.ops.mxrec.hstu_forward_v2(*leaves, **kw)
    assert out.grad_fn is None and not out.requires_grad


@pytest.mark.parametrize("name", ["causal_rab_alpha", "ctx_targets", "arbitrary", "window"])
def test_npu_autograd_equals_the_backward_op(name: str) -> None:
    """The recorded backward is hstu_backward_v2 with the forward's rule as window sizes."""
    leaves, kw = _inputs(CASES[name])
    dev = [t.float().npu().requires_grad_() for t in leaves]
    dkw = {n: (a.npu() if isinstance(a, torch.Tensor) else a) for n, a in kw.items()}
    rab = dev[3] if len(dev) > 3 else None
    out = torch.ops.mxrec.hstu_forward_v2(*dev[:3], rab=rab, **dkw)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).npu()
    got = torch.autograd.grad(out, dev, g)
    left, right = dkw.pop("window_size_left", -1), dkw.pop("window_size_right", 0)
    if "arbitrary_func" in dkw or dkw.get("mask_type") == 2:
        left, right = -1, -1
    want = torch.ops.mxrec.hstu_backward_v2(
        g, *[t.detach() for t in dev[:3]], SQ, SK, dkw["seq_offset"], dkw["seq_offset_k"],
        rab=None if rab is None else rab.detach(), num_context=dkw.get("num_context"),
        num_target=dkw.get("num_target"), scale=dkw.get("silu_scale", 0.0),
        target_group_size=dkw.get("target_group_size", 0), alpha=dkw.get("alpha", 1.0),
        window_size_left=left, window_size_right=right, arbitrary_func=dkw.get("arbitrary_func"),
    )  # fmt: skip
    for a, b in zip(got, want, strict=False):
        torch.testing.assert_close(a, b)
