"""The jagged kernels' outputs against upstream's Meta kernels, on the layouts the opcheck samples
(tests/core/test_opcheck.py, contiguous) do not reach: strides (``test_faketensor`` compares the
significant ones) for permuted, transposed and size-1-dim inputs, and no output that is an
input or shares storage with another output (AOTAutograd refuses a custom op's aliasing output
where its schema declares none).

Upstream's Meta kernels give ``empty_like`` of an input where ours once computed a contiguous
result: ``batched_dense_vec_jagged_2d_mul_backward``'s ``v_grad`` (``v``'s strides; also a
non-contiguous view of ours when B == 1), ``jagged_dense_elementwise_mul_backward``'s ``y_grad``
and ``jagged_dense_elementwise_add`` (``y``'s).  The stacked ops returned views of one grid.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from fbgemm_npu.testing.jagged_inputs import OFFSETS

F = torch.ops.fbgemm
NPU = "npu"


def _permuted(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values with its dims' memory order reversed (dense, not contiguous)."""
    order = list(reversed(range(t.dim())))
    return t.permute(*order).contiguous().permute(*order)


def _on_npu(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return a.to(NPU)  # keeps a dense tensor's strides
    if isinstance(a, list) and a and isinstance(a[0], torch.Tensor):
        return [t.to(NPU) for t in a]
    return a


def _fake_check(op: Any, *args: Any) -> None:
    moved = [_on_npu(a) for a in args]
    result = torch.library.opcheck(
        op.default, tuple(moved), test_utils=("test_faketensor",), raise_exception=False
    )["test_faketensor"]
    assert result == "SUCCESS", f"{op}: {result}"


def _layouts(*tensors: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
    """Every combination of each tensor as it is and permuted."""
    return [
        tuple(_permuted(t) if p else t for t, p in zip(tensors, flags, strict=True))
        for flags in itertools.product((False, True), repeat=len(tensors))
    ]


@pytest.mark.parametrize(
    ("b", "h", "length", "d"), itertools.product((1, 3), (1, 2), (1, 4), (1, 3))
)
def test_batched_dense_vec_jagged_2d_mul_backward_strides(
    b: int, h: int, length: int, d: int
) -> None:
    offsets = OFFSETS if b == 3 else torch.tensor([0, 2])
    n = int(offsets[-1])
    gen = torch.Generator().manual_seed(b * 100 + h * 10 + length + d)
    grad, v = torch.randn(b * h, d, generator=gen), torch.randn(b * h, length, generator=gen)
    a = torch.randn(n, h * d, generator=gen)
    for g_, v_, a_ in _layouts(grad, v, a):
        _fake_check(F.batched_dense_vec_jagged_2d_mul_backward, g_, v_, a_, offsets)
        # and the values: upstream CPU on the same layouts
        ours = F.batched_dense_vec_jagged_2d_mul_backward(
            g_.to(NPU), v_.to(NPU), a_.to(NPU), offsets.to(NPU)
        )
        expected = F.batched_dense_vec_jagged_2d_mul_backward(g_, v_, a_, offsets)
        for o, e in zip(ours, expected, strict=True):
            torch.testing.assert_close(o.cpu(), e)


@pytest.mark.parametrize(("length", "d"), itertools.product((1, 4), (1, 3)))
def test_jagged_dense_elementwise_mul_backward_strides(length: int, d: int) -> None:
    gen = torch.Generator().manual_seed(length * 10 + d)
    grad, x = torch.randn(5, d, generator=gen), torch.randn(5, d, generator=gen)
    y = torch.randn(3, length, d, generator=gen)
    for g_, y_, x_ in _layouts(grad, y, x):
        _fake_check(F.jagged_dense_elementwise_mul_backward, g_, [OFFSETS], y_, x_)


@pytest.mark.parametrize("d", (1, 3))
def test_jagged_dense_elementwise_add_strides(d: int) -> None:
    gen = torch.Generator().manual_seed(d)
    x, y = torch.randn(5, d, generator=gen), torch.randn(3, 4, d, generator=gen)
    for x_, y_ in _layouts(x, y):
        _fake_check(F.jagged_dense_elementwise_add, x_, [OFFSETS], y_)
        _fake_check(F.jagged_dense_elementwise_mul_forward, x_, [OFFSETS], y_)
        _fake_check(
            F.jagged_dense_dense_elementwise_add_jagged_output_forward, x_, [OFFSETS], y_, y_
        )
    # mixed dtypes and a broadcast inner dim keep upstream CPU's result dtype and shape
    for x_, y_ in ((x, y.half()), (x.half(), y), (x[:, :1], y), (x, y[..., :1])):
        got = F.jagged_dense_elementwise_add(x_.to(NPU), [OFFSETS.to(NPU)], y_.to(NPU))
        expected = F.jagged_dense_elementwise_add(x_, [OFFSETS], y_)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.parametrize("maxl", ([2, 3], [3, 3], [3], [0, 2]))
@pytest.mark.parametrize("ndim", (1, 2))
def test_stacked_outputs_match_the_meta_kernel(maxl: list[int], ndim: int) -> None:
    """Each key's output is its own contiguous tensor (ours register the stacked Meta kernels)."""
    lengths = torch.tensor([[1, 2], [0, 3]])[: len(maxl)]
    values = torch.arange(12.0).view(6, 2)
    if ndim == 1:
        _fake_check(
            F.stacked_jagged_1d_to_dense, values[:, 0].contiguous(), lengths, [0, 3, 6], maxl, 0
        )
    else:
        _fake_check(F.stacked_jagged_2d_to_dense, values, lengths, [0, 3, 6], maxl, 0)


def _storages(value: Any) -> list[int]:
    if isinstance(value, torch.Tensor):
        return [value.untyped_storage().data_ptr()] if value.numel() else []
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _storages(v)]
    return []


@pytest.mark.parametrize("k", (1, 2))
@pytest.mark.parametrize("grad", (False, True))
def test_returned_offsets_are_fresh(k: int, grad: bool) -> None:
    """The ops returning offsets return copies (equal, not the inputs, not sharing storage)."""
    offsets = [torch.tensor([0, 2, 3]), torch.tensor([0, 1, 3, 5])][-k:] if k == 2 else [OFFSETS]
    n, lengths = 5, [2, 2] if k == 2 else [4]
    o = [t.to(NPU) for t in offsets]
    x = torch.randn(n, 3, device=NPU, requires_grad=grad)
    y = torch.randn(len(offsets[0]) - 1, *lengths, 3, device=NPU, requires_grad=grad)
    calls = {
        "mul": lambda: F.jagged_dense_elementwise_mul(x, o, y),
        "add_jagged_output": lambda: F.jagged_dense_elementwise_add_jagged_output(x, o, y),
        "dense_dense": lambda: F.jagged_dense_dense_elementwise_add_jagged_output(x, o, y, y),
    }
    for name, call in calls.items():
        values, out_offsets = call()
        assert len(out_offsets) == k, name
        for got, given in zip(out_offsets, o, strict=True):
            assert got is not given and torch.equal(got, given), name
        ins, outs = set(_storages([x, y, o])), _storages([values, out_offsets])
        assert not ins & set(outs) and len(outs) == len(set(outs)), name
        assert values.requires_grad == grad, name
