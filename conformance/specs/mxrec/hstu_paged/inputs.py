"""Inputs of ``mxrec::hstu_paged`` built the way Rec SDK's paged test builds them: per sequence a
cache of ``C`` rows written into pages of a shared pool (the last page partly filled), ``L_q =
new + n_t`` new rows of q / k / v whose last ``n_t`` are the targets, and the offsets that
describe them (``seq_offset``, ``seq_offset_k`` of ``C + n_t``, ``seq_offset_t`` of ``n_t``,
``page_offsets``, ``page_ids``, ``last_page_len``).

Unlike Rec SDK's test the pool's pages are handed out shuffled with spare pages in between, and
the rows of a last page past ``last_page_len`` hold noise (not zeros): a gather that reads past
the cut or the wrong page shows.  A test input builder, not a kernel.
"""

from __future__ import annotations

import torch

__all__ = ["paged_case"]


def _offsets(lengths: list[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths, dtype=torch.int64).cumsum(0).tolist()]).to(dtype)


def paged_case(
    cache_lens: list[int],
    new_lens: list[int],
    targets: list[int] | None,
    *,
    page_size: int = 32,
    heads: tuple[int, int] = (4, 2),
    dim: int = 8,
    dtype: torch.dtype = torch.float32,
    index_dtype: torch.dtype = torch.int64,
    seed: int = 0,
    spare_pages: int = 2,
) -> dict[str, object]:
    """Keyword arguments of one call (CPU tensors): sequence ``b`` has ``cache_lens[b]`` cached
    rows (0: no pages), ``new_lens[b]`` new history rows and ``targets[b]`` targets (None: no
    ``num_target`` / ``seq_offset_t``); ``heads = (N_q, N_k)``; ``max_seq_len`` and
    ``max_seq_len_k`` are the longest q and key sequences; ``target_group_size`` 1 with targets."""
    g = torch.Generator().manual_seed(seed)
    nq, nk = heads
    nt = targets if targets is not None else [0] * len(cache_lens)
    counts = [-(-c // page_size) for c in cache_lens]
    pool = sum(counts) + spare_pages
    order = torch.randperm(pool, generator=g)  # pages handed out shuffled, spares in between
    cache = torch.randn(pool, 2, page_size, nk, dim, generator=g)
    ids, last, at = [], [], 0
    for c, n in zip(cache_lens, counts, strict=True):
        ids.extend(int(p) for p in order[at : at + n])
        at += n
        last.append(c - (n - 1) * page_size if n else 0)
    lq = [a + t for a, t in zip(new_lens, nt, strict=True)]
    lk = [c + t for c, t in zip(cache_lens, nt, strict=True)]
    rows = sum(lq)
    kw: dict[str, object] = {
        "q": (0.5 * torch.randn(rows, nq, dim, generator=g)).to(dtype),
        "k": (0.5 * torch.randn(rows, nk, dim, generator=g)).to(dtype),
        "v": torch.randn(rows, nk, dim, generator=g).to(dtype),
        "kv_cache": torch.cat([0.5 * cache[:, :1], cache[:, 1:]], 1).to(dtype),
        "max_seq_len": max(max(lq, default=1), 1),
        "max_seq_len_k": max(max(lk, default=1), 1),
        "seq_offset": _offsets(lq, index_dtype),
        "seq_offset_k": _offsets(lk, index_dtype),
        "page_offsets": _offsets(counts, index_dtype),
        "page_ids": torch.tensor(ids, dtype=torch.int64).to(index_dtype),
        "last_page_len": torch.tensor(last, dtype=torch.int64).to(index_dtype),
    }
    if targets is not None:
        kw["num_target"] = torch.tensor(nt).to(index_dtype)
        kw["seq_offset_t"] = _offsets(nt, index_dtype)
        kw["target_group_size"] = 1
    return kw
