"""The rank1 family on npu and CPU against float64 references written from the formulas
(``conformance/specs/mxrec/rank1/rank1.py``): every dtype, int32 / int64 indices, repeats, an
empty batch, the gradient through autograd, the ``[grad_x, None]`` result, and hostile input
(indices out of range or negative: clamped, then a queued error naming the op and 'index')."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from conformance.specs.mxrec.rank1.rank1 import backward_reference, gather_reference

M = torch.ops.mxrec
DEVICES = ("npu", "cpu")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("idt", [torch.int32, torch.int64])
def test_gather_matches_the_reference(device: str, dtype: torch.dtype, idt: torch.dtype) -> None:
    x = torch.randn(129).to(dtype)
    index = torch.tensor([0, 128, 128, 5, 64, 0], dtype=idt)
    y = M.gather_for_rank1(x.to(device), index.to(device))
    assert y.dtype == dtype and y.shape == (6,) and y.device.type == device
    assert torch.equal(y.cpu().double(), gather_reference(x, index))  # a copy: exact


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_through_autograd(device: str, dtype: torch.dtype) -> None:
    x = torch.randn(33).to(dtype)
    index = torch.randint(0, 33, (200,))
    w = torch.randn(200).to(dtype)
    ours = x.clone().to(device).requires_grad_()
    (M.gather_for_rank1(ours, index.to(device)) * w.to(device)).sum().backward()
    assert ours.grad.dtype == dtype
    want = backward_reference(w.double(), x, index)  # the gradient of sum(y * w)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    scale = backward_reference(w.double().abs(), x, index)
    assert ((ours.grad.cpu().double() - want).abs() <= tol * (1 + scale)).all()


@pytest.mark.parametrize("device", DEVICES)
def test_backward_returns_grad_x_and_none(device: str) -> None:
    grad = torch.randn(4, 5)
    index = torch.randint(0, 7, (4, 5), dtype=torch.int32)
    out = M.index_select_for_rank1_backward(
        grad.to(device), torch.zeros(7).to(device), index.to(device)
    )
    assert isinstance(out, list) and len(out) == 2 and out[1] is None
    torch.testing.assert_close(
        out[0].cpu().double(), backward_reference(grad, torch.zeros(7), index)
    )


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batch(device: str) -> None:
    x = torch.randn(4, device=device, requires_grad=True)
    y = M.gather_for_rank1(x, torch.empty(0, dtype=torch.int64, device=device))
    assert y.shape == (0,)
    y.sum().backward()
    assert torch.equal(x.grad.cpu(), torch.zeros(4))


def test_index_out_of_range_is_memory_safe_and_raises_later() -> None:
    x = torch.randn(8, device="npu")
    for bad in ([0, 8], [-1, 2], [2**31 - 1], [-(2**31)]):
        index = torch.tensor(bad, dtype=torch.int32, device="npu")
        y = M.gather_for_rank1(x, index)  # clamped: no read outside x
        assert y.shape == (len(bad),)
        with pytest.raises(RuntimeError, match=r"gather_for_rank1: argument 'index' .*\[0, 8\)"):
            fbgemm_npu.check()
        g = M.index_select_for_rank1_backward(torch.ones(len(bad), device="npu"), x, index)[0]
        assert g.shape == (8,)
        with pytest.raises(
            RuntimeError,
            match=r"index_select_for_rank1_backward: argument "
            r"'index'",
        ):
            fbgemm_npu.check()


def test_index_out_of_range_on_cpu_raises_at_the_call() -> None:
    with pytest.raises(RuntimeError, match="gather_for_rank1: argument 'index'"):
        M.gather_for_rank1(torch.randn(3), torch.tensor([3]))


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((torch.randn(2, 3), torch.tensor([0])), "argument 'x' must be 1-D"),
        ((torch.randn(3), torch.tensor([[0]])), "argument 'index' must be 1-D"),
        ((torch.randn(0), torch.tensor([0])), "argument 'x' must hold at least one element"),
        ((torch.randn(3).double(), torch.tensor([0])), "argument 'x' must have dtype"),
        ((torch.randn(3), torch.tensor([0.0])), "argument 'index' must have dtype"),
        ((torch.randn(3), torch.tensor([0], dtype=torch.uint8)), "argument 'index' must have"),
    ],
)
def test_gather_errors_name_the_op_and_argument(args: tuple, pattern: str) -> None:
    for device in DEVICES:
        with pytest.raises(ValueError, match=f"mxrec::gather_for_rank1: {pattern}"):
            M.gather_for_rank1(*(a.to(device) for a in args))


def test_gather_errors_for_none_and_two_devices() -> None:
    with pytest.raises(ValueError, match="gather_for_rank1: argument 'index' must be a Tensor"):
        M.gather_for_rank1(torch.randn(3, device="npu"), None)
    with pytest.raises(RuntimeError, match="gather_for_rank1: arguments 'x' .* 'index'"):
        M.gather_for_rank1(torch.randn(3, device="npu"), torch.tensor([0]))


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((torch.randn(3), torch.randn(4), torch.tensor([0, 1])), "argument 'index' must have"),
        ((torch.randn(3).half(), torch.randn(4), torch.tensor([0, 1, 2])), "argument 'grad'"),
        ((torch.randn(3), torch.randn(2, 2), torch.tensor([0, 1, 2])), "argument 'x' must be"),
        ((torch.randn(3), torch.randn(4), torch.tensor([0.0, 1, 2])), "argument 'index'"),
    ],
)
def test_backward_errors_name_the_op_and_argument(args: tuple, pattern: str) -> None:
    with pytest.raises(ValueError, match=f"index_select_for_rank1_backward: {pattern}"):
        M.index_select_for_rank1_backward(*(a.to("npu") for a in args))
