"""The pooled family against upstream where it is quiet or odd: index lists upstream's CPU kernel
accepts, no plan outliving a write to its index tensors (any write: in place, through
``.data`` or the storage), saving them, the cross-device ops' placement rules, our
kernels on CPU tensors, the Meta kernel.  Expected values come from upstream's CPU kernels.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
import torch

from fbgemm_npu.native.fbgemm.pooled import merge, pooled
from fbgemm_npu.native.fbgemm.pooled import regroup as pooled_regroup
from fbgemm_npu.testing.pooled_inputs import keyed, kt_permute_args, pooled_args, spread, to_npu

F = torch.ops.fbgemm
NPU = "npu"


# Every way to change a tensor's data: the ones autograd's version counter sees and the ones it
# does not (``.data``, a raw storage copy, a new ``.data``); no plan derived from the data may
# outlive any of them.
WRITES: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {
    "in place": lambda t, new: t.zero_().add_(new),
    "copy_": lambda t, new: t.copy_(new),
    "through a view": lambda t, new: t.view(-1).__setitem__(slice(None), new.view(-1)),
    "under no_grad": lambda t, new: _no_grad_copy(t, new),
    "through .data": lambda t, new: t.data.copy_(new),
    ".data replaced": lambda t, new: setattr(t, "data", new.clone()),
    "through the storage": lambda t, new: t.untyped_storage().copy_(new.untyped_storage()),
}


def _no_grad_copy(t: torch.Tensor, new: torch.Tensor) -> None:
    with torch.no_grad():
        t.copy_(new)


# Two regroupings of the same keys with the same output widths ([5, 4]) in another order.
_KEYS, _LENGTHS = [["a", "b"], ["c", "d"]], [[2, 2], [3, 2]]
_GROUPS = ([["c", "a"], ["d", "b"]], [["a", "c"], ["b", "d"]])


@pytest.mark.parametrize("source", ["upstream", "ours"])
@pytest.mark.parametrize("write", list(WRITES))
def test_permute_multi_embedding_follows_every_write_to_permutes(write: str, source: str) -> None:
    """After any write to ``permutes`` (from upstream's kt_regroup_arguments, moved to npu, or
    from ours on npu) the next call regroups by the new rows, as upstream's does."""
    embs = [torch.randn(3, 4), torch.randn(3, 5)]
    before, after = (F.kt_regroup_arguments(embs[0], _KEYS, _LENGTHS, g) for g in _GROUPS)
    embs_npu = to_npu(embs)
    if source == "ours":
        permutes = F.kt_regroup_arguments(embs_npu[0], _KEYS, _LENGTHS, _GROUPS[0])[0]
    else:
        permutes = before[0].to(NPU)
    shapes = to_npu([before[1], before[2]])
    for rows in (before[0], after[0]):
        if rows is after[0]:
            WRITES[write](permutes, after[0].to(NPU))
        expected = F.permute_multi_embedding(embs, rows, before[1], before[2], before[3])
        got = F.permute_multi_embedding(embs_npu, permutes, *shapes, before[3])
        assert all(torch.equal(a.cpu(), b) for a, b in zip(got, expected, strict=True))


@pytest.mark.parametrize("write", list(WRITES))
def test_permute_pooled_embs_follows_every_write_to_its_lists(write: str) -> None:
    cpu = pooled_args(4, 3, 2)
    x, off, perm, inv_off, inv_perm = to_npu(cpu)
    F.permute_pooled_embs(x, off, perm, inv_off, inv_perm)
    WRITES[write](perm, perm.flip(0))
    expected = F.permute_pooled_embs(cpu[0], cpu[1], cpu[2].flip(0), cpu[3], cpu[4])
    assert torch.equal(F.permute_pooled_embs(x, off, perm, inv_off, inv_perm).cpu(), expected)
    new_off = torch.tensor([0, 1, 1, 4, 6])  # other cut points, written into offset_dim_list
    WRITES[write](off, new_off.to(NPU))
    expected = F.permute_pooled_embs(cpu[0], new_off, cpu[2].flip(0), cpu[3], cpu[4])
    assert torch.equal(F.permute_pooled_embs(x, off, perm, inv_off, inv_perm).cpu(), expected)


def test_index_tensors_can_still_be_swapped() -> None:
    """Nothing holds a reference to the index tensors after a call: ``swap_tensors`` (what
    ``Module._apply`` uses under ``torch.__future__.set_swap_module_params_on_conversion``)
    works on them."""
    x, off, perm, inv_off, inv_perm = to_npu(pooled_args(3, 2, 2))
    F.permute_pooled_embs(x, off, perm, inv_off, inv_perm)
    d = keyed(4, 3, 2)
    permutes, in_shapes, out_shapes, out_lengths = to_npu(kt_permute_args(d))
    F.permute_multi_embedding(to_npu(d["values"]), permutes, in_shapes, out_shapes, out_lengths)
    torch.utils.swap_tensors(perm, perm.clone())
    torch.utils.swap_tensors(permutes, permutes.clone())


def test_permute_pooled_upstream_accepted_forms_match() -> None:
    """Upstream's CPU kernel ignores offset_dim_list[0] and [-1], cuts only at the first T - 1
    offsets of a short permute, takes any dtype and rank >= 2, and returns empty input unchecked
    (upstream the input itself; ours a fresh empty tensor: no output aliases an input)."""
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
    out = F.permute_pooled_embs(empty, *to_npu([torch.tensor([0, 1]), torch.tensor([5])] * 2))
    assert out.shape == empty.shape and out.device == empty.device
    assert out is not empty and out._base is None  # a tensor of its own, not a view


def test_sum_reduce_leaves_inputs_alone() -> None:
    ts = spread(3, 2, 3)
    before = [t.cpu() for t in ts]
    F.sum_reduce_to_one(ts, torch.device(NPU, 0))
    assert all(torch.equal(t.cpu(), b) for t, b in zip(ts, before, strict=True))


def test_all_to_one_device_never_aliases_an_input() -> None:
    """An input already on the target comes back as a copy (the schema declares no alias),
    strides kept; writing the output leaves the input alone."""
    ts = spread(2, 2, 3)
    ts[0] = ts[0].t()  # npu:0, transposed
    out = F.all_to_one_device(ts, torch.device(NPU, 0))
    assert out[0].untyped_storage().data_ptr() != ts[0].untyped_storage().data_ptr()
    assert out[0].stride() == ts[0].stride() and torch.equal(out[0].cpu(), ts[0].cpu())
    before = ts[0].cpu()
    out[0].fill_(7.0)
    assert torch.equal(ts[0].cpu(), before)
    assert out[1].device == torch.device(NPU, 0) and torch.equal(out[1].cpu(), ts[1].cpu())


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


def test_index_tensors_still_save_and_load_after_a_call() -> None:
    """A call leaves nothing on or beside its index tensors: torch.save / torch.load of them (and
    of the module state that holds them) work unchanged."""
    x, *lists = to_npu(pooled_args(3, 2, 2))
    F.permute_pooled_embs(x, *lists)
    buffer = io.BytesIO()
    torch.save(lists, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(loaded, lists, strict=True))


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


@pytest.mark.parametrize("mode", ["fake", "symbolic"])
def test_regroup_keyed_tensor_traces(mode: str) -> None:
    """The host plan of regroup_keyed_tensor is checked in plain Python, so tracing with fake
    tensors (torch.compile, AOTAutograd) neither guards on faked data nor loses the checks: the
    traced graph gives upstream's values, and a bad ``lengths`` is still refused while tracing."""
    from torch.fx.experimental.proxy_tensor import make_fx

    d = keyed(4, 3, 2)
    args = (d["keys"], d["lengths"], d["groups"])
    traced = make_fx(lambda vs: F.regroup_keyed_tensor(vs, *args), tracing_mode=mode)
    got = traced(to_npu(d["values"]))(to_npu(d["values"]))
    up = F.regroup_keyed_tensor(d["values"], *args)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(got, up, strict=True))
    bad = [[4, 3], d["lengths"][1]]  # wider than pooled_embs[0]
    with pytest.raises(ValueError, match="regroup_keyed_tensor: argument 'lengths' gives row"):
        regroup = lambda vs: F.regroup_keyed_tensor(vs, d["keys"], bad, d["groups"])  # noqa: E731
        make_fx(regroup, tracing_mode=mode)(to_npu(d["values"]))
