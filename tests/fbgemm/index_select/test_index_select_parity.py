"""The index-select family beside upstream: the quirks of upstream's CPU kernels we match, what we
accept that it refuses, gradients beyond the conformance specs, the kernels called directly on CPU
tensors, and the dispatch keys the family registers.  Expected values come from upstream's CPU
kernels or from the conformance references, never from our kernels.
"""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native.fbgemm.index_select import batch as batch_index_select
from fbgemm_npu.native.fbgemm.index_select import index_select, ranges, unique
from fbgemm_npu.testing.index_select_inputs import (
    HASH_SIZE_CUMSUM,
    HASH_SIZE_OFFSETS,
    INDICES,
    INPUT_OFFSETS,
    KEYED_LENGTHS,
    KEYED_OFFSETS,
    KEYED_VALUES,
    LENGTHS,
    OUTPUT_OFFSETS,
    TABLES,
    UNIQUE_INDICES,
    UNIQUE_OFFSETS,
    VALUES,
    generator,
    keyed_reference,
    to_npu,
    unique_reference,
)

F = torch.ops.fbgemm
NPU = "npu"


def test_upstream_quirks_matched() -> None:
    a, b = torch.arange(12.0).view(4, 3), torch.arange(20.0).view(5, 2, 2)
    ia = torch.tensor([3, 0])
    # fewer index tensors than inputs: one output per index tensor
    ours = F.group_index_select_dim0([a.to(NPU), b.to(NPU)], [ia.to(NPU)])
    theirs = F.group_index_select_dim0([a, b], [ia])
    assert len(ours) == len(theirs) == 1 and torch.equal(ours[0].cpu(), theirs[0])
    # batch_size <= 0: every segment is empty
    for bs in (0, -2):
        got = F.segment_sum_csr(bs, torch.tensor([0, 1, 3], device=NPU), torch.ones(6, device=NPU))
        assert torch.equal(got.cpu(), F.segment_sum_csr(bs, torch.tensor([0, 1, 3]), torch.ones(6)))
    # a truncated jagged_index_select_2d_forward_v2 output
    args = (VALUES, INDICES, INPUT_OFFSETS, OUTPUT_OFFSETS)
    got = F.jagged_index_select_2d_forward_v2(*to_npu(*args), 4)
    assert torch.equal(got.cpu(), F.jagged_index_select_2d_forward_v2(*args, 4))


def test_misaligned_inputs_accepted() -> None:
    """Upstream's CPU batch_index_select_dim0 refuses inputs not 16-byte aligned; ours gathers."""
    flat = torch.arange(19.0)
    with pytest.raises(RuntimeError, match="16-byte align"):
        F.batch_index_select_dim0(flat[1:], torch.tensor([2, 0]), [2], [6], [3])
    ours = F.batch_index_select_dim0(
        flat.to(NPU)[1:], torch.tensor([2, 0], device=NPU), [2], [6], [3]
    )
    assert ours.cpu().tolist() == [7.0, 8.0, 9.0, 1.0, 2.0, 3.0]


# ---- gradients (beyond the conformance specs) --------------------------------------------------


def test_jagged_index_select_gradient_sums_repeats() -> None:
    values = torch.randn(6, 3, generator=generator(3))  # upstream's CPU kernel has no float64
    idx = torch.tensor([2, 2, 0])
    v_cpu, v_npu = values.clone().requires_grad_(), values.to(NPU).requires_grad_()
    out_cpu = F.jagged_index_select(v_cpu, LENGTHS, idx)[0]
    out_npu = F.jagged_index_select(v_npu, LENGTHS.to(NPU), idx.to(NPU))[0]
    g = torch.randn(out_cpu.shape, generator=generator(4))
    (grad_cpu,) = torch.autograd.grad(out_cpu, v_cpu, g)
    (grad_npu,) = torch.autograd.grad(out_npu, v_npu, g.to(NPU))
    torch.testing.assert_close(grad_npu.cpu(), grad_cpu, rtol=1e-6, atol=1e-6)
    assert out_npu.grad_fn is not None and "SelectedRows" in type(out_npu.grad_fn).__name__


def test_keyed_weights_get_no_gradient() -> None:
    """As upstream's CUDA op: gradients flow to ``values`` only."""
    vals = KEYED_VALUES.to(NPU).requires_grad_()
    w = torch.ones(11, device=NPU, requires_grad=True)
    selected = torch.tensor([2, 0])
    out = F.keyed_jagged_index_select_dim1(
        vals, *to_npu(KEYED_LENGTHS, KEYED_OFFSETS, selected), 3, w
    )
    expected = keyed_reference(
        KEYED_VALUES, KEYED_LENGTHS, KEYED_OFFSETS, selected, 3, torch.ones(11)
    )
    assert all(torch.equal(a.detach().cpu(), b) for a, b in zip(out, expected, strict=True))
    out[0].sum().backward()
    assert w.grad is None and vals.grad is not None


@pytest.mark.parametrize("sized", [True, False])
def test_keyed_gradient_matches_the_reference(sized: bool) -> None:
    """Sized, the forward's gather index is reused; unsized the backward rebuilds it (the
    forward is the op itself): both scatter the gradient back as the reference's autograd."""
    selected = torch.tensor([2, 0, 2])
    ref_values = KEYED_VALUES.double().requires_grad_()
    ref = keyed_reference(ref_values, KEYED_LENGTHS, KEYED_OFFSETS, selected, 3)[0]
    vals = KEYED_VALUES.to(NPU).requires_grad_()
    size = int(ref.numel()) if sized else None
    out = F.keyed_jagged_index_select_dim1(
        vals, *to_npu(KEYED_LENGTHS, KEYED_OFFSETS, selected), 3, None, size
    )[0]
    g = torch.randn(ref.shape, generator=generator(6), dtype=torch.float64)
    (want,) = torch.autograd.grad(ref, ref_values, g)
    (got,) = torch.autograd.grad(out, vals, g.float().to(NPU))
    torch.testing.assert_close(got.cpu().double(), want, rtol=1e-6, atol=1e-6)


# ---- outputs of their own, fake kernels (tracing) ----------------------------------------------


def test_outputs_are_fresh_tensors() -> None:
    """No output is a view: ``segment_sum_csr`` was a slice of its buckets (storage offset 1),
    ``group_index_select_dim0``'s outputs views of one gathered buffer."""
    sums = F.segment_sum_csr(2, torch.tensor([0, 1, 3], device=NPU), torch.ones(8, device=NPU))
    assert sums.cpu().tolist() == [2.0, 4.0] and sums.storage_offset() == 0 and sums._base is None
    outs = F.group_index_select_dim0(
        [VALUES.to(NPU), VALUES.to(NPU), VALUES[:, :1].to(NPU)], [INDICES.to(NPU)] * 3
    )
    assert len({o.untyped_storage().data_ptr() for o in outs}) == 3
    for o, x in zip(outs, [VALUES, VALUES, VALUES[:, :1]], strict=True):
        assert o.untyped_storage().nbytes() == o.numel() * o.element_size()
        assert torch.equal(o.cpu(), x[INDICES])


def test_fake_kernels_size_the_outputs() -> None:
    """The Meta kernels we add (upstream has none): data-dependent sizes are unbacked SymInts
    under FakeTensorMode, a clear error on plain meta tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    args = (HASH_SIZE_CUMSUM, HASH_SIZE_OFFSETS, UNIQUE_OFFSETS, UNIQUE_INDICES)
    on_npu = to_npu(*args, torch.zeros(2, dtype=torch.int64))
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fake = [mode.from_tensor(t) for t in on_npu]
    with mode:
        lengths, offsets, uniq, reverse = F.jagged_unique_indices(*fake[:4])
        assert (lengths.shape, offsets.shape, reverse.shape) == ((6,), (7,), (9,))
        assert isinstance(uniq.shape[0], torch.SymInt) and reverse.dtype == torch.int64
        out = fake[4]
        assert F.lengths_range_out(out, fake[0], [7]) is out and out.shape == (7,)
    meta = [t.to("meta") for t in args]
    with pytest.raises(RuntimeError, match="jagged_unique_indices"):
        F.jagged_unique_indices(*meta)


# ---- jagged_unique_indices: ids that pass their feature's size -----------------------------------


@pytest.mark.parametrize(
    ("hsc", "hso", "offsets", "indices"),
    [
        # an id of feature 0 past its size (12 >= 10), inside feature 1's range: upstream's
        # current kernel reads it as feature 1's id 2 (the reference), not as 12
        ([0, 10, 15, 30], [0, 1, 2, 3], UNIQUE_OFFSETS.tolist(), [3, 3, 12, 1, 1, 4, 2, 14, 0]),
        # torchrec's EC dedup: the features of one table share its range (hsc repeats) and one
        # group (hso [0, 0, 2]); every id of either feature is valid
        ([0, 0, 20], [0, 0, 2], [0, 2, 3, 5, 6], [3, 19, 4, 3, 7, 0]),
        # ids past hsc[T] on the last feature (upstream's multi-keys test: a last feature of
        # hash size 0): the last feature's, counted in its group, so the lengths sum to the
        # unique count (were refused; unchecked, the lengths missed them: 32 for 33)
        ([0, 10, 15, 30], [0, 1, 2, 3], UNIQUE_OFFSETS.tolist(), [3, 3, 9, 1, 1, 4, 2, 14, 15]),
        ([0, 10, 20, 20], [0, 1, 3, 3], UNIQUE_OFFSETS.tolist(), [3, 3, 9, 1, 1, 4, 2, 14, 5]),
        ([0, 4, 4], [0, 1, 2], [0, 1, 3, 5, 6], [3, 0, 7, 2, 9, 7]),
    ],
)
def test_unique_ids_past_a_feature_read_as_upstream(
    hsc: list[int], hso: list[int], offsets: list[int], indices: list[int]
) -> None:
    args = [torch.tensor(v) for v in (hsc, hso, offsets, indices)]
    got = F.jagged_unique_indices(*to_npu(*args))
    for a, b in zip(got, unique_reference(*args), strict=True):
        assert torch.equal(a.cpu(), b), (a, b)
    assert int(got[1][-1]) == got[2].numel()  # the lengths sum to the unique count


# ---- direct calls on CPU tensors (device-generic programs), coverage ---------------------------


def test_kernels_run_on_cpu_tensors() -> None:
    assert torch.equal(
        index_select.jagged_index_select_npu(VALUES, LENGTHS, INDICES)[0],
        F.jagged_index_select(VALUES, LENGTHS, INDICES)[0],
    )
    idx = torch.tensor([2, 0, 1, 3, 3])
    assert torch.equal(
        batch_index_select.batch_index_select_dim0_npu(TABLES, idx, [2, 3], [3, 4], [2, 3]),
        F.batch_index_select_dim0(TABLES, idx, [2, 3], [3, 4], [2, 3]),
    )
    assert torch.equal(ranges.lengths_range_npu(LENGTHS), F.lengths_range(LENGTHS))
    args = (HASH_SIZE_CUMSUM, HASH_SIZE_OFFSETS, UNIQUE_OFFSETS, UNIQUE_INDICES)
    got = unique.jagged_unique_indices_npu(*args)
    for a, b in zip(got, unique_reference(*args), strict=True):
        assert torch.equal(a, b)


FAMILY_OPS = {
    "fbgemm::jagged_index_select": ("PrivateUse1", "AutogradPrivateUse1"),
    "fbgemm::jagged_index_select_2d_forward_v2": ("PrivateUse1",),
    "fbgemm::jagged_index_add_2d_forward_v2": ("PrivateUse1",),
    "fbgemm::keyed_jagged_index_select_dim1": ("PrivateUse1", "AutogradPrivateUse1"),
    "fbgemm::batch_index_select_dim0": ("PrivateUse1", "AutogradPrivateUse1"),
    "fbgemm::group_index_select_dim0": ("PrivateUse1", "AutogradPrivateUse1"),
    "fbgemm::offsets_range": ("PrivateUse1",),
    "fbgemm::lengths_range": ("PrivateUse1",),
    "fbgemm::lengths_range_out": ("PrivateUse1", "Meta"),
    "fbgemm::segment_sum_csr": ("PrivateUse1",),
    "fbgemm::jagged_unique_indices": ("PrivateUse1", "Meta"),
}


def test_family_registered() -> None:
    from fbgemm_npu._registry import REGISTRY

    coverage = dict(REGISTRY.coverage())
    for op, keys in FAMILY_OPS.items():
        assert set(keys) <= set(coverage.get(op, ())), (op, coverage.get(op))
        for key in keys:
            assert torch._C._dispatch_has_kernel_for_dispatch_key(op, key), (op, key)


@pytest.mark.parametrize("which", ["inputs", "indices"])
def test_group_index_select_mixed_dtypes_raise_upstreams_value_error(which: str) -> None:
    """Upstream's tests (test_group_index_select_dim0_mixed_input_dtype / _indices_dtype) expect
    its CUDA kernel's ValueError; ours returned the per-member results (as upstream's CPU loop
    does).  Now the same ValueError and words, naming the op and the member."""
    a = torch.rand(10, 8, device=NPU)
    b = a.half() if which == "inputs" else a
    i0 = torch.randint(10, (5,), device=NPU)
    i1 = i0.int() if which == "indices" else i0
    arg = "input_group" if which == "inputs" else "indices_group"
    match = f"group_index_select_dim0: All {which} in .* groups need to have the same dtype"
    match += f": argument '{arg}"
    with pytest.raises(ValueError, match=match):
        F.group_index_select_dim0([a, b], [i0, i1])
