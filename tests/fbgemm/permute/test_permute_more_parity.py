"""The permute family's later ops against upstream's CPU kernels (fbgemm-gpu-cpu 1.8.0), on
deterministic edge cases the conformance draws may miss: ``permute_sequence_embeddings``,
``permute102_baddbmm_permute102``, the duplicate pooled permutes (with their gradients), and the
recats (the CUDA-only ones against ``narrow`` + ``cat`` on CPU, the math of upstream's CUDA
kernels).  Integer and copied outputs exact; the baddbmm at float32 rounding.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"
T = torch.tensor


def _npu(*args: Any) -> list[Any]:
    return [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]


def _same(ours: Any, ref: Any) -> None:
    ours = ours if isinstance(ours, (tuple, list)) else (ours,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref, strict=True):
        assert o.device.type == NPU
        torch.testing.assert_close(o.cpu(), r, rtol=0, atol=0)


SEQUENCE_CASES = {
    "repeats_and_drops": (T([2, 0, 2], dtype=torch.int32), T([[1, 2], [0, 3], [2, 1]])),
    "int32_lengths": (T([1, 0], dtype=torch.int32), T([[0, 4], [3, 0]], dtype=torch.int32)),
    "no_columns": (T([1, 0], dtype=torch.int32), torch.zeros(2, 0, dtype=torch.int64)),
    "empty_permute": (torch.zeros(0, dtype=torch.int32), T([[1, 2]])),
}


@pytest.mark.parametrize("case", SEQUENCE_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_permute_sequence_embeddings(case: str, dtype: torch.dtype) -> None:
    perm, lengths = SEQUENCE_CASES[case]
    emb = torch.arange(int(lengths.sum()) + 2).to(dtype)  # a tail past the lengths: ignored
    ref = F.permute_sequence_embeddings(perm, lengths, emb)
    _same(F.permute_sequence_embeddings(*_npu(perm, lengths, emb)), ref)


def test_permute_sequence_embeddings_reads_2d_embeddings_flat() -> None:
    perm, lengths = SEQUENCE_CASES["repeats_and_drops"]
    emb = torch.arange(18.0).view(9, 2)  # upstream counts elements, not rows
    ref = F.permute_sequence_embeddings(perm, lengths, emb)
    _same(F.permute_sequence_embeddings(*_npu(perm, lengths, emb)), ref)


@pytest.mark.parametrize("shape", [(3, 2, 4, 5), (0, 2, 4, 5), (3, 0, 4, 5), (3, 2, 0, 5)])
def test_permute102_baddbmm_permute102(shape: tuple[int, int, int, int]) -> None:
    m, b, k, n = shape
    g = torch.Generator().manual_seed(1)
    bias, a = torch.randn(b, n, generator=g), torch.randn(m, b, k, generator=g)
    bb = torch.randn(b, k, n, generator=g)
    ref = F.permute102_baddbmm_permute102(bias, a, bb)
    ours = F.permute102_baddbmm_permute102(*_npu(bias, a, bb))
    assert ours.shape == ref.shape and ours.stride() == ref.stride()
    torch.testing.assert_close(ours.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_permute102_baddbmm_permute102_strided_inputs() -> None:
    g = torch.Generator().manual_seed(2)
    a = torch.randn(2, 4, 3, generator=g).permute(2, 0, 1)  # (m, b, k) = (3, 2, 4), permuted
    bb = torch.randn(2, 5, 4, generator=g).transpose(1, 2)  # (2, 4, 5)
    bias = torch.randn(5, generator=g).expand(2, 5)  # stride 0
    ref = F.permute102_baddbmm_permute102(bias.contiguous(), a.contiguous(), bb.contiguous())
    ours = F.permute102_baddbmm_permute102(*_npu(bias, a, bb))
    torch.testing.assert_close(ours.cpu(), ref, rtol=1e-5, atol=1e-5)


DUPLICATE_OPS = [
    "permute_duplicate_pooled_embs",
    "permute_duplicate_pooled_embs_split",
    "permute_duplicate_pooled_embs_auto_grad",
    "permute_duplicate_pooled_embs_auto_grad_split",
]
# (offset_dim_list, permute_list): the cuts as tensor_split reads them
DUPLICATE_CASES = {
    "repeats": ([0, 2, 5, 10], [2, 0, 0, 1]),
    "last_piece": ([0, 2, 5], [2, 2]),  # the piece past the last cut
    "first_offset_ignored": ([3, 2, 5, 10], [0, 1]),
    "decreasing_cut": ([0, 5, 2, 10], [0, 1, 2]),  # an empty piece
    "negative_cut": ([0, -2, 5, 10], [0, 1, 2]),  # counted from the end
    "past_the_end": ([0, 2, 15, 20], [0, 1, 2, 3]),
    "one_piece": ([0], [0, 0]),
    "all_empty": ([0, 0, 0, 10], [0, 1, 1]),
}


@pytest.mark.parametrize("case", DUPLICATE_CASES, ids=str)
@pytest.mark.parametrize("op", DUPLICATE_OPS)
def test_permute_duplicate_pooled_embs(op: str, case: str) -> None:
    off, perm = (T(v) for v in DUPLICATE_CASES[case])
    x = torch.arange(30.0).view(3, 10)
    ref = getattr(F, op)(x, off, perm, off, perm)
    _same(getattr(F, op)(*_npu(x, off, perm, off, perm)), ref)


@pytest.mark.parametrize("x", ["3d", "int64", "bool", "empty_rows", "transposed"])
def test_permute_duplicate_pooled_embs_inputs(x: str) -> None:
    pooled = {
        "3d": torch.arange(40.0).view(2, 10, 2),
        "int64": torch.arange(20).view(2, 10),
        "bool": torch.arange(20).view(2, 10) % 3 == 0,
        "empty_rows": torch.zeros(0, 10),  # upstream returns the input unchecked
        "transposed": torch.arange(20.0).view(10, 2).t(),
    }[x]
    off, perm = T([0, 2, 5, 10]), T([2, 0, 0])
    ref = F.permute_duplicate_pooled_embs(pooled.contiguous(), off, perm, off, perm)
    _same(F.permute_duplicate_pooled_embs(*_npu(pooled, off, perm, off, perm)), ref)


def _grads(op: str, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and the gradient of ``sum(out * w)``: a permutation of 3 blocks, inverse lists."""
    x = torch.arange(30.0, dtype=torch.float64).view(3, 10).to(device).requires_grad_()
    off, perm = T([0, 2, 5, 10]), T([2, 0, 1])
    inv_off, inv_perm = T([0, 5, 7, 10]), T([1, 2, 0])
    lists = [t.to(device) for t in (off, perm, inv_off, inv_perm)]
    out = getattr(F, op)(x, *lists)
    w = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).view(out.shape).to(device)
    (out * w).sum().backward()
    assert x.grad is not None
    return out.detach().cpu(), x.grad.cpu()


def test_duplicate_auto_grad_split_gradient_matches_upstream() -> None:
    op = "permute_duplicate_pooled_embs_auto_grad_split"
    (out, grad), (ref_out, ref_grad) = _grads(op, NPU), _grads(op, "cpu")
    torch.testing.assert_close(out, ref_out, rtol=0, atol=0)
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=0)


def test_duplicate_auto_grad_backward_raises_as_upstream() -> None:
    op = "permute_duplicate_pooled_embs_auto_grad"
    with pytest.raises(RuntimeError, match="allow_duplicates in backward"):
        _grads(op, "cpu")
    with pytest.raises(RuntimeError, match=f"{op}.*backward"):
        _grads(op, NPU)


def _recat_reference(grad: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    blocks, start = [], 0
    for s in sizes:
        blocks.append(grad.narrow(1, start, s).reshape(-1))
        start += s
    return torch.cat(blocks)


@pytest.mark.parametrize("dims", [[3, 0, 7], [10], [0, 10, 0], [1] * 10])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_recat_mixed_d(dims: list[int], dtype: torch.dtype) -> None:
    g = torch.randn(4, 10).to(dtype)
    ref = F.recat_embedding_grad_output_mixed_D(g, dims)
    _same(F.recat_embedding_grad_output_mixed_D(g.to(NPU), dims), ref)
    # non-contiguous input (upstream refuses it; its contiguous copy is the oracle)
    gt = g.t().contiguous().t()
    _same(F.recat_embedding_grad_output_mixed_D(gt.to(NPU), dims), ref)
    dims_t, starts = T(dims), T(dims).cumsum(0) - T(dims)
    ours = F.recat_embedding_grad_output_mixed_D_batch(*_npu(g, dims_t, starts))
    _same(ours, ref)


@pytest.mark.parametrize("features", [[1, 3], [4], [0, 2, 0, 2]])
def test_recat_embedding_grad_output(features: list[int]) -> None:
    g = torch.randn(3, 4, 5)
    ref = _recat_reference(g, features)
    _same(F.recat_embedding_grad_output(g.to(NPU), features), ref)
    # = the mixed-D op on the flattened features (upstream's CPU kernel)
    flat = F.recat_embedding_grad_output_mixed_D(g.reshape(3, 20), [n * 5 for n in features])
    torch.testing.assert_close(ref, flat, rtol=0, atol=0)


def test_recat_empty_batch() -> None:
    g = torch.zeros(0, 10)
    ref = F.recat_embedding_grad_output_mixed_D(g, [3, 7])
    _same(F.recat_embedding_grad_output_mixed_D(g.to(NPU), [3, 7]), ref)
    # upstream checks B * sum == numel only: any sizes for an empty batch
    ref = F.recat_embedding_grad_output_mixed_D(g, [3, 4])
    _same(F.recat_embedding_grad_output_mixed_D(g.to(NPU), [3, 4]), ref)
    ours = F.recat_embedding_grad_output_mixed_D_batch(*_npu(g, T([3, 7]), T([0, 3])))
    _same(ours, ref)
    _same(F.recat_embedding_grad_output(torch.zeros(0, 2, 3).to(NPU), [1, 1]), torch.zeros(0))
