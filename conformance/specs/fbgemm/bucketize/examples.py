"""Edge cases every run of the bucketize specs checks, besides the drawn inputs: upstream's docs
example, a torchrec-shaped batch, negative ids, empty inputs, zero-size blocks, every optional
argument, and inputs upstream rejects."""

from __future__ import annotations

from typing import Any

import torch

from conformance.harness import TensorView
from conformance.specs.fbgemm.bucketize.inputs import W1D, W2D, gen, ints, real

I32, I64 = torch.int32, torch.int64


def _t(values: list[int], dtype: torch.dtype = I64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def _torchrec_shaped() -> dict[str, Any]:
    """26 features x 64, lengths 0..40 (mean 20), ids up to 10**6 split over 8 buckets."""
    g = gen(7)
    rows = ints(26 * 64, 0, 41, I64, g)
    return {
        "lengths": rows.to(I32),
        "indices": ints(int(rows.sum()), 0, 10**6, I64, g),
        "bucketize_pos": False,
        "sequence": True,
        "my_size": 8,
        "block_sizes": torch.full((26,), 10**6 // 8 + 1, dtype=I64),
    }


def block_examples(op: str) -> tuple[dict[str, Any], ...]:
    """Edge cases of the block op ``op`` (its name: ``_inference`` and ``_2d_weights`` add
    their own arguments)."""
    lengths = _t([0, 2, 1, 3, 2, 3, 3, 1], I32)
    x = _t([3, 4, 15, 11, 28, 29, 1, 10, 11, 12, 13, 11, 22, 20, 20], I32)
    base = {
        "lengths": lengths,
        "indices": x,
        "bucketize_pos": True,
        "sequence": True,
        "block_sizes": _t([5, 15, 10, 20], I32),
        "my_size": 2,
    }
    neg64 = {
        **base,
        "indices": torch.cat([-x[:5], x[5:]]).to(I64) * (2**40),
        "block_sizes": base["block_sizes"].to(I64),
        "my_size": 5,
    }
    boundaries = [
        _t([0, 2, 8], I32),
        _t([0, 5, 30], I32),
        _t([0, 10, 20], I32),
        _t([0, 15, 40], I32),
    ]
    cases: list[dict[str, Any]] = [
        base,
        _torchrec_shaped(),
        {**base, "indices": -x, "my_size": 3},
        neg64,
        {**base, "lengths": _t([0] * 8, I64), "indices": _t([], I32)},  # no indices at all
        {**base, "lengths": _t([], I32), "indices": _t([], I32)},  # empty batch
        {**base, "block_sizes": _t([0, 3, 0, 4], I32), "my_size": 3},  # zero-size blocks
        {**base, "keep_orig_idx": True},
        {**base, "keep_orig_idx_per_feature": torch.tensor([True, False, True, False])},
        {**base, "batch_size_per_feature": _t([1, 3, 0, 4], I32), "max_B": 4},  # VBE
        {**base, "total_num_blocks": _t([2, 4, 6, 2], I32)},
        {**base, "block_bucketize_pos": boundaries},
        {
            **base,
            "block_sizes": _t([0, 15, 0, 20], I32),
            "total_num_blocks": _t([4, 2, 6, 2], I32),
            "block_bucketize_pos": [*boundaries[:2], _t([0, 10], I32), _t([0], I32)],
        },
        {**base, "block_bucketize_pos": []},  # an empty list means uniform blocks
        {**base, "indices": TensorView(torch.stack([x, x], 1), lambda b: b[:, 1], "column 1")},
        {**base, "lengths": _t([0, 2, -1, 3, 2, 3, 3, 1], I32)[:0], "indices": x[:0]},
        {**base, "block_sizes": base["block_sizes"].to(I64)},  # upstream rejects: dtypes differ
        {**base, "indices": x[:10]},  # upstream rejects: lengths sum to 15
        {**base, "total_num_blocks": _t([3, 4, 6, 2], I32)},  # upstream rejects: 3 % 2 != 0
    ]
    if op.endswith("_inference"):
        cases += [
            {**base, "return_bucket_mapping": True},
            {**base, "sequence": False, "return_bucket_mapping": True},
        ]
    if op.endswith("_2d_weights"):
        for c in cases:
            n = real(c["indices"]).numel()
            c["weights"], c["weights_dim"] = torch.randn(n, 3, generator=gen(n)), 3
        cases += [{**base, "weights": torch.randn(15, 2).to(d), "weights_dim": 2} for d in W2D]
        cases += [{**base, "weights": torch.randn(30), "weights_dim": 2}]  # flat, as upstream
    else:
        cases += [{**base, "weights": torch.randn(15).to(d)} for d in W1D]
        cases += [{**base, "weights": torch.ones(15, dtype=torch.float16)}]  # upstream rejects
    return tuple(cases)


def cyclic_examples() -> tuple[dict[str, Any], ...]:
    """Edge cases of ``bucketize_sparse_features``."""
    x = _t([3, 4, 15, 11, 28, 29, 1, 10, 11, 12, 13, 11, 22, 20, 20])
    base = {
        "lengths": _t([0, 2, 1, 3, 2, 3, 3, 1]),
        "indices": x,
        "bucketize_pos": True,
        "my_size": 3,
    }
    return (
        base,
        {**base, "weights": torch.randn(15)},
        {**base, "indices": -x * 2**40, "my_size": 7},
        {**base, "lengths": base["lengths"].int(), "indices": x.int() - 20, "my_size": 2},
        {**base, "lengths": _t([]), "indices": _t([])},
        {**base, "lengths": _t([0, 0]), "indices": _t([]), "weights": torch.randn(0)},
        {**base, "lengths": base["lengths"].int()},  # upstream rejects: dtypes differ
        {**base, "weights": torch.randn(15, dtype=torch.float64)},  # upstream rejects
        {**base, "indices": x[:12]},  # upstream rejects: lengths sum to 15
    )
