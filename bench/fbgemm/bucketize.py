"""Bucketize family on torchrec-shaped data: 26 features x batch 2048, lengths uniform in 0..40
(mean 20, about 1.06M int64 ids), int32 lengths, the row-wise sharding input dist
(``bucketize_kjt_before_all2all``) for my_size 2 and 8: block sizes split a 10M-row table evenly,
ids mostly inside it, 1 in 20 past it or negative (the modulo path).  Pooled (sequence=False),
sequence with weights (an EmbeddingCollection's input dist), and the cyclic op.  Our kernels run
with the data check on (the default)."""

from __future__ import annotations

from typing import Any

import torch

from bench.harness import Case, seeded
from fbgemm_npu.native.fbgemm.bucketize import bucketize as ours

F = torch.ops.fbgemm
T, B, MAX_LEN, ROWS = 26, 2048, 40, 10_000_000


def _kjt(device: str, my_size: int) -> dict[str, Any]:
    gen = seeded()
    lengths = torch.randint(0, MAX_LEN + 1, (T * B,), generator=gen, dtype=torch.int32)
    n = int(lengths.sum())
    ids = torch.randint(0, ROWS, (n,), generator=gen, dtype=torch.int64)
    odd = torch.randint(0, 20, (n,), generator=gen) == 0
    ids = torch.where(odd, torch.randint(-ROWS, 2 * ROWS, (n,), generator=gen), ids)
    d = {
        "lengths": lengths,
        "indices": ids,
        "block_sizes": torch.full((T,), (ROWS + my_size - 1) // my_size, dtype=torch.int64),
        "weights": torch.rand(n, generator=gen),
    }
    return {k: v.to(device) for k, v in d.items()}


def _block(fn: Any, my_size: int, sequence: bool, weights: bool) -> Any:
    def call(d: dict[str, Any]) -> Any:
        return fn(
            d["lengths"],
            d["indices"],
            False,
            sequence,
            d["block_sizes"],
            my_size,
            d["weights"] if weights else None,
        )

    return call


def _cyclic(fn: Any, my_size: int) -> Any:
    return lambda d: fn(d["lengths"].long(), d["indices"], False, my_size, None)


def _cases() -> list[Case]:
    shape = f"{T} features x {B}, len 0..{MAX_LEN}"
    cases = []
    for p in (2, 8):
        for sequence, weights, name in ((False, False, "pooled"), (True, True, "seq_weighted")):
            cases.append(
                Case(
                    "bucketize",
                    f"block_bucketize_sparse_features/{name}/my_size={p}",
                    lambda dev, p=p: _kjt(dev, p),
                    _block(ours.block_bucketize_sparse_features_npu, p, sequence, weights),
                    _block(F.block_bucketize_sparse_features, p, sequence, weights),
                    shape=shape,
                )
            )
    cases.append(
        Case(
            "bucketize",
            "bucketize_sparse_features/my_size=8",
            lambda dev: _kjt(dev, 8),
            _cyclic(ours.bucketize_sparse_features_npu, 8),
            _cyclic(F.bucketize_sparse_features, 8),
            shape=shape,
        )
    )
    return cases


CASES = _cases()
