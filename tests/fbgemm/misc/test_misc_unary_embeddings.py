"""``fbgemm::batched_unary_embeddings`` on npu: forward against upstream's CPU kernel (float32,
float16, bfloat16 weights; int32 / int64 indices; empty bags, offsets not starting at 0, spare
offsets, indices spilling into the next table as upstream's flat index allows), the gradient of
``weight`` (upstream's CUDA autograd; its CPU build has none) against a float64 reference, and
bad input: upstream's errors (the same class), upstream's crashes and out-of-bounds reads
refused by name."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"


def _inputs(seed: int, index_dtype: torch.dtype = torch.int64) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    n, t, b = (int(torch.randint(1, 5, (1,), generator=g)) for _ in range(3))
    sizes = torch.randint(1, 9, (t,), generator=g)
    table_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    lengths = torch.randint(0, 5, (t * b,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    table = torch.arange(t).repeat_interleave(b).repeat_interleave(lengths)
    indices = (torch.rand(int(lengths.sum()), generator=g) * sizes[table]).long()
    weight = torch.randn(n, int(table_offsets[-1]), 1, generator=g)
    return weight, *(x.to(index_dtype) for x in (table_offsets, offsets, indices))


def _reference(
    weight: torch.Tensor, table_offsets: torch.Tensor, offsets: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """out[n, b, t] in float64 from the math (differentiable)."""
    n, t = weight.size(0), table_offsets.numel() - 1
    b = (offsets.numel() - 1) // t
    w = weight.reshape(n, -1)
    out = []
    for task in range(n):
        cols = []
        for table in range(t):
            col = []
            for bag in range(b):
                lo, hi = int(offsets[table * b + bag]), int(offsets[table * b + bag + 1])
                ids = table_offsets[table] + indices[lo:hi].long()
                col.append(w[task, ids].sum())
            cols.append(torch.stack(col))
        out.append(torch.stack(cols, 1))
    return torch.stack(out)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_forward_equals_upstream(seed: int, dtype: torch.dtype) -> None:
    weight, *rest = _inputs(seed, (torch.int64, torch.int32)[seed % 2])
    weight = weight.to(dtype)
    want = F.batched_unary_embeddings(weight, *rest)
    got = F.batched_unary_embeddings(weight.to(NPU), *(x.to(NPU) for x in rest))
    assert got.dtype == want.dtype and got.shape == want.shape
    # both sum in float32; half outputs are rounded once, so at most one unit apart
    tol = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=tol, atol=tol)


def test_upstream_edges() -> None:
    weight = torch.randn(2, 7, 1)
    table_offsets = torch.tensor([0, 3, 7])
    cases = {
        "offsets from 2, one spare": (torch.tensor([2, 3, 3, 5, 6, 6, 8, 8]), torch.arange(8) % 3),
        "index into the next table": (
            torch.tensor([0, 1, 1, 2, 2, 3, 4]),
            torch.tensor([4, 0, 1, 3]),
        ),
    }
    for offsets, indices in cases.values():
        want = F.batched_unary_embeddings(weight, table_offsets, offsets, indices)
        got = F.batched_unary_embeddings(
            *(x.to(NPU) for x in (weight, table_offsets, offsets, indices))
        )
        torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("seed", range(6))
def test_gradient_equals_float64_reference(seed: int) -> None:
    weight, table_offsets, offsets, indices = _inputs(seed)
    w64 = weight.double().requires_grad_()
    ref = _reference(w64, table_offsets, offsets, indices)
    upstream = F.batched_unary_embeddings(weight, table_offsets, offsets, indices)
    torch.testing.assert_close(ref.float(), upstream)
    probe = torch.randn(ref.shape, generator=torch.Generator().manual_seed(seed))
    (ref * probe.double()).sum().backward()
    w = weight.to(NPU).requires_grad_()
    out = F.batched_unary_embeddings(w, *(x.to(NPU) for x in (table_offsets, offsets, indices)))
    (out * probe.to(NPU)).sum().backward()
    assert w.grad is not None and w.grad.dtype == torch.float32
    torch.testing.assert_close(w.grad.cpu().double(), w64.grad, rtol=1e-6, atol=1e-6)


def test_the_module_trains_on_npu() -> None:
    from fbgemm_gpu.batched_unary_embeddings_ops import BatchedUnaryEmbeddingBag

    torch.manual_seed(0)
    module = BatchedUnaryEmbeddingBag(2, [3, 5]).to(NPU)
    offsets = torch.tensor([0, 1, 3, 4, 6], dtype=torch.int32).to(NPU)  # the module's int32
    indices = torch.tensor([0, 2, 1, 4, 0, 3], dtype=torch.int32).to(NPU)
    before = module.weight.detach().cpu().clone()
    module(offsets, indices).sum().backward()
    with torch.no_grad():
        module.weight -= 0.1 * module.weight.grad
    moved = (module.weight.detach().cpu() != before).squeeze(-1)
    touched = torch.zeros(2, 8, dtype=torch.bool)
    touched[:, [0, 2, 1, 3 + 4, 3 + 0, 3 + 3]] = True
    assert torch.equal(moved, touched)


W, TO, OFF, IDX = (
    torch.randn(2, 7, 1),
    torch.tensor([0, 3, 7]),
    torch.tensor([0, 1, 3, 3, 4, 6, 8]),
    torch.tensor([0, 2, 1, 3, 0, 1, 2, 3]),
)
BAD = {
    "no tasks": ((W[:0], TO, OFF, IDX), RuntimeError, "weight"),
    "no tables": ((W, TO[:1], OFF, IDX), RuntimeError, "table_offsets"),
    "no bags": ((W, TO, OFF[:2], IDX), RuntimeError, "offsets"),
    "mixed index dtypes": ((W, TO.int(), OFF, IDX), RuntimeError, "offsets"),
    "float64 weight": ((W.double(), TO, OFF, IDX), NotImplementedError, "weight"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_metadata_raises_as_upstream(name: str) -> None:
    args, cls, arg = BAD[name]
    if name != "no tables":  # upstream divides by zero there (SIGFPE): not called
        with pytest.raises(cls):
            F.batched_unary_embeddings(*args)
    with pytest.raises(cls, match="batched_unary_embeddings") as info:
        F.batched_unary_embeddings(*(a.to(NPU) for a in args))
    assert arg in str(info.value)


BAD_DATA = {
    "index past the weight": (IDX + 5, OFF, TO, "indices"),
    "negative index": (IDX - 1, OFF, TO, "indices"),
    "decreasing offsets": (IDX, torch.tensor([0, 3, 1, 3, 4, 6, 8]), TO, "offsets"),
    "offsets past the indices": (IDX, torch.tensor([0, 1, 3, 3, 4, 6, 9]), TO, "offsets"),
    "table_offsets short of the weight": (IDX, OFF, torch.tensor([0, 3, 6]), "table_offsets"),
}


@pytest.mark.parametrize("name", list(BAD_DATA))
def test_bad_data_raises_at_the_check_and_stays_in_bounds(name: str) -> None:
    indices, offsets, table_offsets, arg = BAD_DATA[name]
    out = F.batched_unary_embeddings(*(x.to(NPU) for x in (W, table_offsets, offsets, indices)))
    assert out.shape == (2, 3, 2)
    with pytest.raises(RuntimeError, match="batched_unary_embeddings") as info:
        fbgemm_npu.check()
    assert arg in str(info.value)
