"""The permute family beyond the conformance draws: the forms upstream silently accepts, gradients
with repeated features, the no-grad path, the preallocated outputs, the kernels called directly
on CPU tensors.  Expected values come from upstream's CPU kernels or from the conformance loop
references, never from our kernels.
"""

from __future__ import annotations

import pytest
import torch

from conformance.specs.fbgemm.permute.references import expand_reference, permute_reference
from fbgemm_npu.native.fbgemm.permute import permute as ours
from fbgemm_npu.testing.permute_inputs import SMALL, on_npu, sparse_batch

F = torch.ops.fbgemm
NPU = "npu"
I32 = torch.int32


def test_upstream_silently_accepted_forms_match() -> None:
    """A 2-D ``permute`` is read flat and values longer than the lengths' sum keep their tail
    unread, by upstream and by us; a 2-D ``values`` is read flat too."""
    perm = torch.tensor([[2], [0], [1]], dtype=I32)
    values = torch.arange(12).view(3, 4)
    expected = F.permute_2D_sparse_data(perm, SMALL["lengths"], values, torch.arange(11.0))
    got = F.permute_2D_sparse_data(
        *(t.to(NPU) for t in (perm, SMALL["lengths"], values, torch.arange(11.0)))
    )
    for e, g in zip(expected, got, strict=True):
        assert torch.equal(g.cpu(), e)


def test_gradient_with_repeats_is_the_adjoint() -> None:
    """Upstream's backward reads out of bounds here; ours sums the repeated features' grads."""
    perm = torch.tensor([0, 0, 2, 2, 2], dtype=I32)
    lengths, n = SMALL["lengths"], 9
    weights = torch.rand(n, 2, dtype=torch.float64)
    values = torch.rand(n + 2)  # float32, with a tail whose gradient is 0
    w_npu = weights.to(NPU).requires_grad_()
    v_npu = values.to(NPU).requires_grad_()
    _, pv, pw = F.permute_2D_sparse_data(perm.to(NPU), lengths.to(NPU), v_npu, w_npu)
    g_v, g_w = torch.randn(pv.shape), torch.randn(pw.shape, dtype=pw.dtype)
    (pv * g_v.to(NPU)).sum().add((pw * g_w.to(NPU)).sum()).backward()
    w_ref, v_ref = weights.clone().requires_grad_(), values.clone().requires_grad_()
    _, rv, rw = permute_reference(perm, lengths, v_ref, w_ref)
    (rv * g_v).sum().add((rw * g_w).sum()).backward()
    torch.testing.assert_close(w_npu.grad.cpu(), w_ref.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(v_npu.grad.cpu(), v_ref.grad, rtol=1e-6, atol=1e-6)
    assert v_ref.grad[n:].abs().sum() == 0


def test_no_grad_path_skips_autograd() -> None:
    d = on_npu(SMALL)
    w = d["weights"].requires_grad_()
    with torch.no_grad():
        out = F.permute_2D_sparse_data(d["permute"], d["lengths"], d["values"], w)
    assert out[2].grad_fn is None
    out = F.permute_2D_sparse_data(d["permute"], d["lengths"], d["values"], w)
    assert out[2].grad_fn is not None and out[0].grad_fn is None


def test_expand_matches_reference_on_int32() -> None:
    args = ([2, 0, 0, 1], [0, 3, 3, 7, 9], [0, 4, 7, 10, 10], 10)
    t = [torch.tensor(a, dtype=I32) for a in args[:3]]
    expected = expand_reference(*t, args[3])
    assert torch.equal(
        F.expand_into_jagged_permute(*(x.to(NPU) for x in t), args[3]).cpu(), expected
    )
    assert torch.equal(F.expand_into_jagged_permute(*t, args[3]), expected)  # upstream agrees


@pytest.mark.parametrize("weights", [False, True])
def test_kernels_run_on_cpu_tensors(weights: bool) -> None:
    """The kernels are device-generic tensor programs (the bench times them on CPU)."""
    d = sparse_batch(6, 5, seed=1, weights=weights)
    args = (d["permute"], d["lengths"], d["values"], d.get("weights"))
    for e, g in zip(
        F.permute_2D_sparse_data(*args), ours.permute_2D_sparse_data_npu(*args), strict=True
    ):
        assert (e is None and g is None) or torch.equal(g, e)
    perm = torch.randperm(40)
    assert torch.equal(ours.invert_permute_npu(perm), F.invert_permute(perm))


def test_preallocated_out_buffers() -> None:
    """Buffers are written (first ``total`` rows) and returned themselves; a short buffer, which
    upstream overruns, is refused; a non-contiguous one is written logically (upstream writes
    through its raw pointer)."""
    d = on_npu(SMALL)
    lengths_out = torch.full((6,), -1, device=NPU)
    values_out = torch.full((12,), -7, device=NPU)
    weights_base = torch.zeros(20, device=NPU)
    weights_out = weights_base[::2]  # non-contiguous, 10 rows
    got = F.permute_2D_sparse_preallocated_out(
        d["permute"],
        d["lengths"],
        d["values"],
        d["weights"],
        None,
        lengths_out,
        values_out,
        weights_out,
    )
    assert got[0] is lengths_out and got[1] is values_out and got[2] is weights_out
    ref = permute_reference(SMALL["permute"], SMALL["lengths"], SMALL["values"], SMALL["weights"])
    assert torch.equal(lengths_out.cpu(), ref[0].view(-1))
    assert torch.equal(values_out.cpu()[:9], ref[1]) and (values_out.cpu()[9:] == -7).all()
    assert torch.equal(weights_out.cpu()[:9], ref[2]) and weights_base.cpu()[1::2].eq(0).all()
    with pytest.raises(ValueError, match="preallocated_out: argument 'permuted_indices_out' must"):
        F.permute_2D_sparse_preallocated_out(
            d["permute"], d["lengths"], d["values"], None, None, None, values_out[:8]
        )
    with pytest.raises(ValueError, match="preallocated_out: argument 'permuted_lengths_out' must"):
        F.permute_2D_sparse_preallocated_out(
            d["permute"], d["lengths"], d["values"], None, None, lengths_out[:5]
        )
    with pytest.raises(ValueError, match="'permuted_weights_out' must have dtype float32"):
        F.permute_2D_sparse_preallocated_out(
            d["permute"],
            d["lengths"],
            d["values"],
            d["weights"],
            None,
            None,
            None,
            weights_out.double(),
        )


def _fake_call(permuted_lengths_sum: int | None) -> tuple[torch.Tensor, ...]:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    d = sparse_batch(3, 2, weights=True)
    d["weights"] = torch.stack([d["weights"], d["weights"]], 1)  # (n, 2)
    real = [d[k].to("npu") for k in ("lengths", "values", "weights")]
    perm = torch.tensor([2, 0], device="npu")
    mode = FakeTensorMode(shape_env=ShapeEnv())
    args = [mode.from_tensor(t) for t in real]
    perm = mode.from_tensor(perm)
    with mode:
        return torch.ops.fbgemm.permute_sparse_data(perm, *args, permuted_lengths_sum)


def test_permute_sparse_data_fake_kernel() -> None:
    """Our fake / Meta kernel (upstream has none): the real kernel's shapes and dtypes; without
    permuted_lengths_sum an unbacked size under FakeTensorMode, a clear error on meta tensors."""
    lengths, values, weights = _fake_call(7)
    assert lengths.shape == (2, 2) and values.shape == (7,) and weights.shape == (7, 2)
    assert values.device.type == "npu" and weights.dtype == torch.float32
    _, values, weights = _fake_call(None)
    assert isinstance(values.shape[0], torch.SymInt) and weights.shape[1] == 2
    d = sparse_batch(3, 2)
    meta = [d[k].to("meta") for k in ("lengths", "values")]
    perm = torch.tensor([1], device="meta")
    out = torch.ops.fbgemm.permute_sparse_data(perm, *meta, None, 5)
    assert out[0].shape == (1, 2) and out[1].shape == (5,) and out[2] is None
    with pytest.raises(RuntimeError, match="permute_sparse_data.*data-dependent shape"):
        torch.ops.fbgemm.permute_sparse_data(perm, *meta)
