"""The sll_attention ops on npu against upstream's CPU kernels (values and gradients) on the
edges the conformance strategies draw rarely: empty batches and rows, ``max_seq_len`` of 0 and
below, int32 offsets, transposed / sliced inputs, the half types; and the multi-head attention
(no CPU kernel upstream) against the float64 reference of its Triton math."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import fbgemm_npu
from conformance.specs.fbgemm.sll_attention.reference import multi_head_reference

F = torch.ops.fbgemm
NPU = "npu"
TOL = {
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-9),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


def _off(
    lengths: list[int], squares: bool = False, dtype: torch.dtype = torch.int64
) -> torch.Tensor:
    out = [0]
    for n in lengths:
        out.append(out[-1] + (n * n if squares else n))
    return torch.tensor(out, dtype=dtype)


def _compare(
    op: Callable[..., torch.Tensor],
    args: list[Any],
    grads: tuple[int, ...],
    ref: Callable[..., torch.Tensor] | None = None,
) -> None:
    """ours(npu) == upstream(cpu) (or ``ref`` in float64), then the gradients of
    ``sum(out * w)`` for the inputs at ``grads``."""
    dtype = args[0].dtype  # the data: q, x or values
    rtol, atol = TOL.get(dtype, (0.0, 0.0))
    cpu = [
        a.detach().clone().requires_grad_(i in grads) if isinstance(a, torch.Tensor) else a
        for i, a in enumerate(args)
    ]
    if ref is not None:
        cpu = [
            a.detach().double().requires_grad_(i in grads)
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
            for i, a in enumerate(cpu)
        ]
    dev = [
        a.detach().to(NPU).requires_grad_(i in grads) if isinstance(a, torch.Tensor) else a
        for i, a in enumerate(args)
    ]
    want = (ref or op)(*cpu)
    got = op(*dev)
    fbgemm_npu.check()
    assert got.shape == want.shape and got.dtype == dtype
    torch.testing.assert_close(got.cpu().double(), want.double(), rtol=rtol, atol=atol)
    if not grads:
        return
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    (want * w.to(want.dtype)).sum().backward()
    (got * w.to(dtype).to(NPU)).sum().backward()
    for i in grads:
        expected = cpu[i].grad if cpu[i].grad is not None else torch.zeros_like(cpu[i])
        torch.testing.assert_close(
            dev[i].grad.cpu().double(), expected.double(), rtol=rtol, atol=atol
        )


def _r(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("lengths", [[2, 0, 3, 1], [], [0, 0], [5]])
def test_jagged_softmax(dtype: torch.dtype, lengths: list[int]) -> None:
    o = _off(lengths, dtype=torch.int32)
    _compare(F.sll_jagged_softmax, [_r(int(o[-1]), 3, dtype=dtype), o, 5], (0,))


def test_jagged_softmax_transposed_input_and_no_rows_read() -> None:
    o = _off([2, 3])
    _compare(F.sll_jagged_softmax, [_r(4, 5).t(), o, 3], (0,))
    got = F.sll_jagged_softmax(_r(5, 4).to(NPU), o.to(NPU), 0)  # max_seq_len 0 reads nothing
    assert (got.cpu() == 0).all()


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_jagged2_softmax(transpose: bool, dtype: torch.dtype) -> None:
    lengths = [2, 0, 3, 1]
    ot = _off(lengths, squares=True)
    x = _r(2 * int(ot[-1]) + 1, dtype=dtype)[1::2]  # sliced
    _compare(F.sll_jagged2_softmax, [x, _off(lengths), ot, 4, transpose], (0,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int64])
def test_jagged2_to_padded_dense(dtype: torch.dtype) -> None:
    ot = _off([2, 0, 3, 1], squares=True, dtype=torch.int32)
    values = (_r(int(ot[-1]) + 2) * 10).to(dtype)  # a tail past the last offset
    grads = (0,) if dtype.is_floating_point else ()
    _compare(F.sll_jagged2_to_padded_dense, [values, ot, 4, -2.5], grads)
    empty = F.sll_jagged2_to_padded_dense(values.to(NPU), ot[:1].to(NPU), 3, 1.0)
    assert empty.shape == (0, 3, 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("bias_rows", [0, 2, 5])
def test_dense_flash_attention(dtype: torch.dtype, bias_rows: int) -> None:
    o = _off([2, 0, 3])
    args = [_r(5, 4, dtype=dtype), _r(3, 4, 6, dtype=dtype, seed=1), _r(5, 2, dtype=dtype, seed=2)]
    args += [_r(3, bias_rows, 6, dtype=dtype, seed=3), o, 3]
    _compare(F.sll_jagged_dense_flash_attention, args, (0, 1, 2, 3))


def test_dense_flash_attention_empty_batch() -> None:
    o = _off([])
    args = [_r(0, 4), _r(0, 4, 3), _r(0, 2), _r(0, 2, 3), o, 3]
    _compare(F.sll_jagged_dense_flash_attention, args, ())


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_flash_attention_basic(use_mask: bool, dtype: torch.dtype) -> None:
    o = _off([2, 0, 4, 1], dtype=torch.int32)
    args = [_r(7, 3, dtype=dtype), _r(7, 3, dtype=dtype, seed=1), _r(7, 5, dtype=dtype, seed=2)]
    _compare(F.sll_jagged_flash_attention_basic, [*args, o, 4, use_mask], (0, 1, 2))


@pytest.mark.parametrize("max_seq_len", [0, 2, 6])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_multi_head_against_the_reference(max_seq_len: int, dtype: torch.dtype) -> None:
    o = _off([2, 0, 4, 1])
    args = [_r(3, 8, 4, dtype=dtype, seed=s) for s in range(3)]  # a row past the last offset
    _compare(
        F.sll_multi_head_jagged_flash_attention,
        [*args, o, max_seq_len],
        (0, 1, 2),
        multi_head_reference,
    )
