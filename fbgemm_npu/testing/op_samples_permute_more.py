"""Opcheck samples of the permute family's later ops (``permute_sequence_embeddings``,
``permute102_baddbmm_permute102``, the duplicate pooled permutes, the embedding-gradient recats),
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _sequence(d: str) -> list[Sample]:
    perm = torch.tensor([2, 0, 0], dtype=torch.int32).to(d)
    lengths = torch.tensor([[1, 2], [0, 3], [2, 1]], dtype=torch.int32).to(d)
    emb = torch.randn(9, generator=_gen(3)).to(d)
    return [((perm, lengths, emb), {}), ((perm, lengths.long(), emb.long()), {})]


def _baddbmm(d: str) -> list[Sample]:
    g = _gen(4)
    a, b = torch.randn(3, 2, 4, generator=g), torch.randn(2, 4, 5, generator=g)
    bias = torch.randn(2, 5, generator=g)
    return [
        ((bias.to(d), a.to(d), b.to(d)), {}),
        ((bias.half().to(d), a.half().to(d), b.half().to(d)), {}),
    ]


def _lists(d: str) -> tuple[torch.Tensor, ...]:
    off = torch.tensor([0, 2, 5, 9])
    perm = torch.tensor([2, 0, 1, 2])  # block 2 twice
    # the output's blocks (widths 4, 2, 3, 4) and the pieces that rebuild the input from them
    inv_off, inv_perm = torch.tensor([0, 4, 6, 9, 13]), torch.tensor([1, 2, 0])
    return tuple(t.to(d) for t in (off, perm, inv_off, inv_perm))


def _duplicate(d: str) -> list[Sample]:
    x = torch.randn(3, 9, generator=_gen(5)).to(d)
    return [((x, *_lists(d)), {}), ((x.view(3, 9, 1).expand(3, 9, 2), *_lists(d)), {})]


def _duplicate_auto_grad(d: str) -> list[Sample]:
    """Built without grad: op_samples adds the sample requiring grad (and this one after it)."""
    x = torch.randn(3, 9, generator=_gen(6)).to(d)
    return [((x, *_lists(d)), {})]


def _recat(d: str) -> list[Sample]:
    return [((torch.randn(2, 5, 3, generator=_gen(7)).to(d), [2, 0, 3]), {})]


def _recat_mixed_d(d: str) -> list[Sample]:
    g = torch.randn(3, 10, generator=_gen(8)).to(d)
    return [((g, [3, 0, 7]), {}), ((g.half(), [10]), {})]


def _recat_mixed_d_batch(d: str) -> list[Sample]:
    g = torch.randn(3, 10, generator=_gen(9)).to(d)
    dims, starts = torch.tensor([3, 0, 7]).to(d), torch.tensor([0, 3, 3]).to(d)
    return [((g, dims, starts), {}), ((g.half(), dims, starts), {})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::permute_sequence_embeddings": _sequence,
    "fbgemm::permute102_baddbmm_permute102": _baddbmm,
    "fbgemm::permute_duplicate_pooled_embs": _duplicate,
    "fbgemm::permute_duplicate_pooled_embs_split": _duplicate,
    "fbgemm::permute_duplicate_pooled_embs_auto_grad": _duplicate_auto_grad,
    "fbgemm::permute_duplicate_pooled_embs_auto_grad_split": _duplicate_auto_grad,
    "fbgemm::recat_embedding_grad_output": _recat,
    "fbgemm::recat_embedding_grad_output_mixed_D": _recat_mixed_d,
    "fbgemm::recat_embedding_grad_output_mixed_D_batch": _recat_mixed_d_batch,
}
