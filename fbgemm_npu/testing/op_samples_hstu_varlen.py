"""Opcheck samples of FBGEMM's varlen HSTU ops (``fbgemm::hstu_varlen_fwd_80`` / ``_bwd_80``),
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``.

3 sequences: q lengths 2, 0, 3 against k lengths 3, 1, 3 (delta q), max 3 / 3, GQA 4 / 2 heads,
D_qk 3, D_v 5; the paths: no mask, causal with contexts and targets, a local window, rab with
its gradient, the arbitrary mask ``func``, seqused, the paged KV cache (forward).  The ops have
no autograd kernel (``fbgemm_npu.experimental.hstu``'s Functions are the autograd, as
upstream's are), so no input requires grad.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]
I32 = torch.int32


def _t(values: Any, device: str, dtype: torch.dtype = I32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def _randn(device: str, *shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


def _base(d: str, backward: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    q, k, v = _randn(d, 5, 4, 3, seed=1), _randn(d, 7, 2, 3, seed=2), _randn(d, 7, 2, 5, seed=3)
    lead = (_randn(d, 5, 4, 5, seed=4),) if backward else ()
    sizes = (_t([0, 2, 2, 5], d), _t([0, 3, 4, 7], d, torch.int64), None, None, 3, 3)
    return (*lead, q, k, v, *sizes), {}


def _samples(d: str, backward: bool) -> list[Sample]:
    args, _ = _base(d, backward)
    rab = _randn(d, 3, 2, 3, 3, seed=5)
    func = torch.randint(0, 4, (1, 3, 5), generator=torch.Generator().manual_seed(6)).to(d, I32)
    counts = {"num_contexts": _t([1, 0, 1], d), "num_targets": _t([1, 0, 1], d, torch.int64)}
    causal = {"window_size_left": -1, "window_size_right": 0}
    grad_rab = {"has_drab": True} if backward else {}
    used = list(args)
    at = 4 if backward else 3  # the index of cu_seqlens_q
    used[at + 2], used[at + 3] = _t([1, 0, 3], d), _t([2, 1, 3], d)
    return [
        (args, {}),
        (args, {**counts, **causal, "target_group_size": 2}),
        (args, {"window_size_left": 1, "window_size_right": 0, "alpha": 0.5}),
        (args, {"rab": rab, **causal, "scaling_seqlen": 2, **grad_rab}),
        (args, {"func": func}),
        (tuple(used), causal),
    ]


def _paged(d: str) -> list[Sample]:
    """2 sequences: 3 and 1 queries (1 and 0 targets) against 6 and 3 keys, 5 and 3 cached in
    pages of 2 (page_ids shuffled)."""
    q, k, v = (_randn(d, 4, 2, 3, seed=s) for s in (1, 2, 3))
    cache = _randn(d, 6, 2, 2, 2, 3, seed=4)
    paged = {
        "kv_cache": cache,
        "page_offsets": _t([0, 3, 5], d),
        "page_ids": _t([4, 0, 2, 5, 1], d),
        "last_page_lens": _t([1, 1], d),
    }
    sizes = (_t([0, 3, 4], d), _t([0, 6, 9], d), None, None, 3, 6)
    counts = {"num_targets": _t([1, 0], d), "window_size_left": -1, "window_size_right": 0}
    return [((q, k, v, *sizes), {**counts, **paged})]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "fbgemm::hstu_varlen_fwd_80": lambda d: _samples(d, False) + _paged(d),
    "fbgemm::hstu_varlen_bwd_80": lambda d: _samples(d, True),
}
