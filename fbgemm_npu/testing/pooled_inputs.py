"""Inputs of the pooled family's tests: PermutePooledEmbeddings' index lists, KeyedTensors to
regroup, pooled outputs spread over two npu devices.  Built on the CPU; :func:`to_npu` moves
them (:func:`spread` makes them on the devices)."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["keyed", "kt_permute_args", "pooled_args", "spread", "to_npu"]

F = torch.ops.fbgemm


def to_npu(values: list[Any], device: str = "npu") -> list[Any]:
    """Every tensor of ``values`` (nested lists too) on ``device``; anything else as it is."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, list):
            out.append(to_npu(v, device))
        else:
            out.append(v.to(device) if isinstance(v, torch.Tensor) else v)
    return out


def pooled_args(n_feat: int, dim: int, batch: int, seed: int = 0) -> list[torch.Tensor]:
    """PermutePooledEmbeddings' arguments for mixed dims (dim, dim // 2, ...): ``[pooled_embs,
    offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list]``."""
    gen = torch.Generator().manual_seed(seed)
    dims = [dim // (1 + k % 2) for k in range(n_feat)]
    perm = torch.randperm(n_feat, generator=gen)
    offsets = torch.tensor([0, *torch.tensor(dims).cumsum(0).tolist()])
    inv_dims = torch.tensor(dims)[perm]
    inv_offsets = torch.tensor([0, *inv_dims.cumsum(0).tolist()])
    x = torch.randn(batch, sum(dims), generator=gen)
    return [x, offsets, perm, inv_offsets, torch.argsort(perm)]


def keyed(n_feat: int, dim: int, batch: int, inputs: int = 2, groups: int = 3) -> dict[str, Any]:
    """KeyedTensors to regroup: ``inputs`` (1 or 2) of about ``n_feat / inputs`` keys of width
    ``dim``, regrouped into ``groups`` (1 or 3; the third group repeats two keys)."""
    half = n_feat if inputs == 1 else n_feat // 2 or 1
    keys = [[f"a{k}" for k in range(half)], [f"b{k}" for k in range(n_feat - half)]][:inputs]
    lengths = [[dim] * len(ks) for ks in keys]
    flat = [k for ks in keys for k in ks]
    chosen = [flat[0::2], flat[1::2], flat[:2]] if groups == 3 else [flat[::-1]]
    gen = torch.Generator().manual_seed(n_feat)
    values = [torch.randn(batch, dim * len(ks), generator=gen) for ks in keys]
    return {"values": values, "keys": keys, "lengths": lengths, "groups": chosen}


def kt_permute_args(d: dict[str, Any]) -> list[Any]:
    """Upstream's ``kt_regroup_arguments`` of :func:`keyed`'s output, on the CPU."""
    return list(F.kt_regroup_arguments(d["values"][0], d["keys"], d["lengths"], d["groups"]))


def spread(n: int, batch: int, dim: int, devices: tuple[int, ...] = (0, 1)) -> list[torch.Tensor]:
    """``n`` pooled outputs ``(batch, dim)``, the k-th on ``npu:devices[k % len(devices)]``."""
    gen = torch.Generator().manual_seed(n)
    return [
        torch.randn(batch, dim, generator=gen).to(f"npu:{devices[k % len(devices)]}")
        for k in range(n)
    ]
