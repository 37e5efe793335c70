"""Pooled-embedding family on torchrec-shaped data: 26 features of dim 128, batch 2048 (a
``(2048, 3328)`` float32 pooled output, 27 MB), as an EmbeddingBagCollection produces it.

* ``permute_pooled_embs``: a random feature permutation.  ``[fresh]``: new index tensors each
  call (as torchrec's ``KeyedTensor.regroup`` builds them), so ours derives its plan every time;
  ``[module]``: the same index tensors each call (``PermutePooledEmbeddings``); ours derives
  its plan on every call too (a plan cached on the index tensors' data could go stale).
* ``regroup_keyed_tensor`` / ``permute_multi_embedding``: two KeyedTensors of 13 features,
  regrouped into 3 groups (odd features, even features, and 4 features used a second time), as
  ``KTRegroupAsDict`` does; ``permute_multi_embedding[module]`` reuses one ``permutes`` tensor.
  Ours keeps what host values decide per layout (``regroup_keyed_tensor``'s plan, the widths'
  table of ``permute_multi_embedding``): the ``[module]`` cases and ``regroup_keyed_tensor`` are
  counted warm (a training step's call), ``[fresh]`` with new index tensors (the plan derived).
* ``merge_pooled_embeddings`` / ``sum_reduce_to_one``: 4 shards of ``(2048, 832)``; on the CPU
  both sides are a concatenation / a sum (the cross-device copies only exist on npu).

Launches / syncs are one call on npu with the data checks on (the default); no case takes an
AI-CPU route or a stall of ours (docs/hardware.md).
"""

from __future__ import annotations

from typing import Any

import torch

from bench.harness import Case, seeded
from fbgemm_npu.native.fbgemm.pooled import merge, pooled
from fbgemm_npu.native.fbgemm.pooled import regroup as pooled_regroup

F = torch.ops.fbgemm
T, D, B = 26, 128, 2048
SHAPE = f"{T} x {D}, batch {B}"


def _permute_inputs(device: str) -> list[torch.Tensor]:
    gen = seeded()
    perm = torch.randperm(T, generator=gen)
    offsets = torch.arange(T + 1) * D
    x = torch.randn(B, T * D, generator=gen)
    return [t.to(device) for t in (x, offsets, perm, offsets.clone(), torch.argsort(perm))]


def _fresh(fn: Any) -> Any:
    """New index tensors each call (a clone: 27 int64 each, both sides pay it)."""
    return lambda a: fn(a[0], *(t.clone() for t in a[1:]))


def _same(fn: Any) -> Any:
    return lambda a: fn(*a)


def _keyed(device: str) -> dict[str, Any]:
    keys = [[f"f{k}" for k in range(13)], [f"f{k}" for k in range(13, 26)]]
    lengths = [[D] * 13, [D] * 13]
    groups = [
        [f"f{k}" for k in range(0, T, 2)],
        [f"f{k}" for k in range(1, T, 2)],
        ["f0", "f5", "f13", "f20"],
    ]
    gen = seeded()
    values = [torch.randn(B, 13 * D, generator=gen).to(device) for _ in keys]
    args = F.kt_regroup_arguments(values[0].cpu(), keys, lengths, groups)
    permutes = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    return {
        "values": values,
        "keys": keys,
        "lengths": lengths,
        "groups": groups,
        "permutes": permutes,
    }


def _regroup(fn: Any) -> Any:
    return lambda d: fn(d["values"], d["keys"], d["lengths"], d["groups"])


def _multi(fn: Any, fresh: bool) -> Any:
    def call(d: dict[str, Any]) -> Any:
        p = d["permutes"]
        permutes = p[0].clone() if fresh else p[0]
        return fn(d["values"], permutes, *p[1:])

    return call


def _shards(device: str) -> list[torch.Tensor]:
    gen = seeded()
    return [torch.randn(B, T * D // 4, generator=gen).to(device) for _ in range(4)]


def _primed(make: Any, call: Any) -> Any:
    """``make`` that, on npu, also runs ``call`` once first, as a module's second call does
    (this measures a warm call: the layouts ours keeps by host values are kept, nothing is
    cached on the index tensors' data)."""

    def primed(device: str) -> Any:
        inputs = make(device)
        if device != "cpu":
            call(inputs)
        return inputs

    return primed


def _merge(fn: Any) -> Any:
    return lambda ts: fn(ts, B, ts[0].device, 1)


def _sum(fn: Any) -> Any:
    return lambda ts: fn(ts, ts[0].device)


CASES = [
    Case(
        "pooled",
        "permute_pooled_embs[fresh]",
        _permute_inputs,
        _fresh(pooled.permute_pooled_embs_npu),
        _fresh(F.permute_pooled_embs),
        npu_call=_same(F.permute_pooled_embs),
        shape=SHAPE,
    ),
    Case(
        "pooled",
        "permute_pooled_embs[module]",
        _primed(_permute_inputs, _same(F.permute_pooled_embs)),
        _same(pooled.permute_pooled_embs_npu),
        _same(F.permute_pooled_embs),
        shape=SHAPE,
    ),
    Case(
        "pooled",
        "regroup_keyed_tensor",
        _primed(_keyed, _regroup(F.regroup_keyed_tensor)),
        _regroup(pooled_regroup.regroup_keyed_tensor_npu),
        _regroup(F.regroup_keyed_tensor),
        shape=f"{SHAPE}, 3 groups",
    ),
    Case(
        "pooled",
        "permute_multi_embedding[fresh]",
        _keyed,
        _multi(pooled_regroup.permute_multi_embedding_npu, True),
        _multi(F.permute_multi_embedding, True),
        npu_call=_multi(F.permute_multi_embedding, False),
        shape=f"{SHAPE}, 3 groups",
    ),
    Case(
        "pooled",
        "permute_multi_embedding[module]",
        _primed(_keyed, _multi(F.permute_multi_embedding, False)),
        _multi(pooled_regroup.permute_multi_embedding_npu, False),
        _multi(F.permute_multi_embedding, False),
        shape=f"{SHAPE}, 3 groups",
    ),
    Case(
        "pooled",
        "kt_regroup_arguments",
        _keyed,
        lambda d: pooled_regroup.kt_regroup_arguments_npu(
            d["values"][0], d["keys"], d["lengths"], d["groups"]
        ),
        lambda d: F.kt_regroup_arguments(d["values"][0], d["keys"], d["lengths"], d["groups"]),
        shape=f"{T} keys, 3 groups",
    ),
    Case(
        "pooled",
        "merge_pooled_embeddings",
        _shards,
        _merge(merge.merge_pooled_embeddings_npu),
        _merge(F.merge_pooled_embeddings),
        shape=f"4 x ({B}, {T * D // 4})",
    ),
    Case(
        "pooled",
        "sum_reduce_to_one",
        _shards,
        _sum(merge.sum_reduce_to_one_npu),
        _sum(F.sum_reduce_to_one),
        shape=f"4 x ({B}, {T * D // 4})",
    ),
]
