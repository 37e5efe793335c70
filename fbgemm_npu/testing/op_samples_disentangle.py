"""Opcheck samples of the disentangle family (``mxrec::disentangle_attention`` and its
backward), merged into :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on
``device``, each pos_attr_type, both mask ranks, int64 and int32 positions (float32: opcheck's
gradient comparison of a traced backward against eager is then free of half roundings)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fbgemm_npu.testing.disentangle_inputs import disentangle_inputs, score_scale

Sample = tuple[tuple[Any, ...], dict[str, Any]]
_CASES = (("c2p|p2c", 4, torch.int64), ("c2p", 3, torch.int32), ("p2c", 4, torch.int64))


def _forward(d: str) -> list[Sample]:
    out = []
    for i, (kind, mask_dims, rel_dtype) in enumerate(_CASES):
        a = disentangle_inputs(2, 2, 5, 4, torch.float32, seed=i, mask_dims=mask_dims,
                               rel_dims=2 + i % 3, rel_dtype=rel_dtype)  # fmt: skip
        out.append(((*(t.to(d) for t in a), kind, score_scale(kind, 4)), {}))
    return out


def _backward(d: str) -> list[Sample]:
    out = []
    for i, (kind, mask_dims, rel_dtype) in enumerate(_CASES):
        a = disentangle_inputs(2, 2, 5, 4, torch.float32, seed=i, mask_dims=mask_dims,
                               rel_dtype=rel_dtype)  # fmt: skip
        a = [t.to(d) for t in a]
        c = score_scale(kind, 4)
        o, p, w = torch.ops.mxrec.disentangle_attention(*a, kind, c)
        g = torch.Generator().manual_seed(10 + i)
        go, gp, gw = (torch.randn(t.shape, generator=g).to(d) for t in (o, p, w))
        grads = (go, None, None) if i == 0 else (go, gp, gw) if i == 1 else (None, gp, None)
        mask = a[6] if i != 0 else None
        out.append(((*grads, *a[:6], mask, p, kind, c), {}))
    return out


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::disentangle_attention": _forward,
    "mxrec::disentangle_attention_backward": _backward,
}
