"""``mxrec::hstu_jagged.delta`` and its backward against the float64 reference
(conformance/specs/mxrec/hstu/reference.py: q aligned to the end of k), on npu and CPU: mask
types, context / targets, bias and alpha, GQA, an empty q sequence, several tiles; gradients of
q, k, v, attn_bias through autograd; argument and data errors; the budget per tile."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu.reference import hstu_delta_reference
from fbgemm_npu.native._pending import check
from fbgemm_npu.native.mxrec.hstu import _attention
from fbgemm_npu.testing.budgets import assert_op_budget

OFF_Q, OFF_K = [0, 2, 2, 5, 6], [0, 4, 5, 8, 12]  # q lengths 2, 0, 3, 1 of k lengths 4, 1, 3, 4
SQ, SK, NQ, NK, D, DV = 3, 4, 4, 2, 8, 5
TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
CONFIGS = {
    "causal": {},
    "none": {"mask_type": 2},
    "custom": {"mask_type": 3, "mask": True},
    "ctx_targets": {
        "num_context": [1, 0, 1, 1],  # n_c + n_t below each k length (4, 1, 3, 4)
        "num_target": [2, 0, 1, 2],
        "target_group_size": 1,
    },
    "bias_alpha": {"attn_bias": True, "alpha": 0.5, "silu_scale": 0.2},
}


def _x() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    return {
        "q": torch.randn(OFF_Q[-1], NQ, D, generator=g, dtype=torch.float64),
        "k": torch.randn(OFF_K[-1], NK, D, generator=g, dtype=torch.float64),
        "v": torch.randn(OFF_K[-1], NK, DV, generator=g, dtype=torch.float64),
        "attn_bias": torch.randn(4, NQ, SQ, SK, generator=g, dtype=torch.float64),
        "mask": (torch.rand(4, NQ, SQ, SK, generator=g) > 0.3).double(),
        "w": torch.randn(OFF_Q[-1], NQ, DV, generator=g, dtype=torch.float64),
    }


def _kw(cfg: dict, x: dict, device: str, dtype: torch.dtype) -> dict:
    kw = {"max_seq_len": SQ, "max_seq_len_k": SK}
    kw["seq_offset"], kw["seq_offset_k"] = (
        torch.tensor(OFF_Q, device=device),
        torch.tensor(OFF_K, device=device),
    )
    for n, val in cfg.items():
        kw[n] = (
            x[n].to(device, dtype)
            if val is True
            else torch.tensor(val, device=device)
            if isinstance(val, list)
            else val
        )
    return kw


@pytest.mark.parametrize("rows", [None, 1], ids=["one_tile", "three_tiles"])
@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_the_float64_reference(name, dtype, device, rows, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if rows is not None:
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", 4 * NQ * SK * rows)
    x, cfg = _x(), CONFIGS[name]
    ref_in = [x[n].clone().requires_grad_() for n in ("q", "k", "v", "attn_bias")]
    rkw = _kw(cfg, x, "cpu", torch.float64)
    if "attn_bias" in cfg:
        rkw["attn_bias"] = ref_in[3]
    ref = hstu_delta_reference(*ref_in[:3], **rkw)
    (ref * x["w"]).sum().backward()
    ours = [x[n].to(device, dtype).requires_grad_() for n in ("q", "k", "v", "attn_bias")]
    kw = _kw(cfg, x, device, dtype)
    if "attn_bias" in cfg:
        kw["attn_bias"] = ours[3]
    out = torch.ops.mxrec.hstu_jagged(*ours[:3], **kw)  # resolves to .delta (seq_offset_k)
    tol = TOL[dtype] * (ref.abs().max().item() + 1e-3)
    torch.testing.assert_close(out.double().cpu(), ref.detach(), rtol=0, atol=tol)
    (out.double() * x["w"].to(device)).sum().backward()
    for a, b in zip(ours if "attn_bias" in cfg else ours[:3], ref_in, strict=False):
        scale = b.grad.abs().max().item() + 1e-3
        torch.testing.assert_close(
            a.grad.double().cpu(), b.grad, rtol=0, atol=5 * TOL[dtype] * scale
        )


def _call(**over: object) -> None:
    x = _x()
    kw = _kw({}, x, "npu", torch.float32)
    kw.update({n: (a.npu() if isinstance(a, torch.Tensor) else a) for n, a in over.items()})
    torch.ops.mxrec.hstu_jagged.delta(
        x["q"].float().npu(), x["k"].float().npu(), x["v"].float().npu(), **kw
    )


@pytest.mark.parametrize(
    ("over", "arg"),
    [
        ({"seq_offset_k": None}, "seq_offset_k"),
        ({"seq_offset_k": torch.tensor([0, 12])}, "seq_offset_k"),
        ({"mask_type": 1}, "mask_type"),
        ({"attn_bias": torch.zeros(4, NQ, SQ, SQ)}, "attn_bias"),
        ({"max_seq_len_k": -1}, "max_seq_len_k"),
    ],
)
def test_argument_errors_name_the_op_and_argument(over: dict, arg: str) -> None:
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_jagged.*{arg}"):
        _call(**over)


@pytest.mark.parametrize(
    ("over", "what"),
    [
        ({"seq_offset_k": torch.tensor([0, 4, 5, 8, 11])}, "seq_offset_k"),  # ends before T_k
        ({"seq_offset_k": torch.tensor([0, 1, 5, 8, 12])}, "q length"),  # L_q 2 > L_k 1
        ({"max_seq_len_k": 3}, "max_seq_len"),  # a k sequence of 4
    ],
)
def test_bad_data_raises(over: dict, what: str) -> None:
    check()
    _call()
    check()
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_jagged.*{what}"):
        _call(**over)
        check()


@pytest.mark.parametrize("op", ["mxrec::hstu_jagged.delta", "mxrec::hstu_jagged_backward.delta"])
@pytest.mark.parametrize("path", [None, "context_targets"])
@pytest.mark.parametrize("tiles", [1, 3])
def test_budget_per_tile(op: str, path: str | None, tiles: int, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_attention, "TILE_ELEMENTS", 4 * NQ * SK * (SQ // tiles))
    x = _x()
    kw = _kw(CONFIGS["ctx_targets"] if path else {}, x, "npu", torch.float16)
    kw["attn_bias"], kw["alpha"] = x["attn_bias"].to("npu", torch.float16), 0.5
    q, k, v, w = (x[n].to("npu", torch.float16) for n in ("q", "k", "v", "w"))
    if op.startswith("mxrec::hstu_jagged.delta"):
        fn = lambda: torch.ops.mxrec.hstu_jagged.delta(q, k, v, **kw)  # noqa: E731
    else:
        fn = lambda: torch.ops.mxrec.hstu_jagged_backward.delta(w, q, k, v, **kw)  # noqa: E731
    fn()  # warm
    c = assert_op_budget(fn, op, path=path, units=tiles)
    assert c.ai_cpu == 0 and c.syncs == 0
