"""``mxrec::hstu_jagged.equal`` and its backward against the float64 reference written from
recsdk-ops.md (conformance/specs/mxrec/hstu/reference.py), on npu and on CPU (the same program):
every mask type, context / targets with group sizes, GQA, D_qk != D_v, bias and alpha, an empty
sequence, several query tiles; gradients of q, k, v, attn_bias through autograd against the
reference's own autograd; argument errors naming the op and the argument."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.hstu.reference import hstu_jagged_reference
from fbgemm_npu.native.mxrec.hstu import _attention

OFF = [0, 3, 3, 8, 12, 16]  # lengths 3, 0, 5, 4, 4
S, NQ, NK, DQK, DV = 6, 4, 2, 8, 16
TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}  # of max |ref| + 1e-3


def _inputs(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    t, b = OFF[-1], len(OFF) - 1
    return {
        "q": torch.randn(t, NQ, DQK, generator=g, dtype=torch.float64),
        "k": torch.randn(t, NK, DQK, generator=g, dtype=torch.float64),
        "v": torch.randn(t, NK, DV, generator=g, dtype=torch.float64),
        "bias": torch.randn(b, NQ, S, S, generator=g, dtype=torch.float64),
        "mask": (torch.rand(b, NQ, S, S, generator=g) > 0.3).double(),
        "w": torch.randn(t, NQ, DV, generator=g, dtype=torch.float64),
    }


CONFIGS = {
    "causal": {"mask_type": 0},
    "none": {"mask_type": 2},
    "custom": {"mask_type": 3, "mask": "mask"},
    "ctx_targets_g1": {
        "num_context": [1, 0, 2, 0, 1],
        "num_target": [1, 0, 2, 3, 0],
        "target_group_size": 1,
    },
    "ctx_targets_g2": {
        "num_context": [0, 0, 1, 1, 2],
        "num_target": [2, 0, 3, 2, 1],  # n_c + n_t below each length (the rule)
        "target_group_size": 2,
    },
    "targets_g0": {"num_target": [2, 0, 3, 3, 2], "target_group_size": 0},
    "bias_alpha_scale": {"attn_bias": "bias", "alpha": 0.5, "silu_scale": 0.25},
}


def _kwargs(cfg: dict, x: dict, device: str, dtype: torch.dtype) -> dict:
    out = {}
    for name, value in cfg.items():
        if isinstance(value, str):
            out[name] = x[value].to(device, dtype)
        elif isinstance(value, list):
            out[name] = torch.tensor(value, device=device)
        else:
            out[name] = value
    return out


@pytest.fixture(params=[None, 2 * 5 * NQ * S], ids=["one_tile", "three_tiles"])
def tiles(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param is not None:
        monkeypatch.setattr(_attention, "TILE_ELEMENTS", 5 * NQ * S * 2)  # 2 rows per tile


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_forward_and_backward_match_the_float64_reference(
    name: str, dtype: torch.dtype, device: str, tiles: None
) -> None:
    x, cfg = _inputs(), CONFIGS[name]
    off = torch.tensor(OFF)
    ref_in = [x[n].clone().requires_grad_() for n in ("q", "k", "v", "bias")]
    ref_kw = _kwargs(cfg, x, "cpu", torch.float64)
    ref_kw["attn_bias"] = ref_in[3] if "attn_bias" in cfg else None
    ref = hstu_jagged_reference(*ref_in[:3], off, max_seq_len=S, **ref_kw)
    (ref * x["w"]).sum().backward()

    ours_in = [x[n].to(device, dtype).requires_grad_() for n in ("q", "k", "v", "bias")]
    kw = _kwargs(cfg, x, device, dtype)
    if "attn_bias" in cfg:
        kw["attn_bias"] = ours_in[3]
    out = torch.ops.mxrec.hstu_jagged(*ours_in[:3], max_seq_len=S, seq_offset=off.to(device), **kw)
    assert out.shape == (OFF[-1], NQ, DV) and out.dtype == dtype and out.device.type == device
    tol = TOL[dtype] * (ref.abs().max().item() + 1e-3)
    torch.testing.assert_close(out.double().cpu(), ref.detach(), rtol=0, atol=tol)
    (out.double() * x["w"].to(device)).sum().backward()
    grads = ours_in if "attn_bias" in cfg else ours_in[:3]
    for ours, theirs in zip(grads, ref_in, strict=False):
        scale = theirs.grad.abs().max().item() + 1e-3
        torch.testing.assert_close(
            ours.grad.double().cpu(), theirs.grad, rtol=0, atol=5 * TOL[dtype] * scale
        )
    if "attn_bias" not in cfg:
        assert ours_in[3].grad is None


def test_max_seq_len_zero_reads_the_longest_sequence() -> None:
    x = _inputs(1)
    off = torch.tensor(OFF)
    ref = hstu_jagged_reference(x["q"], x["k"], x["v"], off)  # S = 5, scale 1/5
    out = torch.ops.mxrec.hstu_jagged(
        x["q"].float().npu(), x["k"].float().npu(), x["v"].float().npu(), seq_offset=off.npu()
    )
    torch.testing.assert_close(out.double().cpu(), ref, rtol=0, atol=1e-5)


def test_inference_call_goes_below_autograd_and_has_no_grad_fn() -> None:
    x = _inputs(2)
    out = torch.ops.mxrec.hstu_jagged(
        x["q"].float().npu(), x["k"].float().npu(), x["v"].float().npu(), max_seq_len=S,
        seq_offset=torch.tensor(OFF).npu(),
    )  # fmt: skip
    assert out.grad_fn is None


def _call(**over: object) -> None:
    x = _inputs(3)
    args = {"q": x["q"].float(), "k": x["k"].float(), "v": x["v"].float(), "max_seq_len": S,
            "seq_offset": torch.tensor(OFF)}  # fmt: skip
    args.update(over)
    torch.ops.mxrec.hstu_jagged(
        **{n: (a.npu() if isinstance(a, torch.Tensor) else a) for n, a in args.items()}
    )


@pytest.mark.parametrize(
    ("over", "arg"),
    [
        ({"q": torch.zeros(16, NQ)}, "q"),
        ({"k": torch.zeros(16, 3, DQK)}, "k"),
        ({"v": torch.zeros(16, 3, DV)}, "k"),
        ({"k": torch.zeros(16, NK, DQK + 1)}, "k"),
        ({"q": torch.zeros(16, NQ, DQK, dtype=torch.float64)}, "q"),
        ({"k": torch.zeros(16, NK, DQK, dtype=torch.float16)}, "dtype"),
        ({"k": torch.zeros(15, NK, DQK)}, "k"),
        ({"seq_offset": torch.tensor([0])}, "seq_offset"),
        ({"seq_offset": torch.tensor([0.0, 16.0])}, "seq_offset"),
        ({"seq_offset": None}, "seq_offset"),
        ({"mask_type": 1}, "mask_type"),
        ({"mask_type": 5}, "mask_type"),
        ({"mask_type": 3}, "mask"),
        ({"mask_type": 3, "mask": torch.ones(5, NQ, S, S - 1)}, "mask"),
        ({"attn_bias": torch.ones(5, NQ + 1, S, S)}, "attn_bias"),
        ({"attn_bias": torch.ones(5, NQ, S, S, dtype=torch.float16)}, "attn_bias"),
        ({"num_context": torch.zeros(4, dtype=torch.int64)}, "num_context"),
        ({"num_target": torch.zeros(5)}, "num_target"),
        ({"max_seq_len": -1}, "max_seq_len"),
        ({"target_group_size": -1}, "target_group_size"),
    ],
)
def test_argument_errors_name_the_op_and_argument(over: dict, arg: str) -> None:
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_jagged.*{arg}"):
        _call(**over)


@pytest.mark.parametrize(
    ("over", "arg"),
    [
        ({"seq_offset": torch.tensor([0, 3, 3, 8, 12, 15])}, "seq_offset"),  # ends before T
        ({"seq_offset": torch.tensor([1, 3, 3, 8, 12, 16])}, "seq_offset"),  # starts at 1
        ({"seq_offset": torch.tensor([0, 8, 3, 9, 12, 16])}, "seq_offset"),  # decreasing
        ({"max_seq_len": 4}, "max_seq_len"),  # a sequence of 5
        ({"num_target": torch.tensor([0, 0, -1, 0, 0])}, "num_target"),
    ],
)
def test_bad_data_raises_naming_the_argument(over: dict, arg: str) -> None:
    from fbgemm_npu.native._pending import check

    check()  # nothing queued by a valid call fails
    _call()
    check()
    with pytest.raises((ValueError, RuntimeError), match=rf"hstu_jagged.*{arg}"):
        _call(**over)
        check()


def test_backward_rejects_a_grad_of_the_wrong_shape() -> None:
    x = _inputs(4)
    with pytest.raises(ValueError, match="hstu_jagged_backward.*grad"):
        torch.ops.mxrec.hstu_jagged_backward(
            torch.zeros(16, NQ, DQK), x["q"].float(), x["k"].float(), x["v"].float(),
            max_seq_len=S, seq_offset=torch.tensor(OFF),
        )  # fmt: skip
