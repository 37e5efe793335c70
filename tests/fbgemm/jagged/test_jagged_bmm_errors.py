"""Errors and edge cases of bmm.py's ops on npu (``jagged_jagged_bmm``, ``jagged_dense_bmm``):
every bad argument raises an error naming the op and the argument; results and gradients
against upstream CPU (our gradient is also right where upstream's autograd fails: inputs of
different row counts)."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
OFFS = torch.tensor([0, 3, 3, 7])


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_values_and_gradients_match_upstream() -> None:
    x = torch.randn(7, 2, generator=_g(0), requires_grad=True)
    y = torch.randn(7, 4, generator=_g(1), requires_grad=True)
    yd = torch.randn(3, 2, 4, generator=_g(2), requires_grad=True)
    xn, yn, ydn = (t.detach().to(NPU).requires_grad_() for t in (x, y, yd))
    on = OFFS.to(NPU)
    ref = F.jagged_jagged_bmm(x, y, OFFS, 2)
    ours = F.jagged_jagged_bmm(xn, yn, on, 2)
    torch.testing.assert_close(ours.cpu(), ref)
    w = torch.randn(3, 2, 4, generator=_g(3))
    (ref * w).sum().backward()
    (ours * w.to(NPU)).sum().backward()
    assert xn.grad is not None and yn.grad is not None
    torch.testing.assert_close(xn.grad.cpu(), x.grad)
    torch.testing.assert_close(yn.grad.cpu(), y.grad)
    ref_d, _ = F.jagged_dense_bmm(x, OFFS, yd, 5)
    ours_d, offsets = F.jagged_dense_bmm(xn, on, ydn, 5)
    assert offsets.data_ptr() != on.data_ptr()
    torch.testing.assert_close(ours_d.cpu(), ref_d)
    w = torch.randn(7, 4, generator=_g(4))
    (ref_d * w).sum().backward()
    (ours_d * w.to(NPU)).sum().backward()
    assert ydn.grad is not None
    torch.testing.assert_close(ydn.grad.cpu(), yd.grad)


def test_gradients_of_inputs_with_different_rows() -> None:
    """More y rows than the offsets reach: their gradient is 0, x's has x's rows."""
    x = torch.randn(7, 2, generator=_g(5)).to(NPU).requires_grad_()
    y = torch.randn(9, 4, generator=_g(6)).to(NPU).requires_grad_()
    F.jagged_jagged_bmm(x, y, OFFS.to(NPU), 3).sum().backward()
    assert x.grad is not None and y.grad is not None
    assert x.grad.shape == (7, 2) and y.grad.shape == (9, 4)
    assert torch.equal(y.grad[7:].cpu(), torch.zeros(2, 4))


X, Y, YD = torch.randn(7, 2), torch.randn(7, 4), torch.randn(3, 2, 4)


@pytest.mark.parametrize(
    "op, args, names",
    [
        ("jagged_jagged_bmm", (X.double(), Y.double(), OFFS, 2), ("x_values",)),
        ("jagged_jagged_bmm", (X, Y.half(), OFFS, 2), ("y_values",)),
        ("jagged_jagged_bmm", (X, Y, OFFS.float(), 2), ("x_offsets",)),
        ("jagged_jagged_bmm", (X[:, 0], Y, OFFS, 2), ("x_values",)),
        ("jagged_jagged_bmm", (None, Y, OFFS, 2), ("x_values",)),
        ("jagged_dense_bmm", (X, OFFS, YD[:2], 2), ("'y'",)),
        ("jagged_dense_bmm", (X, OFFS, YD[:, :1], 2), ("'y'",)),
        ("jagged_dense_bmm", (X, OFFS, YD[0], 2), ("'y'",)),
        ("jagged_dense_bmm", (X.int(), OFFS, YD, 2), ("x_values",)),
        ("jagged_dense_bmm", (X, torch.tensor([], dtype=torch.int64), YD, 2), ("x_offsets",)),
    ],
)
def test_bad_arguments_name_the_op_and_argument(op: str, args: tuple, names: tuple) -> None:
    placed = [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]
    for name in (op, f"{op}_forward"):
        with pytest.raises((ValueError, RuntimeError, TypeError)) as err:
            getattr(F, name)(*placed)
        msg = str(err.value)
        assert op in msg and any(n in msg for n in names), msg


@pytest.mark.parametrize(
    "offsets",
    [[0, 5, 5, 11], [0, -1, 3, 7], [0, 3, 2**31 + 3, 2**31 + 5]],
    ids=["past_the_values", "negative", "int32_wrapping"],
)
def test_bad_offsets_data_is_refused_by_name(offsets: list[int]) -> None:
    o = torch.tensor(offsets).to(NPU)
    x, y, yd = X.to(NPU), Y.to(NPU), YD.to(NPU)
    for op, call in (
        ("jagged_jagged_bmm_forward", lambda: F.jagged_jagged_bmm_forward(x, y, o, 4)),
        ("jagged_dense_bmm_forward", lambda: F.jagged_dense_bmm_forward(x, o, yd, 4)),
    ):
        with pytest.raises(RuntimeError, match=f"{op}.*x_offsets"):
            call()
            fbgemm_npu.check()  # the data check is queued: read it


def test_overlapping_rows_are_refused_where_they_scatter() -> None:
    o = torch.tensor([0, 3, 1, 7]).to(NPU)
    with pytest.raises(RuntimeError, match="jagged_dense_bmm_forward.*x_offsets"):
        F.jagged_dense_bmm_forward(X.to(NPU), o, YD.to(NPU), 4)
        fbgemm_npu.check()
    # a sum reads overlapping rows as upstream does: no error, upstream's result
    ref = F.jagged_jagged_bmm_forward(X, Y, o.cpu(), 4)
    torch.testing.assert_close(F.jagged_jagged_bmm_forward(X.to(NPU), Y.to(NPU), o, 4).cpu(), ref)


def test_rows_read_from_empty_values_are_refused() -> None:
    with pytest.raises(RuntimeError, match="jagged_jagged_bmm_forward.*x_offsets"):
        F.jagged_jagged_bmm_forward(
            torch.randn(0, 2).to(NPU), torch.randn(0, 3).to(NPU), OFFS.to(NPU), 2
        )
        fbgemm_npu.check()
