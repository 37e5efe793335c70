"""The pooled family against upstream where it is quiet or odd: index lists upstream's CPU kernel
accepts, the plan memo (in-place changes, pickling), the cross-device ops' placement rules, our
kernels on CPU tensors, the Meta kernel.  Expected values come from upstream's CPU kernels.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native.fbgemm.pooled import merge, pooled
from fbgemm_npu.native.fbgemm.pooled import regroup as pooled_regroup
from fbgemm_npu.testing.pooled_inputs import keyed, pooled_args, spread, to_npu

F = torch.ops.fbgemm
NPU = "npu"


def test_permute_pooled_memo_sees_in_place_changes() -> None:
    cpu = pooled_args(4, 3, 2)
    x, off, perm, inv_off, inv_perm = to_npu(cpu)
    F.permute_pooled_embs(x, off, perm, inv_off, inv_perm)
    perm.copy_(perm.flip(0))  # a new permutation, in place: the memoised plan is stale
    expected = F.permute_pooled_embs(cpu[0], cpu[1], cpu[2].flip(0), cpu[3], cpu[4])
    assert torch.equal(F.permute_pooled_embs(x, off, perm, inv_off, inv_perm).cpu(), expected)


def test_permute_pooled_upstream_accepted_forms_match() -> None:
    """Upstream's CPU kernel ignores offset_dim_list[0] and [-1], cuts only at the first T - 1
    offsets of a short permute, takes any dtype and rank >= 2, and returns empty input as is."""
    x = torch.arange(30.0).view(2, 15)
    perm = torch.tensor([2, 0, 1])
    forms = [
        [x, torch.tensor([3, 2, 5, 11]), perm],  # first offset not 0, last not the width
        [x, torch.tensor([0, 2, 5, 9, 15]), torch.tensor([1, 0])],  # short permute
        [x, torch.tensor([-3, 4, 20, 25]), perm],  # cut points past the width: empty blocks
        [x.to(torch.int32).view(2, 5, 3), torch.tensor([0, 1, 3, 5]), perm],  # int, 3-D
        [x.bool(), torch.tensor([0, 4, 4, 15]), perm],  # bool, an empty block
    ]
    for pooled_embs, off, p in forms:
        args = [pooled_embs, off, p, off, p]
        assert torch.equal(F.permute_pooled_embs(*to_npu(args)).cpu(), F.permute_pooled_embs(*args))
    empty = torch.zeros(0, 4, device=NPU)
    assert (
        F.permute_pooled_embs(empty, *to_npu([torch.tensor([0, 1]), torch.tensor([5])] * 2))
        is empty
    )


def test_sum_reduce_leaves_inputs_alone() -> None:
    ts = spread(3, 2, 3)
    before = [t.cpu() for t in ts]
    F.sum_reduce_to_one(ts, torch.device(NPU, 0))
    assert all(torch.equal(t.cpu(), b) for t, b in zip(ts, before, strict=True))


def test_all_to_one_device_returns_inputs_already_there() -> None:
    ts = spread(2, 2, 3)
    out = F.all_to_one_device(ts, torch.device(NPU, 0))
    assert out[0] is ts[0] and out[1] is not ts[1]


def test_target_without_index_is_the_current_device() -> None:
    ts = spread(2, 2, 3)
    assert F.merge_pooled_embeddings(ts, 2, torch.device(NPU)).device == torch.device(NPU, 0)


def test_merge_to_cpu_target() -> None:
    ts = spread(2, 2, 3)
    out = F.merge_pooled_embeddings(ts, 2, torch.device("cpu"), 0)
    assert out.device.type == "cpu" and torch.equal(out, torch.cat([t.cpu() for t in ts], 0))


def test_kernels_run_on_cpu_tensors() -> None:
    """Our kernels are device-generic: called directly on CPU tensors they agree with upstream."""
    args = pooled_args(5, 4, 3)
    assert torch.equal(pooled.permute_pooled_embs_npu(*args), F.permute_pooled_embs(*args))
    d = keyed(4, 3, 2)
    got = pooled_regroup.regroup_keyed_tensor_npu(d["values"], d["keys"], d["lengths"], d["groups"])
    up = F.regroup_keyed_tensor(d["values"], d["keys"], d["lengths"], d["groups"])
    assert all(torch.equal(a, b) for a, b in zip(got, up, strict=True))
    assert merge.KERNELS.keys() >= {"fbgemm::merge_pooled_embeddings"}


def test_meta_of_auto_grad_split() -> None:
    x = torch.empty(4, 10, device="meta")
    lists = [torch.empty(3, dtype=torch.int64, device="meta")] * 4
    assert F.permute_pooled_embs_auto_grad_split(x, *lists).shape == (4, 10)


def test_memoised_tensors_still_pickle() -> None:
    """The plan memo lives beside the index tensors, not in them: torch.save still works."""

    x, *lists = to_npu(pooled_args(3, 2, 2))
    F.permute_pooled_embs(x, *lists)


def test_permute_multi_embedding_with_no_rows_takes_int64_permutes_like_upstream() -> None:
    """With no rows upstream's CPU kernel never reads ``permutes`` (it accepts int64 then, and
    refuses it for a non-empty batch): ours returns the same empty outputs, launching nothing."""
    permutes = torch.tensor([[0, 0, 0, 0, 2, -1], [0, 1, 0, 0, 3, -1]])
    shapes = torch.tensor([0, 3])
    for rows in (0, 2):
        embs = [torch.ones(rows, 3)]
        try:
            expected = F.permute_multi_embedding(embs, permutes, shapes, shapes, [2, 3])
        except RuntimeError:
            expected = None
        args = [e.to(NPU) for e in embs], permutes.to(NPU), shapes.to(NPU), shapes.to(NPU)
        if expected is None:
            with pytest.raises(ValueError, match="argument 'permutes'"):
                F.permute_multi_embedding(*args, [2, 3])
            continue
        got = F.permute_multi_embedding(*args, [2, 3])
        assert (
            [tuple(g.shape) for g in got]
            == [tuple(e.shape) for e in expected]
            == [
                (0, 2),
                (0, 3),
            ]
        )
