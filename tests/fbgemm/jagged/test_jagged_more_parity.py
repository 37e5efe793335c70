"""The jagged family's slicing.py, select.py, accumulate.py and pack.py ops on npu against
upstream's CPU kernels (``jagged_hash_size_cumsum``, which has none, against a loop over the
features written from the CUDA kernel's math): integers exact, float sums at float32 rounding,
gradients of ``jagged_slice`` / ``pack_segments`` / ``pack_segments_v2`` against upstream's
autograd on CPU."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _npu(args: tuple) -> tuple:
    return tuple(a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args)


def _same(got: object, want: object, exact: bool = True) -> None:
    if want is None:
        assert got is None
        return
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w, exact)
        return
    assert isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
    assert got.device.type == NPU and got.dtype == want.dtype and got.shape == want.shape
    if exact:
        assert torch.equal(got.cpu(), want), (got, want)
    else:
        torch.testing.assert_close(got.cpu(), want)


def _check(op: str, args: tuple, exact: bool = True) -> None:
    want = getattr(F, op)(*args)
    got = getattr(F, op)(*_npu(args))
    fbgemm_npu.check()
    _same(got, want, exact)


X = torch.arange(1.0, 11.0)
L = torch.tensor([3, 0, 4, 3])
S = torch.tensor([1, 0, 2, 3])
MASK = torch.tensor([1, 0, 1, 1, 1, 0, 0, 1, 1, 1], dtype=torch.bool)
BIG_L = torch.randint(0, 9, (400,), generator=_g(1))
BIG_X = torch.randn(int(BIG_L.sum()), generator=_g(2))

VALID = {
    "slice": ("jagged_slice", (X, L, S, 2)),
    "slice long": ("jagged_slice", (X, L, torch.zeros(4, dtype=I64), 10)),
    "slice 0": ("jagged_slice", (X, L, S, 0)),
    "slice int32 values": ("jagged_slice", (X.int(), L, S, 1)),
    "slice bf16": ("jagged_slice", (X.bfloat16(), L, S, 3)),
    "slice empty": ("jagged_slice", (X, L[:0], S[:0], 3)),
    "slice many": ("jagged_slice", (BIG_X, BIG_L, BIG_L // 2, 3)),
    "fwd": (
        "jagged_slice_forward",
        (X, L, S, torch.tensor([3, 1, 3, 1]), torch.tensor([1, 0, 0, 1]), 8, 5, True),
    ),
    "fwd more rows": (
        "jagged_slice_forward",
        (X, L, S, torch.tensor([2, 0, 2, 0]), torch.zeros(4, dtype=I64), 9, 2, True),
    ),
    "fwd negative slice": ("jagged_slice_forward", (X, L, S, L, S, 10, -1, True)),
    "fwd no rows": (
        "jagged_slice_forward",
        (X, L, S, torch.zeros(4, dtype=I64), S * 0, 0, 3, True),
    ),
    "masked": ("masked_select_jagged_1d", (X, L, MASK)),
    "masked int32": ("masked_select_jagged_1d", (X.long(), L.int(), MASK, True)),
    "masked half": ("masked_select_jagged_1d", (X.half(), L, ~MASK)),
    "masked none": ("masked_select_jagged_1d", (X, L, MASK & False)),
    "masked short rows": (
        "masked_select_jagged_1d",
        (X, torch.tensor([3, 0, 4]), MASK & (torch.arange(10) < 7)),
    ),
    "masked empty": ("masked_select_jagged_1d", (X[:0], L[:0], MASK[:0])),
    "masked many": ("masked_select_jagged_1d", (BIG_X, BIG_L, BIG_X > 0)),
    "truncated": ("jagged_1d_to_truncated_values", (X, L, 2)),
    "truncated int32": ("jagged_1d_to_truncated_values", (X.int(), L.int(), 3)),
    "truncated 0": ("jagged_1d_to_truncated_values", (X, L, 0)),
    "truncated int32 wrap": ("jagged_1d_to_truncated_values", (X, L.int(), 2**32 + 1)),
    "truncated short rows": ("jagged_1d_to_truncated_values", (X, torch.tensor([3, 1]), 3)),
    "truncated empty": ("jagged_1d_to_truncated_values", (X, L[:0], 3)),
    "truncated many": ("jagged_1d_to_truncated_values", (BIG_X, BIG_L, 4)),
    "pack": ("pack_segments", (X.reshape(5, 2), torch.tensor([2, 0, 3]), 3)),
    "pack truncated": ("pack_segments", (X.reshape(5, 2), torch.tensor([2, 0, 3]), 2)),
    "pack 1-D int32": ("pack_segments", (X.int(), L.int(), 5)),
    "pack 3-D half": ("pack_segments", (X.reshape(5, 2, 1).half(), torch.tensor([2, 0, 3]), 4)),
    "pack short rows": ("pack_segments", (X.reshape(5, 2), torch.tensor([2, 0, 2]), 3)),
    "pack transposed": ("pack_segments", (X.reshape(2, 5).t(), torch.tensor([2, 0, 3]), 3)),
    "pack no segments": ("pack_segments", (X.reshape(5, 2), L[:0], 3)),
    "pack many": ("pack_segments", (BIG_X, BIG_L, 6)),
    "v2": ("pack_segments_v2", (X.reshape(5, 2), torch.tensor([2, 0, 3]), 3)),
    "v2 minf mask": ("pack_segments_v2", (X.reshape(5, 2), torch.tensor([2, 0, 3]), 3, True, True)),
    "v2 int64 mask": ("pack_segments_v2", (X.long(), L.int(), 2, False, True)),
    "v2 bf16 truncated": ("pack_segments_v2", (X.bfloat16(), L, 2, True, False)),
    "bwd": ("pack_segments_backward", (X[:8].reshape(2, 2, 2), torch.tensor([2, 1]), 3, 2)),
    "bwd 2-D half": (
        "pack_segments_backward",
        (X[:9].reshape(3, 3).half(), torch.tensor([3, 0, 2]), 5, 3),
    ),
    "bwd int32": (
        "pack_segments_backward",
        (X[:6].reshape(3, 2), torch.tensor([2, 0, 2], dtype=I32), 4, 2),
    ),
}


@pytest.mark.parametrize("name", list(VALID))
def test_equals_upstream_cpu(name: str) -> None:
    op, args = VALID[name]
    _check(op, args)


def test_slice_forward_without_fill_zeros_writes_zeros_where_upstream_leaves_memory() -> None:
    args = (X, L, S, torch.tensor([3, 1, 3, 1]), torch.tensor([1, 0, 0, 1]), 8, 5)
    want = F.jagged_slice_forward(*args, True)  # the written rows; 0 elsewhere
    got = F.jagged_slice_forward(*_npu(args), False)
    assert torch.equal(got.cpu(), want)


def test_pack_backward_zeros_rows_no_position_writes() -> None:
    """Truncated rows and rows past sum(lengths): 0 (upstream leaves them uninitialised)."""
    data = torch.arange(1.0, 13.0).reshape(3, 2, 2)
    got = F.pack_segments_backward(data.to(NPU), torch.tensor([3, 0, 1]).to(NPU), 6, 2).cpu()
    want = torch.tensor([[1.0, 2], [3, 4], [0, 0], [9, 10], [0, 0], [0, 0]])
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("index", [I32, I64])
def test_acc_weights_and_counts(dtype: torch.dtype, index: torch.dtype) -> None:
    w = torch.randn(300, generator=_g(3)).to(dtype)
    ids = torch.randint(0, 40, (320,), generator=_g(4)).to(index)  # 20 ids past the weights
    want = F.jagged_acc_weights_and_counts(w, ids, 45)
    got = F.jagged_acc_weights_and_counts(w.to(NPU), ids.to(NPU), 45)
    assert got.dtype == torch.float32 and got.shape == (45, 2)
    assert torch.equal(got[:, 1].cpu(), want[:, 1])  # counts exact
    torch.testing.assert_close(got[:, 0].cpu(), want[:, 0], rtol=1e-5, atol=1e-5)
    _check("jagged_acc_weights_and_counts", (w[:0], ids[:0], 3))


def _hash_reference(offsets: torch.Tensor, indices: torch.Tensor, b: int) -> tuple:
    """The CUDA kernel's math, one feature at a time (Python ints: no wrap before the cast)."""
    t = (offsets.numel() - 1) // b
    sums = [0]
    for f in range(t):
        seg = indices[int(offsets[f * b]) : int(offsets[(f + 1) * b])].tolist()
        sums.append(sums[-1] + (max(seg) + 1 if seg else 0))
    return torch.tensor(sums, dtype=offsets.dtype), torch.arange(t + 1, dtype=offsets.dtype)


HASH = {
    "int64": (
        torch.tensor([0, 2, 3, 3, 3, 7, 8]),
        torch.tensor([5, 1, 9, 0, 3, 2, 7, 2**40 + 3]),
        2,
    ),
    "int64 B=3": (torch.tensor([0, 2, 3, 3, 3, 7, 8]), torch.tensor([5, 1, 9, 0, 3, 2, 7, 8]), 3),
    "int64 words": (
        torch.tensor([0, 3, 6, 8]),
        torch.tensor([2**62, 2**33 + 7, 2**33 + 9, 0, 2**31, 2**32 - 1, 2**32, 5]),
        1,
    ),
    "int64 negative": (torch.tensor([0, 2, 4]), torch.tensor([-7, -3, -(2**40), -1]), 1),
    "int32": (
        torch.tensor([0, 2, 3, 3, 5], dtype=I32),
        torch.tensor([4, 1, 2, 3, 0], dtype=I32),
        2,
    ),
    "no features": (torch.tensor([0, 3]), torch.tensor([1, 2, 3]), 2),
    "offsets from 1": (torch.tensor([1, 3, 4]), torch.tensor([100, 5, 1, 9]), 1),
    "many": (
        torch.cat([torch.zeros(1, dtype=I64), torch.cumsum(BIG_L, 0)]),
        torch.randint(0, 2**45, (int(BIG_L.sum()),), generator=_g(5)),
        10,
    ),
}


@pytest.mark.parametrize("name", list(HASH))
def test_hash_size_cumsum_equals_the_cuda_math(name: str) -> None:
    offsets, indices, b = HASH[name]
    got = F.jagged_hash_size_cumsum(offsets.to(NPU), indices.to(NPU), b)
    fbgemm_npu.check()
    for g, w in zip(got, _hash_reference(offsets, indices, b), strict=True):
        assert g.dtype == w.dtype and torch.equal(g.cpu(), w), (g, w)


GRADS = {
    "slice": ("jagged_slice", (X, L, S, 2)),
    "slice long": ("jagged_slice", (BIG_X, BIG_L, BIG_L // 3, 4)),
    "pack": ("pack_segments", (X.reshape(5, 2), torch.tensor([2, 0, 3]), 3)),
    "v2": ("pack_segments_v2", (X.reshape(5, 2), torch.tensor([2, 0, 3]), 4, False, True)),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_gradient_equals_upstream_cpu(name: str) -> None:
    op, (x, *rest) = GRADS[name]
    grads = []
    for dev in ("cpu", NPU):
        leaf = x.clone().to(dev).requires_grad_()
        out = getattr(F, op)(leaf, *_npu(tuple(rest)) if dev == NPU else rest)
        out = out[0] if isinstance(out, tuple) else out
        weight = torch.randn(out.shape, generator=_g(7)).to(dev)
        (out * weight).sum().backward()
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


def test_slice_gradient_is_zero_past_a_truncation() -> None:
    """pack_segments truncated: upstream's backward leaves those rows uninitialised; ours is the
    gradient, 0 (the rows no output reads)."""
    leaf = X.reshape(5, 2).clone().to(NPU).requires_grad_()
    F.pack_segments(leaf, torch.tensor([2, 0, 3]).to(NPU), 2).sum().backward()
    assert torch.equal(leaf.grad.cpu()[4], torch.zeros(2))
    assert torch.equal(leaf.grad.cpu()[:4], torch.ones(4, 2))
