"""Permute family on torchrec-shaped data: 26 features x batch 2048, lengths uniform in 0..40
(mean 20, about 1.06M values), the shape KeyedJaggedTensor.permute sees; permute_2D with and
without weights and with and without ``permuted_lengths_sum`` (torchrec passes it), int32 lengths
and once int64; expand_into_jagged_permute in int64 and int32.  Our kernels run with the data
checks on (the default)."""

from __future__ import annotations

from typing import Any

import torch

from bench.harness import Case, seeded
from fbgemm_npu.native.fbgemm.permute import permute as ours

F = torch.ops.fbgemm
T, B, MAX_LEN = 26, 2048, 40


def _sparse(
    device: str, weights: bool, given: bool, dtype: torch.dtype = torch.int32
) -> dict[str, Any]:
    gen = seeded()
    lengths = torch.randint(0, MAX_LEN + 1, (T, B), generator=gen, dtype=dtype)
    n = int(lengths.sum())
    perm = torch.randperm(T, generator=gen).to(torch.int32)
    d: dict[str, Any] = {
        "permute": perm,
        "lengths": lengths,
        "values": torch.randint(0, 2**31 - 1, (n,), generator=gen, dtype=torch.int64),
        "weights": torch.rand(n, generator=gen) if weights else None,
        "permuted_lengths_sum": n if given else None,
    }
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in d.items()}


def _p2d(fn: Any) -> Any:
    return lambda d: fn(
        d["permute"], d["lengths"], d["values"], d["weights"], d["permuted_lengths_sum"]
    )


def _p1d(fn: Any) -> Any:
    # one segment per (feature, sample), shuffled: the variable-batch path of torchrec
    def call(d: dict[str, Any]) -> Any:
        return fn(d["perm1d"], d["lengths"].view(-1), d["values"], d["weights"], None)

    return call


def _make_1d(device: str) -> dict[str, Any]:
    d = _sparse(device, weights=True, given=False)
    d["perm1d"] = torch.randperm(T * B, generator=seeded(1)).to(torch.int32).to(device)
    return d


def _expand_inputs(device: str, dtype: torch.dtype = torch.int64) -> dict[str, Any]:
    gen = seeded()
    lengths = torch.randint(0, MAX_LEN + 1, (T * B,), generator=gen)
    perm = torch.randperm(T * B, generator=gen)
    zero = torch.zeros(1, dtype=torch.int64)
    d = {
        "permute": perm,
        "input_offset": torch.cat([zero, lengths.cumsum(0)]),
        "output_offset": torch.cat([zero, lengths[perm].cumsum(0)]),
    }
    out = {k: v.to(dtype).to(device) for k, v in d.items()}
    out["output_size"] = int(lengths.sum())
    return out


def _expand(fn: Any) -> Any:
    return lambda d: fn(d["permute"], d["input_offset"], d["output_offset"], d["output_size"])


SHAPE = f"{T}x{B}, len 0..{MAX_LEN}"
CASES = [
    Case(
        "permute",
        f"permute_2D_sparse_data{'_weighted' if w else ''}{'_pls' if g else ''}",
        lambda dev, w=w, g=g: _sparse(dev, w, g),
        _p2d(ours.permute_2D_sparse_data_npu),
        _p2d(F.permute_2D_sparse_data),
        shape=SHAPE + (", weights" if w else "") + (", length sum given" if g else ""),
    )
    for w in (False, True)
    for g in (False, True)
] + [
    Case(
        "permute",
        "permute_2D_sparse_data_weighted_pls_int64",
        lambda dev: _sparse(dev, True, True, torch.int64),
        _p2d(ours.permute_2D_sparse_data_npu),
        _p2d(F.permute_2D_sparse_data),
        shape=SHAPE + ", weights, length sum given, int64 lengths",
    ),
    Case(
        "permute",
        "permute_sparse_features_weighted",
        lambda dev: _sparse(dev, True, False),
        lambda d: ours.permute_sparse_features_npu(
            d["permute"], d["lengths"].long(), d["values"], d["weights"]
        ),
        lambda d: F.permute_sparse_features(
            d["permute"], d["lengths"].long(), d["values"], d["weights"]
        ),
        shape=SHAPE + ", weights",
    ),
    Case(
        "permute",
        "permute_1D_sparse_data_weighted",
        _make_1d,
        _p1d(ours.permute_1D_sparse_data_npu),
        _p1d(F.permute_1D_sparse_data),
        shape=f"{T * B} segments shuffled, weights",
    ),
    Case(
        "permute",
        "invert_permute",
        lambda dev: torch.randperm(T * B, generator=seeded()).to(dev),
        ours.invert_permute_npu,
        F.invert_permute,
        shape=f"permute[{T * B}] int64",
    ),
    Case(
        "permute",
        "expand_into_jagged_permute",
        _expand_inputs,
        _expand(ours.expand_into_jagged_permute_npu),
        _expand(F.expand_into_jagged_permute),
        shape=f"{T * B} segments shuffled",
    ),
    Case(
        "permute",
        "expand_into_jagged_permute_int32",
        lambda dev: _expand_inputs(dev, torch.int32),
        _expand(ours.expand_into_jagged_permute_npu),
        _expand(F.expand_into_jagged_permute),
        shape=f"{T * B} segments shuffled, int32",
    ),
]
