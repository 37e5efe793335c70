"""Opcheck samples of the FuXi HSTU family (``mxrec::hstu_fuxi`` and its backward),
merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]

# 3 sequences of lengths 2, 0, 3 (jagged), maxSeqLen 4, N 2, D 3; the normal layout: B 2, S 3
OFF, S, N, D = [0, 2, 2, 5], 4, 2, 3


def _randn(device: str, *shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


def _fuxi(d: str, backward: bool) -> list[Sample]:
    q, k, v = (_randn(d, 5, N, D, seed=i) for i in (1, 2, 3))
    ts, pos = _randn(d, 3, S, S, seed=4), _randn(d, 1, S, S, seed=5)
    mask = (_randn(d, 3, N, S, S, seed=6) > 0).float()
    jag = {"layout": "jagged", "maxSeqLen": S, "seqOffset": OFF}
    if backward:
        g1, g3 = _randn(d, 5, N, D, seed=7), _randn(d, 5, N, 3 * D, seed=8)
        return [
            ((g1, q, k, v), {"maxSeqLen": S, "seqOffset": OFF}),
            (
                (g3, q, k, v),
                {
                    "biasPosition": pos,
                    "biasTimestamp": ts,
                    "maxSeqLen": S,
                    "seqOffset": OFF,
                    "siluScale": 0.5,
                },
            ),
            ((g3, q, k, v, mask, pos, ts), {"maskType": 3, "maxSeqLen": S, "seqOffset": OFF}),
        ]
    qn, kn, vn = (_randn(d, 2, 3, N, D, seed=i) for i in (9, 10, 11))
    tsn, posn = _randn(d, 2, 3, 3, seed=12), _randn(d, 1, 3, 3, seed=13)
    return [
        ((q, k, v, ts, pos), jag),
        ((q, k, v), {"mask": mask, "maskType": 3, **jag}),
        ((q, k, v, ts, pos, mask), {"maskType": 2, "siluScale": 0.25, **jag}),
        ((qn, kn, vn, tsn, posn), {"maxSeqLen": 3}),
        ((q, k, v), jag),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::hstu_fuxi": lambda d: _fuxi(d, False),
    "mxrec::hstu_dense_backward_fuxi": lambda d: _fuxi(d, True),
}
