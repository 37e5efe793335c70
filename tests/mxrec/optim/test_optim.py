"""``mxrec::fused_sgd`` / ``mxrec::fused_lazy_adam`` against the float64 references
(conformance/specs/mxrec/optim/reference.py), on npu and on CPU: in place, duplicates (SGD: they
add up; LazyAdam: summed first, TensorFlow's rule), skipped indices, dtypes, lr on the device,
empty calls, and the argument errors."""

from __future__ import annotations

import pytest
import torch

from conformance.specs.mxrec.optim.reference import fused_lazy_adam_reference, fused_sgd_reference
from fbgemm_npu.testing.counters import count

M = torch.ops.mxrec
DEVICES = ("npu", "cpu")
TOL = {torch.float32: (1e-5, 1e-6), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}
IDX = [3, 0, 3, -1, 7, 3, 9, 1]  # duplicates of row 3, a negative and past-the-table indices


def _inputs(dev: str, dtype: torch.dtype, idx_dtype: torch.dtype = torch.int64):
    g = torch.Generator().manual_seed(0)
    var = torch.randn(7, 5, generator=g).to(dev, dtype)
    grad = torch.randn(len(IDX), 5, generator=g).to(dev, dtype)
    return var, grad, torch.tensor(IDX, dtype=idx_dtype).to(dev), torch.tensor(0.1).to(dev)


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(got.cpu().double(), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("weight_decay", [0.0, 0.3])
def test_fused_sgd_matches_the_reference_in_place(dev, dtype, weight_decay) -> None:  # type: ignore[no-untyped-def]
    var, grad, idx, lr = _inputs(dev, dtype)
    want = fused_sgd_reference(var.cpu(), grad.cpu(), idx.cpu(), lr.cpu(), weight_decay)
    out = M.fused_sgd(var, grad, idx, lr, weight_decay)
    assert out is var or out.data_ptr() == var.data_ptr()
    _close(var, want, dtype)
    untouched = [r for r in range(7) if r not in IDX]
    assert untouched and torch.equal(
        var[untouched].cpu().double(), want[untouched].to(dtype).double()
    )


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64], ids=str)
def test_fused_lazy_adam_matches_the_reference_in_place(dev, dtype, idx_dtype) -> None:  # type: ignore[no-untyped-def]
    var, grad, idx, lr = _inputs(dev, dtype, idx_dtype)
    g = torch.Generator().manual_seed(1)
    m = (torch.randn(7, 5, generator=g) * 0.1).to(dev, dtype)
    v = torch.rand(7, 5, generator=g).to(dev, dtype)
    want = fused_lazy_adam_reference(
        *(t.cpu() for t in (var, m, v, grad, idx.view(-1, 1), lr)), 0.8, 0.99
    )
    outs = M.fused_lazy_adam(var, m, v, grad, idx.view(-1, 1), lr, 0.8, 0.99)
    for out, buf, ref in zip(outs, (var, m, v), want, strict=True):
        assert out.data_ptr() == buf.data_ptr()
        _close(buf, ref, dtype)


def test_lazy_adam_sums_duplicates_before_the_update() -> None:
    """Row 0 named twice with gradients a and b moves as one update with a + b (not two)."""
    var = torch.zeros(2, 1, device="npu")
    m, v = torch.zeros_like(var), torch.zeros_like(var)
    grad = torch.tensor([[1.0], [3.0]], device="npu")
    M.fused_lazy_adam(
        var,
        m,
        v,
        grad,
        torch.tensor([0, 0], device="npu"),
        torch.tensor(1.0, device="npu"),
        0.5,
        0.5,
    )
    assert m[0].item() == pytest.approx(2.0) and v[0].item() == pytest.approx(8.0)
    assert var[0].item() == pytest.approx(-2.0 / (8.0**0.5 + 1e-7)) and var[1].item() == 0.0


def test_lr_is_read_on_the_device_and_empty_calls_change_nothing() -> None:
    var, grad, idx, lr = _inputs("npu", torch.float32)
    with count("npu") as c:
        M.fused_sgd(var, grad, idx, lr)
    assert c.syncs == 0 and c.stalls == 0 and c.ai_cpu == 0
    before = var.clone()
    M.fused_sgd(var, grad[:0], idx[:0], lr)
    m, v = torch.zeros_like(var), torch.zeros_like(var)
    M.fused_lazy_adam(var, m, v, grad[:0], idx[:0], lr)
    assert torch.equal(var, before) and not m.any() and not v.any()


@pytest.mark.parametrize(
    ("change", "arg"),
    [
        (lambda a: {**a, "gradient": a["gradient"][:, :2]}, "gradient"),
        (lambda a: {**a, "gradient": a["gradient"].double()}, "gradient"),
        (lambda a: {**a, "indices": a["indices"].float()}, "indices"),
        (lambda a: {**a, "indices": a["indices"].view(2, -1)}, "indices"),
        (lambda a: {**a, "lr": torch.tensor([0.1, 0.2], device="npu")}, "lr"),
        (lambda a: {**a, "lr": 0.1}, "lr"),
        (lambda a: {**a, "var": a["var"].view(-1)}, "var"),
        (lambda a: {**a, "lr": a["lr"].cpu()}, "lr"),
    ],
)
def test_bad_arguments_name_the_op_and_the_argument(change, arg) -> None:  # type: ignore[no-untyped-def]
    var, grad, idx, lr = _inputs("npu", torch.float32)
    args = change({"var": var, "gradient": grad, "indices": idx, "lr": lr})
    with pytest.raises((ValueError, RuntimeError), match=rf"fused_sgd.*'{arg}'|'{arg}'.*fused_sgd"):
        M.fused_sgd(**args)


def test_lazy_adam_state_must_match_var() -> None:
    var, grad, idx, lr = _inputs("npu", torch.float32)
    with pytest.raises(ValueError, match=r"fused_lazy_adam: argument 'v'"):
        M.fused_lazy_adam(
            var, torch.zeros_like(var), torch.zeros(7, 4, device="npu"), grad, idx, lr
        )
