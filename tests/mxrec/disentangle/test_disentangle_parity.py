"""``mxrec::disentangle_attention`` against the float64 reference written from Rec SDK's golden
(``conformance/specs/mxrec/disentangle/reference.py``), on npu and CPU: every dtype with its
stated tolerance (float16 Rec SDK's own 1e-3 / 1e-3), each pos_attr_type, s in {1, 7, 256}
(Rec SDK's only length is 256), masks of 0 / -65504 in both ranks, every relative_pos rank,
int32 positions, DeBERTa's log buckets, positions out of range (clamped), strided inputs, the
Meta kernel; and the documented difference from HuggingFace DeBERTa-v2's convention."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.disentangle.reference import forward_reference, hf_deberta_v2_bias
from fbgemm_npu.testing.disentangle_inputs import MASKED, disentangle_inputs, score_scale

M = torch.ops.mxrec
TYPES = ("c2p", "p2c", "c2p|p2c")
TOL = {torch.float32: 2e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}  # rtol = atol


def _check(ours, ref, tol: float) -> None:
    for o, r in zip(ours, ref, strict=True):
        torch.testing.assert_close(o.cpu().double(), r, rtol=tol, atol=tol)


def _run(a: list[torch.Tensor], kind: str, device: str, scale: float | None = None):
    d = a[0].size(-1)
    c = score_scale(kind, d) if scale is None else scale
    return M.disentangle_attention(*(t.to(device) for t in a), kind, c), forward_reference(
        *a, kind, c
    )


@pytest.mark.parametrize("device", ["npu", "cpu"])
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("kind", TYPES)
@pytest.mark.parametrize("s", [1, 7, 256])
def test_matches_the_reference(device: str, dtype: torch.dtype, kind: str, s: int) -> None:
    b, n, d = (1, 1, 16) if s == 256 else (2, 3, 8)
    a = disentangle_inputs(b, n, s, d, dtype, seed=s, mask_dims=3 + s % 2)
    assert s == 1 or (a[6] == MASKED).any()
    ours, ref = _run(a, kind, device)
    assert [o.dtype for o in ours] == [dtype] * 3 and all(o.device.type == device for o in ours)
    assert ours[0].shape == (b, n, s, d) and ours[1].shape == ours[2].shape == (b, n, s, s)
    _check(ours, ref, TOL[dtype])


@pytest.mark.parametrize("rel_dims", [2, 3, 4])
@pytest.mark.parametrize("rel_dtype", [torch.int64, torch.int32], ids=str)
def test_relative_pos_ranks_dtypes_and_buckets(rel_dims: int, rel_dtype: torch.dtype) -> None:
    a = disentangle_inputs(2, 2, 9, 4, torch.float32, seed=1, rel_dims=rel_dims,
                           rel_dtype=rel_dtype, buckets=(4, 16))  # fmt: skip
    assert a[5].shape == (1,) * (rel_dims - 2) + (9, 9) and a[5].dtype == rel_dtype
    _check(*_run(a, "c2p|p2c", "npu"), TOL[torch.float32])


def test_positions_out_of_range_are_clamped() -> None:
    """Rec SDK's clamp(rel + s - 1, 0, 2s - 1): any int64 position reads a column in range."""
    a = disentangle_inputs(2, 2, 6, 4, torch.float32, seed=2)
    extremes = (-(2**63), 2**63 - 1, -(2**62), 2**62)  # no wrap in rel + s - 1
    for rel in (a[5] * 10**6, *(torch.full_like(a[5], v) for v in extremes)):
        a[5] = rel
        _check(*_run(a, "c2p|p2c", "npu"), TOL[torch.float32])
    # every position past the top reads column 2s - 1: c2p[i, j] = Q_i . P_k[2s - 1]
    out = M.disentangle_attention(*(t.to("npu") for t in a), "c2p", 1.0)[2].cpu().double()
    q, k, pk = a[0].double(), a[1].double(), a[3].double()
    top = torch.einsum("bhie,he->bhi", q, pk[-1])[..., None]
    expected = q @ k.transpose(-1, -2) + top + a[6].double()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_strided_and_expanded_inputs() -> None:
    a = disentangle_inputs(2, 3, 5, 4, torch.float32, seed=3)
    views = [torch.cat([t, t], -1)[..., ::2] if t.dim() == 4 else t for t in a[:3]]
    views += [a[3].transpose(0, 1).contiguous().transpose(0, 1), a[4]]
    rel = a[5].t().contiguous().t()
    mask = a[6][:1].expand(2, 1, 5, 5)
    dev = [t.to("npu") for t in (*views, rel)] + [a[6][:1].to("npu").expand(2, 1, 5, 5)]
    ours = M.disentangle_attention(*dev, "c2p|p2c", 0.4)
    _check(ours, forward_reference(*views, rel, mask, "c2p|p2c", 0.4), TOL[torch.float32])


def test_fully_masked_rows() -> None:
    """float32 keeps -65504 + x on a 2**-8 grid: a fully masked row is softmax(c QK^T + bias)
    as in float64 to ~1e-2 (the other rows to float32's tolerance).  float16 rounds every
    weight of such a row to -65504 (Rec SDK's kernel computes in float16 too): its
    probabilities are uniform (documented in attention.py)."""
    a = disentangle_inputs(1, 2, 4, 4, torch.float32, seed=4)
    a[6][..., 1, :] = MASKED
    (out, probs, w), (r_out, r_probs, r_w) = _run(a, "c2p|p2c", "npu")
    rows = [0, 2, 3]
    _check([out[..., rows, :], probs[..., rows, :]], [r_out[..., rows, :], r_probs[..., rows, :]],
           TOL[torch.float32])  # fmt: skip
    torch.testing.assert_close(probs.cpu().double(), r_probs, rtol=0, atol=1e-2)
    torch.testing.assert_close(w.cpu().double(), r_w, rtol=1e-6, atol=1e-2)
    h = [t.half() if t.is_floating_point() else t for t in a]
    probs = M.disentangle_attention(*(t.to("npu") for t in h), "c2p|p2c", 0.2)[1].cpu()
    torch.testing.assert_close(probs[..., 1, :].float(), torch.full((1, 2, 4), 0.25))


@pytest.mark.parametrize("kind", TYPES)
def test_empty_sizes(kind: str) -> None:
    for b, n, s, d in ((0, 2, 3, 4), (2, 0, 3, 4), (2, 2, 0, 4), (2, 2, 3, 0)):
        a = disentangle_inputs(b, n, s, d, torch.float32, seed=5)
        ours, ref = _run(a, kind, "npu", 0.5)
        assert [tuple(o.shape) for o in ours] == [tuple(r.shape) for r in ref]
        _check(ours, ref, TOL[torch.float32])


def test_meta_shapes() -> None:
    a = [t.to("meta") for t in disentangle_inputs(2, 3, 5, 4, torch.float16, seed=6)]
    out = M.disentangle_attention(*a, "c2p|p2c", 0.3)
    assert [tuple(o.shape) for o in out] == [(2, 3, 5, 4), (2, 3, 5, 5), (2, 3, 5, 5)]
    assert all(o.dtype == torch.float16 and o.device.type == "meta" for o in out)
    with pytest.raises(ValueError, match="pos_attr_type"):
        M.disentangle_attention(*a, "p2c|c2p", 0.3)


@pytest.mark.parametrize("kind", ["c2p", "p2c"])
def test_differs_from_huggingface_as_documented(kind: str) -> None:
    """HF DeBERTa-v2 with att_span == s: its c2p is this op on relative_pos + 1, its p2c this
    op on 1 - relative_pos (HF negates the position and offsets by att_span, not s - 1); the op
    on HF's own table gives another result."""
    s, d = 6, 4
    a = disentangle_inputs(2, 2, s, d, torch.float32, seed=7)
    q, k, _, pk, pq, rel, mask = a
    hf = hf_deberta_v2_bias(q, k, pk, pq, rel, kind, att_span=s)
    qk = q.double() @ k.double().transpose(-1, -2)
    c = score_scale(kind, d)  # HF's 1 / sqrt(d * (1 + #types)): the same scale
    expected = c * (qk + hf) + mask.double()
    shifted = rel + 1 if kind == "c2p" else 1 - rel
    for table, same in ((shifted, True), (rel, False)):
        a[5] = table
        w = M.disentangle_attention(*(t.to("npu") for t in a), kind, c)[2].cpu().double()
        assert torch.allclose(w, expected, rtol=1e-5, atol=1e-5) is same
