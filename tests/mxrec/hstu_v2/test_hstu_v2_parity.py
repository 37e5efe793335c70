"""``mxrec::hstu_forward_v2`` and ``mxrec::hstu_backward_v2`` against the float64 reference
(conformance/specs/mxrec/hstu_v2/reference.py, written from Rec SDK's v2 golden and mask
utilities), on npu and CPU, float32 / float16 / bfloat16, one tile and three: the causal mask,
none, general windows, context and targets (group sizes 1 and 2), arbitrary intervals (shared and
per head, values past the keys), the custom mask, rab with alpha and scale; GQA, q shorter than k
(aligned to its end), an empty q sequence and full-length ones.  Forward outputs and the autograd
gradients of q, k, v, rab; the backward op called directly.

Tolerance: ``|ours - ref| <= TOL * max|ref|`` (outputs) and ``5 * TOL * max|grad ref|``
(gradients): float32 ``2e-5`` (float32 scores and matmuls), float16 ``3e-3``, bfloat16 ``2e-2``
(matmuls in the input dtype, scores rounded to it before ``@ v``, as Rec SDK's golden does)."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu_v2.reference import (
    hstu_backward_v2_reference,
    hstu_forward_v2_reference,
)
from fbgemm_npu.native._pending import check
from fbgemm_npu.native.mxrec.hstu import _attention

OFF_Q, OFF_K = [0, 2, 2, 5, 6], [0, 4, 5, 8, 12]  # q lengths 2, 0, 3, 1 of k lengths 4, 1, 3, 4
B, SQ, SK, NQ, NK, D, DV = 4, 3, 4, 4, 2, 8, 5
TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
G1 = {"target_group_size": 1}
CONFIGS: dict[str, dict[str, object]] = {
    "causal": {},
    "none": {"mask_type": 2},
    "window_none": {"window_size_left": -1, "window_size_right": -1},
    "sliding": {"window_size_left": 1, "window_size_right": 0},
    "symmetric": {"window_size_left": 1, "window_size_right": 1},
    "ahead": {"window_size_left": 0, "window_size_right": 2},
    "custom": {"mask_type": 3, "mask": True},
    "ctx_targets": {"num_context": [1, 0, 1, 0], "num_target": [0, 0, 1, 0], **G1},
    "group2": {"num_context": [0, 0, 0, 0], "num_target": [1, 0, 2, 0], "target_group_size": 2},
    "arbitrary": {"arbitrary_func": True},
    "arbitrary_heads": {"arbitrary_func": "heads"},
    "rab_alpha_scale": {"rab": True, "alpha": 0.5, "silu_scale": 0.2},
}  # fmt: skip


def _x() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    f64 = torch.float64
    return {
        "q": torch.randn(OFF_Q[-1], NQ, D, generator=g, dtype=f64),
        "k": torch.randn(OFF_K[-1], NK, D, generator=g, dtype=f64),
        "v": torch.randn(OFF_K[-1], NK, DV, generator=g, dtype=f64),
        "rab": torch.randn(B, NQ, SQ, SK, generator=g, dtype=f64),
        "mask": (torch.rand(B, NQ, SQ, SK, generator=g) > 0.3).to(f64),
        "w": torch.randn(OFF_Q[-1], NQ, DV, generator=g, dtype=f64),
        # (start, end) pairs in [0, SK + 1]: empty, reversed and past-the-keys pairs included
        "arbitrary_func": torch.randint(0, SK + 2, (B, 1, SQ, 4), generator=g, dtype=torch.int32),
        "heads": torch.randint(0, SK + 2, (B, NQ, SQ, 4), generator=g, dtype=torch.int32),
    }


def _kw(cfg: dict, x: dict, device: str, dtype: torch.dtype) -> dict:
    kw: dict[str, object] = {"max_seq_len": SQ, "max_seq_len_k": SK}
    kw["seq_offset"] = torch.tensor(OFF_Q, device=device, dtype=torch.int32)
    kw["seq_offset_k"] = torch.tensor(OFF_K, device=device)
    for n, val in cfg.items():
        if val is True or isinstance(val, str):
            t = x[val if isinstance(val, str) else n]
            kw[n] = t.to(device) if n == "arbitrary_func" else t.to(device, dtype)
        elif isinstance(val, list):
            kw[n] = torch.tensor(val, device=device)
        else:
            kw[n] = val
    return kw


def _grads_close(ours: list, refs: list, dtype: torch.dtype) -> None:
    for a, b in zip(ours, refs, strict=True):
        scale = b.grad.abs().max().item() + 1e-3
        tol = 5 * TOL[dtype] * scale
        torch.testing.assert_close(a.grad.double().cpu(), b.grad, rtol=0, atol=tol)


@pytest.mark.parametrize("rows", [None, 1], ids=["one_tile", "three_tiles"])
@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_forward_and_autograd_match_the_reference(name, dtype, device, rows, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if rows is not None:
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", B * NQ * SK * rows)
    x, cfg = _x(), CONFIGS[name]
    names = ["q", "k", "v", *(["rab"] if "rab" in cfg else [])]
    ref_in = [x[n].clone().requires_grad_() for n in names]
    rkw = _kw(cfg, x, "cpu", torch.float64)
    if "rab" in cfg:
        rkw["rab"] = ref_in[3]
    ref = hstu_forward_v2_reference(*ref_in[:3], **rkw)
    (ref * x["w"]).sum().backward()
    ours = [x[n].to(device, dtype).requires_grad_() for n in names]
    kw = _kw(cfg, x, device, dtype)
    if "rab" in cfg:
        kw["rab"] = ours[3]
    out = torch.ops.mxrec.hstu_forward_v2(*ours[:3], **kw)
    assert out.dtype == dtype and out.shape == (OFF_Q[-1], NQ, DV)
    tol = TOL[dtype] * (ref.abs().max().item() + 1e-3)
    torch.testing.assert_close(out.double().cpu(), ref.detach(), rtol=0, atol=tol)
    (out.double() * x["w"].to(device)).sum().backward()
    _grads_close(ours, ref_in, dtype)
    check()  # no queued data check failed


BACKWARD = {
    "causal": {"window_size_right": 0},
    "none": {},
    "sliding_rab": {"window_size_left": 2, "window_size_right": 0, "rab": True, "alpha": 2.0},
    "ctx_targets": {
        "window_size_right": 0,
        "num_context": [1, 0, 0, 0],
        "num_target": [0, 0, 2, 0],
        "target_group_size": 3,
        "scale": 0.5,
    },
    "arbitrary": {"arbitrary_func": True},
}


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("name", list(BACKWARD))
def test_backward_op_matches_the_reference(name: str, dtype: torch.dtype, device: str) -> None:
    x, cfg = _x(), BACKWARD[name]
    grad = x["w"]

    def args(dev: str, dt: torch.dtype) -> tuple[tuple, dict]:
        kw = _kw(cfg, x, dev, dt)
        lead = (kw.pop("max_seq_len"), kw.pop("max_seq_len_k"))
        lead += (kw.pop("seq_offset"), kw.pop("seq_offset_k"))
        qkv = tuple(x[n].to(dev, dt) for n in ("q", "k", "v"))
        return (grad.to(dev, dt), *qkv, *lead), kw

    ref = hstu_backward_v2_reference(
        *args("cpu", torch.float64)[0], **args("cpu", torch.float64)[1]
    )
    a, kw = args(device, dtype)
    ours = torch.ops.mxrec.hstu_backward_v2(*a, **kw)
    assert [o.shape for o in ours] == [r.shape for r in ref]
    for o, r in zip(ours, ref, strict=True):
        if r.numel():
            tol = 5 * TOL[dtype] * (r.abs().max().item() + 1e-3)
            torch.testing.assert_close(o.double().cpu(), r, rtol=0, atol=tol)
    check()


def test_no_rab_gives_no_rab_gradient_and_an_empty_slot() -> None:
    x = _x()
    q, k, v = (x[n].float().npu().requires_grad_() for n in ("q", "k", "v"))
    kw = _kw({}, x, "npu", torch.float32)
    torch.ops.mxrec.hstu_forward_v2(q, k, v, **kw).sum().backward()
    assert all(t.grad is not None for t in (q, k, v))
    lead = (kw["max_seq_len"], kw["max_seq_len_k"], kw["seq_offset"], kw["seq_offset_k"])
    out = torch.ops.mxrec.hstu_backward_v2(x["w"].float().npu(), q, k, v, *lead)
    assert out[3].shape == (0,)


def test_scale_zero_explicit_or_none_means_one_over_max_seqlen_q() -> None:
    """Open point 16.5: 0.0 (explicit or default) and None both mean 1 / max_seqlen_q."""
    x = _x()
    q, k, v = (x[n].float().npu() for n in ("q", "k", "v"))
    kw = _kw({}, x, "npu", torch.float32)
    base = torch.ops.mxrec.hstu_forward_v2(q, k, v, **{**kw, "silu_scale": 1.0 / SQ})
    for s in (0.0, None):
        out = torch.ops.mxrec.hstu_forward_v2(q, k, v, **{**kw, "silu_scale": s})
        torch.testing.assert_close(out, base)
    lead = (SQ, SK, kw["seq_offset"], kw["seq_offset_k"])
    g = x["w"].float().npu()
    want = torch.ops.mxrec.hstu_backward_v2(g, q, k, v, *lead, scale=1.0 / SQ)
    for s in (0.0, None):
        got = torch.ops.mxrec.hstu_backward_v2(g, q, k, v, *lead, scale=s)
        for a, b in zip(got[:3], want[:3], strict=True):
            torch.testing.assert_close(a, b)


def test_hints_change_nothing() -> None:
    """metadata and sparse_info are accepted and not read: the same output with and without."""
    x = _x()
    q, k, v = (x[n].float().npu() for n in ("q", "k", "v"))
    kw = _kw({"arbitrary_func": True}, x, "npu", torch.float32)
    base = torch.ops.mxrec.hstu_forward_v2(q, k, v, **kw)
    sparse = [torch.zeros(3, dtype=torch.int32, device="npu") for _ in range(6)]
    meta = torch.zeros(8, dtype=torch.int32, device="npu")
    out = torch.ops.mxrec.hstu_forward_v2(q, k, v, **kw, metadata=meta, sparse_info=sparse)
    torch.testing.assert_close(out, base)


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_no_q_rows_or_no_k_rows(device: str) -> None:
    """T_q = 0 (every q sequence empty) and T_k = T_q = 0: nothing to gather, zeros out (a
    regression: the padded gather indexed row 0 of an empty tensor)."""
    q = torch.randn(0, NQ, D, device=device)
    k, v = torch.randn(3, NK, D, device=device), torch.randn(3, NK, DV, device=device)
    off_q, off_k = torch.zeros(3, dtype=torch.int32), torch.tensor([0, 1, 3])
    sizes = {"max_seq_len": 2, "max_seq_len_k": 2}
    for kk, vv, ok in ((k, v, off_k), (k[:0], v[:0], torch.zeros(3, dtype=torch.int64))):
        kw = {**sizes, "seq_offset": off_q.to(device), "seq_offset_k": ok.to(device)}
        out = torch.ops.mxrec.hstu_forward_v2(q, kk, vv, **kw)
        assert out.shape == (0, NQ, DV)
        g = torch.randn(0, NQ, DV, device=device)
        dq, dk, dv, db = torch.ops.mxrec.hstu_backward_v2(
            g, q, kk, vv, 2, 2, off_q.to(device), ok.to(device)
        )
        assert dq.shape == q.shape and dk.shape == kk.shape and dv.shape == vv.shape
        assert db.shape == (0,) and not dk.any() and not dv.any()
    check()


def test_the_readme_examples_positional() -> None:
    """FWD_README / BWD_README's calls, every argument positional (their example: causal, no
    context / targets, fp16), smaller: 2 sequences of 20 tokens, 4 heads, D 16."""
    g = torch.Generator().manual_seed(2)
    q, k, v, grad = (torch.randn(40, 4, 16, generator=g).half() for _ in range(4))
    off = torch.tensor([0, 20, 40], dtype=torch.int32)
    out = torch.ops.mxrec.hstu_forward_v2(
        q.npu(), k.npu(), v.npu(), None, None, 0, 32, None, 0.0, off.npu(), off.npu(),
        None, None, 0, 1.0,
    )  # fmt: skip
    ref = hstu_forward_v2_reference(q, k, v, max_seq_len=32, seq_offset=off)
    tol = TOL[torch.float16] * ref.abs().max().item()
    torch.testing.assert_close(out.double().cpu(), ref, rtol=0, atol=tol)
    grads = torch.ops.mxrec.hstu_backward_v2(
        grad.npu(), q.npu(), k.npu(), v.npu(), 32, 32, off.npu(), off.npu(), None, None, None,
        0.0, 0, 1.0, -1, 0,
    )  # fmt: skip
    want = hstu_backward_v2_reference(grad, q, k, v, 32, 32, off, off, window_size_right=0)
    for a, b in zip(grads[:3], want[:3], strict=True):
        tol = 5 * TOL[torch.float16] * b.abs().max().item()
        torch.testing.assert_close(a.double().cpu(), b, rtol=0, atol=tol)
    assert grads[3].numel() == 0
    check()


def test_non_contiguous_inputs_match_the_reference() -> None:
    """q / k / v as transposed views and rab expanded over the batch (stride 0)."""
    x = _x()
    q, k, v = (x[n].float().transpose(0, 1).contiguous().transpose(0, 1) for n in ("q", "k", "v"))
    assert not q.is_contiguous()
    rab = x["rab"][:1].float().expand(B, -1, -1, -1)
    kw = _kw({"alpha": 0.5}, x, "npu", torch.float32)
    out = torch.ops.mxrec.hstu_forward_v2(q.npu(), k.npu(), v.npu(), rab=rab.npu(), **kw)
    rkw = _kw({"alpha": 0.5}, x, "cpu", torch.float64)
    ref = hstu_forward_v2_reference(x["q"], x["k"], x["v"], rab=rab.double(), **rkw)
    torch.testing.assert_close(out.double().cpu(), ref, rtol=0, atol=TOL[torch.float32] * 10)
    check()
