"""Opcheck samples of the HSTU v2 family (``mxrec::hstu_forward_v2`` / ``hstu_backward_v2``),
found by :mod:`fbgemm_npu.testing.op_samples`: small valid calls built fresh on ``device``.

3 batches: q lengths 1, 0, 2 against k lengths 2, 1, 3 (max 2 / 3), GQA 4 / 2 heads, D_qk 3,
D_v 5 (Rec SDK's kernel wants multiples of 16 and MHA; the shared core does not)."""

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


def _parts(d: str) -> dict[str, Any]:
    af = [[[0, 1, 0, 0], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 0]], [[0, 1, 1, 2], [0, 3, 0, 0]]]
    return {
        "q": _randn(d, 3, 4, 3, seed=1),
        "k": _randn(d, 6, 2, 3, seed=2),
        "v": _randn(d, 6, 2, 5, seed=3),
        "grad": _randn(d, 3, 4, 5, seed=4),
        "rab": _randn(d, 3, 4, 2, 3, seed=5),
        "mask": (_randn(d, 3, 4, 2, 3, seed=6) > 0).float(),
        "off_q": _t([0, 1, 1, 3], d),
        "off_k": _t([0, 2, 3, 6], d, torch.int64),
        "counts": {"num_context": _t([0, 0, 1], d), "num_target": _t([0, 0, 1], d)},
        "af": _t(af, d).view(3, 1, 2, 4),
    }


def _forward(d: str) -> list[Sample]:
    x = _parts(d)
    qkv = (x["q"], x["k"], x["v"])
    sizes = {"max_seq_len": 2, "max_seq_len_k": 3, "seq_offset": x["off_q"]}
    sizes["seq_offset_k"] = x["off_k"]
    return [
        (qkv, sizes),
        (qkv, {"rab": x["rab"], "alpha": 0.5, "silu_scale": 0.25, **sizes}),
        (qkv, {"target_group_size": 1, **x["counts"], **sizes}),
        (qkv, {"window_size_left": 1, "window_size_right": 0, **sizes}),
        (qkv, {"arbitrary_func": x["af"], **sizes}),
        (qkv, {"mask": x["mask"], "mask_type": 3, **sizes}),
    ]


def _backward(d: str) -> list[Sample]:
    x = _parts(d)
    lead = (x["grad"], x["q"], x["k"], x["v"], 2, 3, x["off_q"], x["off_k"])
    return [
        (lead, {}),
        (lead, {"rab": x["rab"], "alpha": 0.5, "scale": 0.25, "window_size_right": 0}),
        (lead, {"window_size_right": 0, **x["counts"]}),
        (lead, {"arbitrary_func": x["af"]}),
    ]


BUILDERS: dict[str, Callable[[str], list[Sample]]] = {
    "mxrec::hstu_forward_v2": _forward,
    "mxrec::hstu_backward_v2": _backward,
}
