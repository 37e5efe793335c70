"""The rab family on npu and CPU against float64 references written from the math
(``conformance/specs/mxrec/rab/rab.py``): values, the bucket index, the top clamp at the last
weight row, the weights' gradient through autograd, and errors that name the op and argument."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.rab.rab import (
    backward_reference,
    buckets_reference,
    pos_reference,
    time_reference,
)
from fbgemm_npu.native._checks import validation_enabled

M = torch.ops.mxrec
DEVICES = ("npu", "cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_pos_matches_the_reference(device: str) -> None:
    s = 5
    bias = torch.randn(2 * s, 2 * s)
    ident = torch.eye(s).repeat_interleave(2, 0).repeat_interleave(2, 1)
    lens = [0, 3, 9, 10, 40]  # 10 and 40: past the table, no row replaced
    out = M.relative_attn_bias_pos(bias.to(device), ident.to(device), lens)
    assert out.device.type == device and out.shape == (5, 10, 10)
    torch.testing.assert_close(out.cpu().double(), pos_reference(bias, ident, lens))
    assert torch.equal(out[3].cpu(), out[4].cpu())
    assert torch.equal(out[1, 9].cpu()[ident[9] == 0], bias[3][ident[9] == 0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tdt", [torch.int32, torch.int64])
def test_time_matches_the_reference_and_returns_its_buckets(device: str, tdt: torch.dtype) -> None:
    t = torch.tensor([[0, 1, 2, 10, 10**6, 2**31 - 1], [-(2**31), 0, 7, 7, 3, 2**30]]).to(tdt)
    w = torch.randn(3, 129)
    rab, bucket = M.relative_attn_bias_time_with_index(t.to(device), w.to(device), 0.301)
    assert rab.shape == (3, 2, 12, 12) and bucket.dtype == torch.int32
    assert torch.equal(bucket.cpu().long(), buckets_reference(t, 129, 0.301))
    torch.testing.assert_close(rab.cpu().double(), time_reference(t, w, 0.301), rtol=0, atol=0)
    plain = M.relative_attn_bias_time(t.to(device), w.to(device), 0.301)
    assert torch.equal(plain.cpu(), rab.cpu())
    # |dt| = 3 * 2**30 (past int32: exact in int64): trunc(log(3 * 2**30) / 0.301) = 72;
    # |dt| = 2**31 - 1: trunc(71.39) = 71
    assert bucket[1, 0, 5].item() == 72 and bucket[0, 0, 5].item() == 71


@pytest.mark.parametrize("device", DEVICES)
def test_time_bucket_is_clamped_at_the_last_weight_row(device: str) -> None:
    t = torch.tensor([[0, 1, 1000, 2**31 - 1]], dtype=torch.int32)
    w = torch.arange(8, dtype=torch.float32).view(2, 4)  # 4 buckets: rows 0..3
    rab, bucket = M.relative_attn_bias_time_with_index(t.to(device), w.to(device), 0.301)
    assert bucket.max().item() == 3
    assert torch.equal(rab[:, 0, 0, 6].cpu(), w[:, 3])  # log(2**31 - 1) / 0.301 = 71 -> 3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_backward_matches_the_reference(device: str, dtype: torch.dtype) -> None:
    g = torch.randn(2, 3, 8, 8).to(dtype)
    k = torch.randint(0, 9, (3, 4, 4), dtype=torch.int32)
    out = M.relative_attn_bias_time_backward(g.to(device), k.to(device), 9)
    assert out.shape == (2, 9) and out.dtype == dtype and out.is_contiguous()
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(out.cpu().double(), backward_reference(g, k, 9), rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_time_gradient_of_the_weights(device: str) -> None:
    t = torch.randint(0, 10**5, (2, 6), dtype=torch.int32)
    w = torch.randn(2, 33)
    grad = torch.randn(2, 2, 12, 12)
    ours = w.clone().to(device).requires_grad_()
    M.relative_attn_bias_time(t.to(device), ours, 0.301).backward(grad.to(device))
    ref = w.double().requires_grad_()
    time_reference(t, ref, 0.301).backward(grad.double())
    torch.testing.assert_close(ours.grad.cpu().double(), ref.grad, rtol=1e-5, atol=1e-5)
    ours2 = w.clone().to(device).requires_grad_()
    rab, bucket = M.relative_attn_bias_time_with_index(t.to(device), ours2, 0.301)
    assert not bucket.requires_grad
    rab.backward(grad.to(device))
    torch.testing.assert_close(ours2.grad, ours.grad)


def test_time_without_grad_records_nothing() -> None:
    w = torch.randn(1, 9, device="npu")
    out = M.relative_attn_bias_time(torch.zeros(1, 2, dtype=torch.int32, device="npu"), w, 0.3)
    assert out.grad_fn is None


ERRORS = [
    (lambda: M.relative_attn_bias_pos(torch.randn(4, 4), torch.eye(4), [-1]), "past_valid_lens"),
    (lambda: M.relative_attn_bias_pos(torch.randn(4, 4), torch.eye(4), []), "past_valid_lens"),
    (lambda: M.relative_attn_bias_pos(torch.randn(3, 3), torch.eye(3), [1]), "rel_pos_bias"),
    (lambda: M.relative_attn_bias_pos(torch.randn(4, 4), torch.eye(2), [1]), "identity"),
    (lambda: M.relative_attn_bias_pos(torch.randn(4, 4).long(), torch.eye(4), [1]), "rel_pos_bias"),
    (lambda: M.relative_attn_bias_time(torch.zeros(2, 3), torch.randn(1, 9), 0.3), "timestamps"),
    (
        lambda: M.relative_attn_bias_time(torch.zeros(2, 3).int(), torch.randn(1, 0), 0.3),
        "timestamps_weights",
    ),
    (
        lambda: M.relative_attn_bias_time(torch.zeros(2, 3).int(), torch.randn(1, 9), 0.0),
        "bucket_divisor",
    ),
    (
        lambda: M.relative_attn_bias_time_with_index(torch.zeros(3).int(), torch.randn(9), 0.3),
        "timestamps",
    ),
    (
        lambda: M.relative_attn_bias_time_backward(
            torch.randn(1, 2, 6, 6), torch.zeros(2, 3, 2).int(), 9
        ),
        "bucket_timestamps",
    ),
    (
        lambda: M.relative_attn_bias_time_backward(
            torch.randn(1, 2, 6, 6), torch.zeros(2, 3, 3).int(), 0
        ),
        "num_buckets",
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("call", "arg"), ERRORS, ids=[e[1] + str(i) for i, e in enumerate(ERRORS)])
def test_errors_name_the_op_and_argument(device: str, call, arg: str) -> None:
    with torch.device(device), pytest.raises(ValueError, match=f"relative_attn_bias.*'?{arg}"):
        call()


@pytest.mark.skipif(not validation_enabled(), reason="FBGEMM_NPU_VALIDATE=0: no data checks")
def test_backward_refuses_buckets_out_of_range_by_its_queued_check() -> None:
    import fbgemm_npu

    g = torch.randn(1, 1, 4, 4, device="npu")
    k = torch.tensor([[[0, 9], [1, -1]]], dtype=torch.int32, device="npu")
    out = M.relative_attn_bias_time_backward(g, k, 9)  # clamped: memory-safe
    assert out.shape == (1, 9)
    with pytest.raises(RuntimeError, match="relative_attn_bias_time_backward.*bucket_timestamps"):
        fbgemm_npu.check()


def test_sizes_that_cannot_be_allocated_name_the_op_and_argument() -> None:
    stamps = torch.zeros(1, 2**20, dtype=torch.int32, device="npu").expand(4, 2**20)
    with pytest.raises(RuntimeError, match="relative_attn_bias_time: .*'timestamps'.*allocated"):
        M.relative_attn_bias_time(stamps, torch.randn(1, 9, device="npu"), 0.3)
    g = torch.randn(1, 1, 2, 2, device="npu")
    k = torch.zeros(1, 1, 1, dtype=torch.int32, device="npu")
    with pytest.raises(RuntimeError, match="time_backward: .*'num_buckets'.*allocated"):
        M.relative_attn_bias_time_backward(g, k, 2**50)
    bias = torch.ones(1, 1, device="npu").expand(2**16, 2**16)
    with pytest.raises(
        RuntimeError, match="relative_attn_bias_pos: .*'past_valid_lens'.*allocated"
    ):
        M.relative_attn_bias_pos(bias, bias, [1] * 2**12)


def test_non_contiguous_inputs_match_the_references() -> None:
    b, i = torch.randn(8, 8), torch.rand(8, 8)
    out = M.relative_attn_bias_pos(b.to("npu").t(), i.to("npu").t(), [1, 5])
    torch.testing.assert_close(out.cpu().double(), pos_reference(b.t(), i.t(), [1, 5]))
    t = torch.randint(0, 1000, (1, 4), dtype=torch.int32).expand(3, 4)
    w = torch.randn(9, 2)
    out = M.relative_attn_bias_time(t.to("npu"), w.to("npu").t(), 0.301)
    torch.testing.assert_close(out.cpu().double(), time_reference(t, w.t(), 0.301))
    g = torch.randn(3, 2, 1, 8, 8).transpose(0, 1)[:, :, 0]
    k = torch.randint(0, 9, (3, 4, 4), dtype=torch.int32).transpose(1, 2)
    out = M.relative_attn_bias_time_backward(g.to("npu"), k.to("npu"), 9)
    torch.testing.assert_close(
        out.cpu().double(), backward_reference(g, k, 9), rtol=1e-5, atol=1e-5
    )
