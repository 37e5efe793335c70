"""The sequence family on npu and CPU against references written from the formulas
(``conformance/specs/mxrec/sequence/sequence.py``): every dtype (int32 / int64 values
included), slices to the row's end (-1), lengths 0 and S, empty batches, reverse_sequence's
self-inverse gradient through autograd, Rec SDK's argument errors, and hostile lengths (clamped,
then a queued error naming the op and 'seq_lengths')."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu
from conformance.specs.mxrec.sequence.sequence import multislice_reference, reverse_reference

M = torch.ops.mxrec
DEVICES = ("npu", "cpu")
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_multislice_matches_the_reference(device: str, dtype: torch.dtype) -> None:
    x = (torch.randn(5, 16) * 100).to(dtype)
    args = (3, [2, 1, 3, 99], [0, 10, 3, 15, 0, 8], [3, -1, 13, 1, 16, 2])
    outs = M.multislice_concat(x.to(device), *args)
    want = multislice_reference(x, *args)
    assert [tuple(o.shape) for o in outs] == [(5, 9), (5, 13), (5, 19)]
    for o, w in zip(outs, want, strict=True):
        assert o.dtype == dtype and o.device.type == device
        assert torch.equal(o.cpu().to(w.dtype), w)
    assert outs[0].data_ptr() != outs[1].data_ptr()  # fresh tensors, no shared buffer


@pytest.mark.parametrize("device", DEVICES)
def test_multislice_empty_batch(device: str) -> None:
    outs = M.multislice_concat(torch.empty(0, 4, device=device), 1, [2], [0, 1], [1, -1])
    assert [tuple(o.shape) for o in outs] == [(0, 4)]


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((torch.randn(2, 3, 4), 1, [1], [0], [1]), "argument 'input' must be 2-D"),
        ((torch.randn(2, 4).double(), 1, [1], [0], [1]), "argument 'input' must have dtype"),
        ((torch.randn(2, 4), 0, [1], [0], [1]), "argument 'concat_num' must be >= 1"),
        ((torch.randn(2, 4), 2, [1], [0], [1]), "argument 'concat_size' must have at least"),
        ((torch.randn(2, 4), 1, [0], [0], [1]), "argument 'concat_size' must hold sizes >= 1"),
        ((torch.randn(2, 4), 1, [2], [0], [1, 1]), "argument 'slice_begin' must have one"),
        ((torch.randn(2, 4), 1, [1], [0], []), "argument 'slice_length' must have one"),
        ((torch.randn(2, 4), 1, [1], [4], [1]), r"argument 'slice_begin' must hold columns"),
        ((torch.randn(2, 4), 1, [1], [-1], [1]), r"argument 'slice_begin' must hold columns"),
        ((torch.randn(2, 4), 1, [1], [1], [4]), r"argument 'slice_length' must hold lengths"),
        ((torch.randn(2, 4), 1, [1], [1], [0]), r"argument 'slice_length' must hold lengths"),
        ((torch.randn(2, 0), 1, [1], [0], [-1]), r"argument 'slice_begin' must hold columns"),
    ],
)
def test_multislice_errors_name_the_op_and_argument(args: tuple, pattern: str) -> None:
    for device in DEVICES:
        with pytest.raises(ValueError, match=f"mxrec::multislice_concat: {pattern}"):
            M.multislice_concat(args[0].to(device), *args[1:])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ldt", [torch.int32, torch.int64])
def test_reverse_matches_the_reference(device: str, dtype: torch.dtype, ldt: torch.dtype) -> None:
    x = (torch.randn(4, 6, 15) * 100).to(dtype)  # D = 15: no multiple-of-16 requirement
    lens = torch.tensor([0, 6, 1, 4], dtype=ldt)
    out = M.reverse_sequence(x.to(device), lens.to(device))
    assert out.dtype == dtype and out.shape == x.shape
    assert torch.equal(out.cpu(), reverse_reference(x, lens).to(dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16))
def test_reverse_gradient_is_the_reversed_gradient(device: str, dtype: torch.dtype) -> None:
    x = torch.randn(3, 5, 4).to(dtype)
    lens = torch.tensor([5, 2, 0])
    grad = torch.randn(3, 5, 4).to(dtype)
    ours = x.clone().to(device).requires_grad_()
    M.reverse_sequence(ours, lens.to(device)).backward(grad.to(device))
    ref = x.double().requires_grad_()
    reverse_reference(ref, lens).backward(grad.double())
    assert torch.equal(ours.grad.cpu().double(), ref.grad)  # a permutation: exact


@pytest.mark.parametrize("device", DEVICES)
def test_reverse_empty_shapes(device: str) -> None:
    for shape in ((0, 3, 2), (2, 0, 2), (2, 3, 0)):
        lens = torch.zeros(shape[0], dtype=torch.int64, device=device)
        x = torch.randn(shape, device=device)
        assert M.reverse_sequence(x, lens).shape == shape


def test_reverse_non_contiguous_input() -> None:
    x = torch.randn(5, 3, 4)
    lens = torch.tensor([3, 1, 2, 0, 3])
    t = x.transpose(0, 1).contiguous().transpose(0, 1)
    out = M.reverse_sequence(t.to("npu").transpose(0, 1).contiguous().transpose(0, 1), lens.npu())
    assert torch.equal(out.cpu(), reverse_reference(x, lens).float())


def test_reverse_lengths_out_of_range_are_memory_safe_and_raise_later() -> None:
    x = torch.randn(2, 4, 3, device="npu")
    for bad in ([5, 1], [-1, 2], [2**31 - 1, 0], [-(2**31), 0]):
        out = M.reverse_sequence(x, torch.tensor(bad, dtype=torch.int32, device="npu"))
        assert out.shape == x.shape
        with pytest.raises(RuntimeError, match=r"reverse_sequence: argument 'seq_lengths' .*4\]"):
            fbgemm_npu.check()
    with pytest.raises(RuntimeError, match="reverse_sequence: argument 'seq_lengths'"):
        M.reverse_sequence(torch.randn(1, 2, 1), torch.tensor([3]))  # CPU: at the call


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((torch.randn(2, 3), torch.tensor([1, 1])), "argument 'input' must be 3-D"),
        ((torch.randn(2, 3, 1).double(), torch.tensor([1, 1])), "argument 'input' must have"),
        (
            (torch.randn(2, 3, 1), torch.tensor([1, 1], dtype=torch.int8)),
            "argument 'seq_lengths' must",
        ),
        ((torch.randn(2, 3, 1), torch.tensor([1.0, 1.0])), "argument 'seq_lengths' must have"),
        ((torch.randn(2, 3, 1), torch.tensor([1])), "argument 'seq_lengths' must hold one"),
        ((torch.randn(2, 3, 1), torch.tensor([[1, 1]])), "argument 'seq_lengths' must be 1-D"),
    ],
)
def test_reverse_errors_name_the_op_and_argument(args: tuple, pattern: str) -> None:
    for device in DEVICES:
        with pytest.raises(ValueError, match=f"mxrec::reverse_sequence: {pattern}"):
            M.reverse_sequence(*(a.to(device) for a in args))
    with pytest.raises(RuntimeError, match="reverse_sequence: arguments 'input' .* 'seq_lengths'"):
        M.reverse_sequence(torch.randn(1, 2, 1, device="npu"), torch.tensor([1]))
