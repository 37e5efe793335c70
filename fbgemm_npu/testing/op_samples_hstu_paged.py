"""Opcheck samples of the paged HSTU family (``mxrec::hstu_paged``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``.

Three sequences over a pool of 5 pages of 4 rows (GQA 4 / 2 heads, D 3): caches of 6, 4 and 0
rows (pages ``[3, 0]``, ``[4]``, none; last pages of 2, 4 and 0 rows), new q rows 3, 1, 2 of
which 1, 0, 1 are targets; ``max_seq_len`` 3, ``max_seq_len_k`` 7.  Inference only: no input
requires grad (the op has no autograd, as in Rec SDK).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _t(values: Any, device: str) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def _randn(device: str, *shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


def _hstu_paged(d: str) -> list[Sample]:
    q, k, v = _randn(d, 6, 4, 3, seed=1), _randn(d, 6, 2, 3, seed=2), _randn(d, 6, 2, 3, seed=3)
    kw: dict[str, Any] = {
        "kv_cache": _randn(d, 5, 2, 4, 2, 3, seed=4),
        "max_seq_len": 3,
        "max_seq_len_k": 7,
        "seq_offset": _t([0, 3, 4, 6], d),
        "seq_offset_k": _t([0, 7, 11, 12], d),
        "seq_offset_t": _t([0, 1, 1, 2], d),
        "page_offsets": _t([0, 2, 3, 3], d),
        "page_ids": _t([3, 0, 4], d),
        "last_page_len": _t([2, 4, 0], d),
        "num_target": _t([1, 0, 1], d),
        "target_group_size": 1,
    }
    bias = _randn(d, 3, 4, 3, 7, seed=5)
    mask = (_randn(d, 3, 4, 3, 7, seed=6) > 0).float()
    plain = {n: kw[n] for n in kw if n not in ("num_target", "seq_offset_t", "target_group_size")}
    plain["seq_offset_k"] = _t([0, 6, 10, 10], d)  # no targets: the keys are the caches
    return [
        ((q, k, v), kw),
        ((q, k, v), {**kw, "attn_bias": bias, "alpha": 0.5, "silu_scale": 0.25}),
        ((q, k, v), {**kw, "mask": mask, "mask_type": 3}),
        ((q, k, v), {**plain, "mask_type": 2}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {"mxrec::hstu_paged": _hstu_paged}
