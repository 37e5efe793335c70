"""Opcheck samples of the HSTU family (``mxrec::hstu_*``), merged into
:mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]
I32 = torch.int32


def _t(values: Any, device: str, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def _randn(device: str, *shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


# --- mxrec hstu: 3 sequences of lengths 2, 0, 3, max_seq_len 4, GQA 4 / 2 heads, D_qk 3, D_v 5 ---
def _hstu(d: str, backward: bool) -> list[Sample]:
    off = _t([0, 2, 2, 5], d)
    q, k, v = _randn(d, 5, 4, 3, seed=1), _randn(d, 5, 2, 3, seed=2), _randn(d, 5, 2, 5, seed=3)
    lead = (_randn(d, 5, 4, 5, seed=4),) if backward else ()
    bias = _randn(d, 3, 4, 4, 4, seed=5)
    mask = (_randn(d, 3, 4, 4, 4, seed=6) > 0).float()
    counts = {"num_context": _t([1, 0, 1], d), "num_target": _t([1, 0, 1], d, I32)}
    return [
        ((*lead, q, k, v), {"max_seq_len": 4, "seq_offset": off}),
        ((*lead, q, k, v), {"attn_bias": bias, "max_seq_len": 4, "seq_offset": off, "alpha": 0.5}),
        ((*lead, q, k, v), {"mask": mask, "mask_type": 3, "max_seq_len": 4, "seq_offset": off}),
        ((*lead, q, k, v), {"max_seq_len": 4, "seq_offset": off, "target_group_size": 1, **counts}),
    ]


def _hstu_dense(d: str, backward: bool) -> list[Sample]:
    q, k, v = (
        _randn(d, 2, 3, 4, 3, seed=1),
        _randn(d, 2, 3, 2, 3, seed=2),
        _randn(d, 2, 3, 2, 5, seed=3),
    )
    lead = (_randn(d, 2, 3, 4, 5, seed=4),) if backward else ()
    bias = _randn(d, 2, 4, 3, 3, seed=5)
    mask = (_randn(d, 2, 4, 3, 3, seed=6) > 0).float()
    return [
        ((*lead, q, k, v, None, None), {}),
        ((*lead, q, k, v, None, bias), {"max_seq_len": 3, "silu_scale": 0.5}),
        ((*lead, q, k, v, mask, None), {"mask_type": 3}),
    ]


def _hstu_delta(d: str, backward: bool) -> list[Sample]:
    """3 batches: q lengths 1, 0, 2 against k lengths 2, 1, 3 (max 2 / 3), GQA 4 / 2."""
    off, off_k = _t([0, 1, 1, 3], d), _t([0, 2, 3, 6], d, I32)
    q, k, v = _randn(d, 3, 4, 3, seed=1), _randn(d, 6, 2, 3, seed=2), _randn(d, 6, 2, 5, seed=3)
    lead = (_randn(d, 3, 4, 5, seed=4),) if backward else ()
    sizes = {"max_seq_len": 2, "max_seq_len_k": 3, "seq_offset": off, "seq_offset_k": off_k}
    bias = _randn(d, 3, 4, 2, 3, seed=5)
    counts = {"num_context": _t([1, 0, 1], d), "num_target": _t([1, 0, 1], d)}
    return [
        ((*lead, q, k, v), sizes),
        ((*lead, q, k, v), {"attn_bias": bias, "alpha": 0.5, **sizes}),
        ((*lead, q, k, v), {"target_group_size": 1, **counts, **sizes}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::hstu_jagged.delta": lambda d: _hstu_delta(d, False),
    "mxrec::hstu_jagged_backward.delta": lambda d: _hstu_delta(d, True),
    "mxrec::hstu_jagged.equal": lambda d: _hstu(d, False),
    "mxrec::hstu_jagged_backward.equal": lambda d: _hstu(d, True),
    "mxrec::hstu_dense": lambda d: _hstu_dense(d, False),
    "mxrec::hstu_dense_backward": lambda d: _hstu_dense(d, True),
}
