"""Inputs of the pooled family's tests: PermutePooledEmbeddings' index lists, KeyedTensors to
regroup, pooled outputs spread over two npu devices.  Built on the CPU; :func:`to_npu` moves
them (:func:`spread` makes them on the devices).  And the fuzz tests' references and programs."""

from __future__ import annotations

import math
from typing import Any

import torch

from fbgemm_npu.testing.counters import Counter

__all__ = [
    "WRITES",
    "call_write_call",
    "cross_device_call",
    "cross_device_reference",
    "keyed",
    "kt_permute_args",
    "multi_reference",
    "our_stalls",
    "pooled_args",
    "regroup_reference",
    "spread",
    "to_npu",
]

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


def our_stalls(c: Counter) -> list[str]:
    """The host stalls a 910B would add to the counted call, but a data check's own
    ``_assert_async`` (the checks' machinery, native/_checks.py, not the kernels')."""
    return [e.name for e in c.events if e.stall is not None and "_assert_async" not in e.name]


# --- programs and references of the fuzz tests (tests/fuzz/test_fuzz_pooled.py) --------------


def multi_reference(
    pooled_embs: list[torch.Tensor],
    permutes: torch.Tensor,
    in_shapes: torch.Tensor,
    out_shapes: torch.Tensor,
    out_lengths: list[int],
    reverse: bool = False,
) -> list[torch.Tensor]:
    """``permute_multi_embedding(_function)`` row by row: ``out[o][:, oo:oo+n] =
    in[i][:, io:io+n]`` for each row ``[i, o, io, oo, n, next]``; ``reverse`` adds back (a key
    read twice gets the sum), columns no row writes are 0.  Inputs are read as ``(B, -1)`` from
    their first ``B = pooled_embs[0].size(0)`` rows; differentiable (slices and adds)."""
    b = pooled_embs[0].shape[0]
    xs = [t[:b].reshape(b, math.prod(t.shape[1:])) for t in pooled_embs]
    outs = [xs[0].new_zeros((b, n)) for n in out_lengths]
    if outs:  # every input in the graph: the gradient of a column no row reads is 0, not None
        outs[0] = outs[0] + sum(x[:, :0].sum() for x in xs)
    for i, o, io, oo, n, _ in permutes.tolist():
        if reverse:
            outs[i] = outs[i].index_add(1, torch.arange(io, io + n), xs[o][:, oo : oo + n])
        else:
            outs[o] = outs[o].index_copy(1, torch.arange(oo, oo + n), xs[i][:, io : io + n])
    return outs


def regroup_reference(
    pooled_embs: list[torch.Tensor],
    keys: list[list[str]],
    lengths: list[list[int]],
    groups: list[list[str]],
) -> list[torch.Tensor]:
    """``regroup_keyed_tensor``: upstream's ``kt_regroup_arguments`` rows, then
    :func:`multi_reference`."""
    permutes, in_shapes, out_shapes, out_lengths = F.kt_regroup_arguments(
        torch.zeros(1), keys, lengths, groups
    )
    return multi_reference(pooled_embs, permutes, in_shapes, out_shapes, list(out_lengths))


def _resolved(target: torch.device | str) -> torch.device:
    target = torch.device(target)
    if target.type != "cpu" and target.index is None:
        return torch.device(target.type, torch.npu.current_device())
    return target


def cross_device_call(
    op: str, tensors: list[torch.Tensor], target: torch.device | str, *rest: int
) -> tuple[Any, bool, bool]:
    """``fbgemm::<op>(tensors, [uncat_dim_size,] target, [cat_dim])`` and two facts a value
    comparison cannot see: every output lies on ``target``, and none shares memory with an
    input (the schemas declare no alias)."""
    fn = getattr(F, op)
    out = (
        fn(tensors, rest[0], target, *rest[1:])
        if op == "merge_pooled_embeddings"
        else fn(tensors, target)
    )
    outs = out if isinstance(out, list) else [out]
    on_target = all(o.device == _resolved(target) for o in outs)
    ptrs = {t.untyped_storage().data_ptr() for t in tensors if t.numel()}
    fresh = not any(o.untyped_storage().data_ptr() in ptrs for o in outs if o.numel())
    return out, on_target, fresh


def cross_device_reference(
    op: str, tensors: list[torch.Tensor], target: torch.device | str, *rest: int
) -> tuple[Any, bool, bool]:
    """Upstream's CPU kernel of ``op`` with a CPU target (the values; its CPU
    ``all_to_one_device`` returns the inputs themselves, here copies)."""
    cpu = torch.device("cpu")
    if op == "merge_pooled_embeddings":
        return F.merge_pooled_embeddings(tensors, rest[0], cpu, *rest[1:]), True, True
    if op == "all_to_one_device":
        return [t.clone() for t in F.all_to_one_device(tensors, cpu)], True, True
    return F.sum_reduce_to_one(tensors, cpu), True, True


WRITES = ("copy_", ".data", "storage")  # the version counter sees only the first


def call_write_call(
    op: str, args: list[Any], index: int, new: torch.Tensor, how: str
) -> tuple[Any, Any]:
    """``fbgemm::<op>(*args)``, a write of ``new`` into ``args[index]`` (``how``: one of
    :data:`WRITES`), the op again: a plan derived from the data must follow the write."""
    fn = getattr(F, op)
    first = fn(*args)
    t, new = args[index], new.to(args[index].device)
    if how == "copy_":
        t.copy_(new)
    elif how == ".data":
        t.data.copy_(new)
    else:
        t.untyped_storage().copy_(new.contiguous().untyped_storage())
    return first, fn(*args)
