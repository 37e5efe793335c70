"""Hostile input to the disentangle family: every refusal names the op and the argument (rule
9), on npu and CPU alike: Rec SDK's own checks (ranks, shapes, dtypes), its garbage-returning
``pos_attr_type`` and what it lets through (a NaN scale), non-tensors, mixed devices, sizes that
cannot be allocated; and what we accept beyond its limits (s != 256, b > 100, int32 positions)."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.testing.disentangle_inputs import disentangle_inputs

M = torch.ops.mxrec
FWD, BWD = "disentangle_attention", "disentangle_attention_backward"
NAMES = ("query_layer", "key_layer", "value_layer", "pos_key_layer", "pos_query_layer",
         "relative_pos", "attn_mask")  # fmt: skip


def _raises(fn, op: str, arg: str) -> None:
    with pytest.raises((ValueError, RuntimeError)) as info:
        fn()
    text = str(info.value)
    assert op in text and f"'{arg}'" in text, text


def _ok(device: str = "npu", dtype: torch.dtype = torch.float16) -> list:
    return [t.to(device) for t in disentangle_inputs(2, 2, 4, 8, dtype, seed=0)]


def _fwd(a: list, kind: object = "c2p|p2c", scale: float = 0.2):
    return lambda: M.disentangle_attention(*a, kind, scale)


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_forward_errors_name_the_argument(device: str) -> None:
    a = _ok(device)

    def bad(i: int, t: object) -> list:
        return [t if j == i else x for j, x in enumerate(a)]

    for kind in ("", "c2p|", "p2c|c2p", "C2P", "c2p p2c", "none"):
        _raises(_fwd(a, kind), FWD, "pos_attr_type")
    for scale in (float("nan"), float("inf")):
        _raises(_fwd(a, scale=scale), FWD, "score_scale")
    for i in range(3):  # query / key / value: rank, shape, dtype
        _raises(_fwd(bad(i, a[i][0])), FWD, NAMES[i])
        _raises(_fwd(bad(i, a[i].to(torch.int32))), FWD, NAMES[i])
    _raises(_fwd(bad(1, a[1][:, :, :3])), FWD, "key_layer")
    _raises(_fwd(bad(2, a[2][..., :4])), FWD, "value_layer")
    _raises(_fwd(bad(1, a[1].float())), FWD, "key_layer")
    for i in (3, 4):  # positional tables: (2s, n, d)
        _raises(_fwd(bad(i, a[i][1:])), FWD, NAMES[i])
        _raises(_fwd(bad(i, a[i][:, :1])), FWD, NAMES[i])
        _raises(_fwd(bad(i, a[i][None])), FWD, NAMES[i])
        _raises(_fwd(bad(i, a[i].float())), FWD, NAMES[i])
    rel = a[5]
    for r in (rel[0], rel[None, None, None], rel[:3], rel.expand(2, 4, 4), rel.float(),
              rel.to(torch.int16), rel.bool()):  # fmt: skip
        _raises(_fwd(bad(5, r)), FWD, "relative_pos")
    mask = a[6]
    for m in (mask[0], mask[:1], mask.expand(2, 2, 4, 4), mask[..., :3], mask.float(),
              mask.bool(), mask[:, 0, 0]):  # fmt: skip
        _raises(_fwd(bad(6, m)), FWD, "attn_mask")


def test_the_float64_and_device_rules() -> None:
    """float64 on CPU (gradcheck), not on npu; every tensor on one device."""
    a = _ok("npu", torch.float32)
    _raises(_fwd([t.double() if t.is_floating_point() else t for t in a]), FWD, "query_layer")
    assert M.disentangle_attention(*_ok("cpu", torch.float64), "c2p", 0.2)[0].dtype == torch.float64
    for i in range(1, 7):
        moved = [x.cpu() if j == i else x for j, x in enumerate(a)]
        _raises(_fwd(moved), FWD, NAMES[i])
    _raises(_fwd([x.to("npu:1") if j == 5 else x for j, x in enumerate(a)]), FWD, "relative_pos")


@pytest.mark.parametrize("obj", [None, 3, "q", [1, 2]])
def test_not_a_tensor(obj: object) -> None:
    a = _ok()
    for i in range(7):
        with pytest.raises((ValueError, RuntimeError, TypeError)) as info:
            M.disentangle_attention(*[obj if j == i else x for j, x in enumerate(a)], "c2p", 0.2)
        assert FWD in str(info.value) or "expected" in str(info.value).lower(), info.value


def test_backward_errors_name_the_argument() -> None:
    a = _ok("npu", torch.float32)
    probs = M.disentangle_attention(*a, "c2p", 0.2)[1]
    g = torch.randn(2, 2, 4, 8, device="npu")
    w = torch.randn(2, 2, 4, 4, device="npu")

    def call(*grads, probs=probs, kind="c2p", mask=a[6]):
        return lambda: M.disentangle_attention_backward(*grads, *a[:6], mask, probs, kind, 0.2)

    _raises(call(g, None, None, kind="p2c|"), BWD, "pos_attr_type")
    _raises(call(g[..., :4], None, None), BWD, "grad_attn_output")
    _raises(call(g.half(), None, None), BWD, "grad_attn_output")
    _raises(call(g, w[..., :3], None), BWD, "grad_attn_probs")
    _raises(call(g, None, w.cpu()), BWD, "grad_attn_weights")
    _raises(call(g, None, None, probs=probs[0]), BWD, "attn_probs")
    _raises(call(g, None, None, probs=probs.half()), BWD, "attn_probs")
    _raises(call(g, None, None, mask=a[6][:1]), BWD, "attn_mask")


def test_beyond_rec_sdk_limits() -> None:
    """Rec SDK refuses s != 256 and b > 100; we do not (any length, any batch)."""
    a = [t.to("npu") for t in disentangle_inputs(101, 1, 3, 1, torch.float16, seed=1,
                                                 rel_dtype=torch.int32)]  # fmt: skip
    out = M.disentangle_attention(*a, "c2p|p2c", 0.5)
    assert out[0].shape == (101, 1, 3, 1) and torch.isfinite(out[1]).all()


def test_sizes_that_cannot_be_allocated_are_named() -> None:
    """Expanded (stride 0) inputs of a huge batch: the (b, n, s, 2s) scores cannot exist."""
    a = _ok("cpu", torch.float32)
    big = [t[:1].expand(2**40, *t.shape[1:]) if t.dim() == 4 or j == 6 else t
           for j, t in enumerate(a)]  # fmt: skip
    big[6] = a[6][:1].expand(2**40, 1, 4, 4)
    _raises(_fwd(big), FWD, "query_layer")
