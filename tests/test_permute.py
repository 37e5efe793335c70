"""The permute family on npu: budgets, bad inputs, gradients, torchrec's KJT.permute, CPU calls.

Expected values come from upstream's CPU kernels or from ``conformance.specs.permute``'s loop
reference, never from our kernels.  Budgets (OPS.md: 10 launches, 1 sync if
``permuted_lengths_sum`` is None) are held with ``FBGEMM_NPU_VALIDATE=0`` (the kernels) and the
data checks' cost is pinned separately; each count is measured at two sizes and must not change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from conformance.specs.permute import expand_reference, permute_reference
from fbgemm_npu.native.fbgemm.permute import permute as ours
from fbgemm_npu.testing.counters import assert_budget

F = torch.ops.fbgemm
NPU = "npu"
I32 = torch.int32


def _sparse(t_in: int, b: int, seed: int = 0, weights: bool = False) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 12, (t_in, b), generator=gen)
    n = int(lengths.sum())
    out = {"lengths": lengths, "values": torch.randint(0, 1000, (n,), generator=gen)}
    out["permute"] = torch.randperm(t_in, generator=gen).to(I32)
    if weights:
        out["weights"] = torch.rand(n, generator=gen)
    return out


def _npu(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v.to(NPU) if isinstance(v, torch.Tensor) else v for k, v in d.items()}


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FBGEMM_NPU_VALIDATE", "0")
    yield


# ---- budgets ------------------------------------------------------------------------------------

SIZES = ((3, 4), (26, 512))  # (features, batch): the count must not depend on them
# Kernel launches without the data checks.  Budget 10; with weights 11, one over: the weights
# need their own gather and ATen has no op that builds the per-element source index ("segment
# arange") in fewer than the 4 launches used; a fused kernel would make the whole op ~3.
KERNEL = {(False, False): 10, (False, True): 10, (True, False): 11, (True, True): 11}
# The data checks (permute in range, lengths >= 0, sums consistent): 4 launches when the output
# size is read back anyway (the checked scalars share its copy to the host), 9 otherwise.
CHECKS = {False: 4, True: 9}


def _call_2d(d: dict[str, Any], given: bool) -> Callable[[], Any]:
    pls = int(d["lengths"][d["permute"].long().cpu()].sum()) if given else None
    dev = _npu(d)
    return lambda: F.permute_2D_sparse_data(
        dev["permute"], dev["lengths"], dev["values"], dev.get("weights"), pls
    )


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
@pytest.mark.parametrize("weights", [False, True], ids=["unweighted", "weighted"])
def test_permute_2d_kernel_budget(no_validation: None, weights: bool, given: bool) -> None:
    counts = set()
    for t_in, b in SIZES:
        fn = _call_2d(_sparse(t_in, b, weights=weights), given)
        c = assert_budget(fn, launches=KERNEL[(weights, given)], syncs=0 if given else 1)
        counts.add((c.launches, c.syncs))
    assert counts == {(KERNEL[(weights, given)], 0 if given else 1)}


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
@pytest.mark.parametrize("weights", [False, True], ids=["unweighted", "weighted"])
def test_permute_2d_checks_cost(weights: bool, given: bool) -> None:
    expected = KERNEL[(weights, given)] + CHECKS[given]
    for t_in, b in SIZES:
        c = assert_budget(_call_2d(_sparse(t_in, b, weights=weights), given), launches=expected,
                          syncs=0 if given else 1)  # fmt: skip
        assert c.launches == expected


def _other_call(op: str, t_in: int, b: int) -> Callable[[], Any]:
    d = _npu(_sparse(t_in, b, weights=True))
    if op == "1d":
        perm = torch.randperm(t_in * b).to(I32).to(NPU)
        return lambda: F.permute_1D_sparse_data(
            perm, d["lengths"].view(-1), d["values"], d["weights"]
        )
    if op == "input1d":
        return lambda: F.permute_2D_sparse_data_input1D(
            d["permute"], d["lengths"].view(-1), d["values"], b, d["weights"]
        )
    return lambda: F.permute_sparse_features(d["permute"], d["lengths"], d["values"], d["weights"])


@pytest.mark.parametrize("op", ["1d", "input1d", "psf"])
def test_other_sparse_permutes_budget(no_validation: None, op: str) -> None:
    for t_in, b in SIZES:
        c = assert_budget(_other_call(op, t_in, b), launches=11, syncs=1)
        assert (c.launches, c.syncs) == (11, 1)


def test_invert_and_expand_budget() -> None:
    for n in (5, 4000):
        perm = torch.randperm(n).to(NPU)
        c = assert_budget(lambda: F.invert_permute(perm), launches=9, syncs=0)  # noqa: B023
        assert c.launches == 9  # 2 kernel + 7 for the permutation check
        lengths = torch.randint(0, 5, (n,))
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(NPU)
        size = int(lengths.sum())
        # 7 kernel launches within the budget of 10; the checks (permute in range, offsets
        # running from 0 to output_size without decreasing) add 8: 15 with validation on.
        c = assert_budget(lambda: F.expand_into_jagged_permute(perm, offsets, offsets, size),  # noqa: B023
                          launches=15, syncs=0)  # fmt: skip
        assert c.launches == 15


def test_expand_kernel_budget(no_validation: None) -> None:
    for n in (5, 4000):
        perm = torch.randperm(n).to(NPU)
        offsets = torch.arange(n + 1).to(NPU)
        c = assert_budget(lambda: F.expand_into_jagged_permute(perm, offsets, offsets, n),  # noqa: B023
                          launches=7, syncs=0)  # fmt: skip
        assert c.launches == 7
        c = assert_budget(lambda: F.invert_permute(perm), launches=2, syncs=0)  # noqa: B023
        assert c.launches == 2


def test_empty_outputs_cost_nothing() -> None:
    call = _call_2d(_sparse(3, 0, weights=True), given=False)
    c = assert_budget(call, launches=0, syncs=0)
    lengths, values, weights = c.result
    assert lengths.shape == (3, 0) and values.shape == (0,) and weights.shape == (0,)


# ---- bad inputs: an error naming the op and the argument ----------------------------------------

P2D = "fbgemm::permute_2D_sparse_data"
SMALL = {
    "permute": torch.tensor([2, 0, 1], dtype=I32),
    "lengths": torch.tensor([[1, 2], [0, 3], [2, 1]]),
    "values": torch.arange(9),
    "weights": torch.arange(9.0),
}


def _p2d(**change: Any) -> Callable[[], Any]:
    d = _npu({**SMALL, **change})
    pls = d.pop("permuted_lengths_sum", None)
    return lambda: F.permute_2D_sparse_data(
        d["permute"], d["lengths"], d["values"], d["weights"], pls
    )


DATA_ERRORS = {
    "permute_too_big": ({"permute": torch.tensor([3, 0, 1], dtype=I32)}, "'permute'.*\\[0, 3\\)"),
    "permute_negative": ({"permute": torch.tensor([-1, 0], dtype=I32)}, "'permute'.*\\[0, 3\\)"),
    "negative_length": ({"lengths": torch.tensor([[1, 2], [0, 3], [3, -1]])}, "'lengths'"),
    "values_too_short": (
        {"values": torch.arange(8), "weights": torch.arange(8.0)},
        "values.numel\\(\\) \\(8\\)",
    ),  # fmt: skip
    "weights_too_short": ({"weights": torch.arange(5.0)}, "weights.size\\(0\\) \\(5\\)"),
}


@pytest.mark.parametrize("given", [False, True], ids=["pls_none", "pls_given"])
@pytest.mark.parametrize("case", list(DATA_ERRORS))
def test_data_errors_name_op_and_argument(case: str, given: bool) -> None:
    change, match = DATA_ERRORS[case]
    if given:
        change = {**change, "permuted_lengths_sum": 9}
    with pytest.raises((ValueError, RuntimeError), match=f"{P2D}: .*{match}"):
        _p2d(**change)()


@pytest.mark.parametrize("pls", [8, 10])
def test_permuted_lengths_sum_must_match(pls: int) -> None:
    """Upstream truncates (writing out of bounds) or leaves garbage; ours refuses."""
    with pytest.raises(RuntimeError, match=f"{P2D}: .*'permuted_lengths_sum' \\({pls}\\)"):
        _p2d(permuted_lengths_sum=pls)()
    with pytest.raises(ValueError, match=f"{P2D}: argument 'permuted_lengths_sum' must be non-neg"):
        _p2d(permuted_lengths_sum=-1)()


META_ERRORS = {
    "lengths_1d": ({"lengths": torch.tensor([1, 2, 0])}, "'lengths' must be 2-D"),
    "lengths_3d": ({"lengths": torch.ones(3, 2, 1, dtype=torch.int64)}, "'lengths' must be 2-D"),
    "weights_3d": ({"weights": torch.ones(9, 1, 1)}, "'weights' must be 1-D or 2-D"),
    "permute_float": ({"permute": torch.tensor([2.0, 0.0, 1.0])}, "'permute' must have dtype"),
    "lengths_float": ({"lengths": torch.ones(3, 2)}, "'lengths' must have dtype"),
    "values_float64": ({"values": torch.arange(9.0, dtype=torch.float64)}, "'values' must have"),
    "weights_bool": ({"weights": torch.ones(9, dtype=torch.bool)}, "'weights' must have dtype"),
}


@pytest.mark.parametrize("case", list(META_ERRORS))
def test_metadata_errors(case: str) -> None:
    change, match = META_ERRORS[case]
    with pytest.raises(ValueError, match=f"{P2D}: argument {match}"):
        _p2d(**change)()


def test_devices_must_agree() -> None:
    d = _npu(SMALL)
    with pytest.raises(RuntimeError, match=f"{P2D}: arguments 'permute' .* and 'lengths' .*same"):
        F.permute_2D_sparse_data(SMALL["permute"], d["lengths"], d["values"])
    with pytest.raises(RuntimeError, match=f"{P2D}: arguments 'permute' .* and 'weights' .*same"):
        F.permute_2D_sparse_data(d["permute"], d["lengths"], d["values"], d["weights"].to("npu:1"))


def test_other_ops_errors() -> None:
    d = _npu(SMALL)
    with pytest.raises(ValueError, match="permute_sparse_features: arguments 'lengths' .*dtype"):
        F.permute_sparse_features(d["permute"], d["lengths"].int(), d["values"])
    with pytest.raises(ValueError, match="permute_sparse_features: argument 'lengths' must be 2-D"):
        F.permute_sparse_features(d["permute"], d["lengths"].view(-1), d["values"])
    with pytest.raises(ValueError, match="input1D: argument 'stride' must be positive and divide"):
        F.permute_2D_sparse_data_input1D(d["permute"], d["lengths"].view(-1), d["values"], 4)
    with pytest.raises(ValueError, match="permute_1D_sparse_data: argument 'permute' .*\\[0, 6\\)"):
        F.permute_1D_sparse_data(d["permute"] * 3, d["lengths"].view(-1), d["values"])
    with pytest.raises(ValueError, match="permute_1D_sparse_data: sum\\(lengths\\) must not exc"):
        F.permute_1D_sparse_data(d["permute"], d["lengths"].view(-1), d["values"][:4])


@pytest.mark.parametrize(
    "perm", [[0, 0, 1], [0, 1, 3], [-1, 0, 1], [2, 2, 2]], ids=["repeat", "big", "neg", "same"]
)
def test_invert_permute_requires_a_permutation(perm: list[int]) -> None:
    with pytest.raises(RuntimeError, match="invert_permute: .*'permute' must be a permutation of"):
        F.invert_permute(torch.tensor(perm, device=NPU))
    with pytest.raises(ValueError, match="invert_permute: argument 'permute' must have dtype"):
        F.invert_permute(torch.tensor([1.0, 0.0], device=NPU))


EXPAND = "fbgemm::expand_into_jagged_permute"


def _expand(perm: list[int], ins: list[int], outs: list[int], size: int,
            dtype: torch.dtype = torch.int64) -> Any:  # fmt: skip
    def t(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=dtype, device=NPU)

    return F.expand_into_jagged_permute(t(perm), t(ins), t(outs), size)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([1, 2], [0, 2, 5], [0, 3, 5], 5), "'permute' must hold indices in \\[0, 2\\)"),
        (([1, 0], [0, 2, 5], [0, 3, 2], 2), "'output_offset' must be non-decreasing"),
        (([1, 0], [0, 2, 5], [1, 3, 5], 5), "'output_offset' must start at 0"),
        (([1, 0], [0, 2, 5], [0, 3, 5], 4), "'output_offset' must end at output_size \\(4\\)"),
    ],
    ids=["permute_range", "decreasing", "start", "end"],
)
def test_expand_data_errors(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(RuntimeError, match=f"{EXPAND}: .*{match}"):
        _expand(*args)


def test_expand_metadata_errors() -> None:
    with pytest.raises(ValueError, match=f"{EXPAND}: argument 'permute' must not be empty"):
        _expand([], [0], [0], 0)
    with pytest.raises(ValueError, match=f"{EXPAND}: argument 'input_offset' must have perm"):
        _expand([1, 0], [0, 2], [0, 3, 5], 5)
    with pytest.raises(ValueError, match=f"{EXPAND}: argument 'output_offset' must have permute's"):
        F.expand_into_jagged_permute(*(torch.tensor(x, device=NPU) for x in ([1, 0], [0, 2, 5])),
                                     torch.tensor([0, 3, 5], dtype=I32, device=NPU), 5)  # fmt: skip


def test_validation_off_skips_only_data_checks(no_validation: None) -> None:
    """FBGEMM_NPU_VALIDATE=0 trusts the data; metadata is still checked."""
    with pytest.raises(ValueError, match=f"{P2D}: argument 'lengths' must be 2-D"):
        _p2d(lengths=torch.tensor([1, 2, 0]))()
    ok = _p2d(permuted_lengths_sum=9)()
    assert ok[1].cpu().tolist() == [6, 7, 8, 0, 1, 2, 3, 4, 5]


# ---- semantics beyond the conformance draws -----------------------------------------------------


def test_upstream_silently_accepted_forms_match() -> None:
    """A 2-D ``permute`` is read flat and values longer than the lengths' sum keep their tail
    unread, by upstream and by us; a 2-D ``values`` is read flat too."""
    perm = torch.tensor([[2], [0], [1]], dtype=I32)
    values = torch.arange(12).view(3, 4)
    expected = F.permute_2D_sparse_data(perm, SMALL["lengths"], values, torch.arange(11.0))
    got = F.permute_2D_sparse_data(*(t.to(NPU) for t in (perm, SMALL["lengths"], values,
                                                          torch.arange(11.0))))  # fmt: skip
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
    d = _npu(SMALL)
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
    assert torch.equal(_expand(*args, dtype=I32).cpu(), expected)
    assert torch.equal(F.expand_into_jagged_permute(*t, args[3]), expected)  # upstream agrees


def test_torchrec_kjt_permute_on_npu() -> None:
    """torchrec's KeyedJaggedTensor.permute (permute_2D_sparse_data with the length sum given)
    lands on our kernel and matches the same KJT permuted on the CPU."""
    jagged = pytest.importorskip("torchrec.sparse.jagged_tensor", reason="torchrec not installed")
    d = _sparse(5, 8, seed=3, weights=True)

    def kjt(dev: str) -> Any:
        return jagged.KeyedJaggedTensor.from_lengths_sync(
            keys=list("abcde"), values=d["values"].to(dev), lengths=d["lengths"].view(-1).to(dev),
            weights=d["weights"].to(dev))  # fmt: skip

    order = [3, 1, 4, 0, 2, 2]
    got, expected = kjt(NPU).permute(order), kjt("cpu").permute(order)
    assert got.keys() == expected.keys() and got.values().device.type == "npu"
    for attr in ("values", "lengths", "weights"):
        assert torch.equal(getattr(got, attr)().cpu(), getattr(expected, attr)())


@pytest.mark.parametrize("weights", [False, True])
def test_kernels_run_on_cpu_tensors(weights: bool) -> None:
    """The kernels are device-generic tensor programs (the bench times them on CPU)."""
    d = _sparse(6, 5, seed=1, weights=weights)
    args = (d["permute"], d["lengths"], d["values"], d.get("weights"))
    for e, g in zip(F.permute_2D_sparse_data(*args), ours.permute_2D_sparse_data_npu(*args),
                    strict=True):  # fmt: skip
        assert (e is None and g is None) or torch.equal(g, e)
    perm = torch.randperm(40)
    assert torch.equal(ours.invert_permute_npu(perm), F.invert_permute(perm))


def test_preallocated_out_buffers() -> None:
    """Buffers are written (first ``total`` rows) and returned themselves; a short buffer, which
    upstream overruns, is refused; a non-contiguous one is written logically (upstream writes
    through its raw pointer)."""
    d = _npu(SMALL)
    lengths_out = torch.full((6,), -1, device=NPU)
    values_out = torch.full((12,), -7, device=NPU)
    weights_base = torch.zeros(20, device=NPU)
    weights_out = weights_base[::2]  # non-contiguous, 10 rows
    got = F.permute_2D_sparse_preallocated_out(
        d["permute"], d["lengths"], d["values"], d["weights"], None,
        lengths_out, values_out, weights_out)  # fmt: skip
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
            d["permute"], d["lengths"], d["values"], d["weights"], None, None, None,
            weights_out.double())  # fmt: skip
