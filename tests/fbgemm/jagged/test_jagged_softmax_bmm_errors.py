"""Errors and edge cases of softmax_bmm.py's ops on npu: every bad argument raises an error
naming the op and the argument (as upstream raises, or where upstream would read out of
bounds); the rows upstream leaves uninitialised are 0; values against a float64 softmax."""

from __future__ import annotations

import pytest
import torch

import fbgemm_npu

F = torch.ops.fbgemm
NPU = "npu"
OFFS = torch.tensor([0, 3, 3, 7])


def _npu(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(NPU) for t in ts]


def test_forward_matches_a_float64_softmax_and_zeroes_the_rest() -> None:
    v = torch.randn(9, 3, generator=torch.Generator().manual_seed(0))
    o = torch.tensor([0, 3, 3, 7, 9])
    out = F.jagged_softmax_forward(*_npu(v, o), 2).cpu()
    expected = torch.zeros(9, 3, dtype=torch.float64)
    for s, e in ((0, 2), (3, 5), (7, 9)):
        expected[s:e] = torch.softmax(v[s:e].double(), 0)
    torch.testing.assert_close(out.double(), expected, rtol=1e-6, atol=1e-7)


def test_offsets_output_is_a_copy() -> None:
    v, o = _npu(torch.randn(7, 2), OFFS)
    _, offsets = F.jagged_softmax(v, o, 2)
    assert offsets.data_ptr() != o.data_ptr() and torch.equal(offsets.cpu(), OFFS)


def test_autograd_matches_upstream_on_the_rows_it_writes() -> None:
    v = torch.randn(7, 2, generator=torch.Generator().manual_seed(1), requires_grad=True)
    w = torch.randn(7, 2, generator=torch.Generator().manual_seed(2))
    vn = v.detach().to(NPU).requires_grad_()
    out, _ = F.jagged_softmax(vn, OFFS.to(NPU), 2)
    (out * w.to(NPU)).sum().backward()
    keep = torch.tensor([1, 1, 0, 1, 1, 0, 0], dtype=torch.bool).unsqueeze(1)
    ref, _ = F.jagged_softmax(v, OFFS, 2)
    (ref * w * keep).sum().backward()  # upstream's unwritten rows are garbage: masked
    assert vn.grad is not None and v.grad is not None
    torch.testing.assert_close(vn.grad.cpu(), v.grad * keep)


@pytest.mark.parametrize(
    "args, names",
    [
        ((torch.randn(7, 2).double(), OFFS, 2), ("values",)),
        ((torch.ones(7, 2, dtype=torch.int32), OFFS, 2), ("values",)),
        ((torch.randn(7), OFFS, 2), ("values",)),
        ((torch.randn(7, 2), OFFS.float(), 2), ("x_offsets",)),
        ((torch.randn(7, 2), OFFS.view(2, 2), 2), ("x_offsets",)),
        ((torch.randn(7, 2), torch.tensor([], dtype=torch.int64), 2), ("x_offsets",)),
        ((None, OFFS, 2), ("values",)),
        (("values", OFFS, 2), ("values",)),
    ],
)
def test_bad_arguments_name_the_op_and_argument(args: tuple, names: tuple[str, ...]) -> None:
    placed = [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]
    for op in ("jagged_softmax", "jagged_softmax_forward"):
        with pytest.raises((ValueError, RuntimeError, TypeError)) as err:
            getattr(F, op)(*placed)
        msg = str(err.value)
        assert op in msg and any(n in msg for n in names), msg


@pytest.mark.parametrize(
    "offsets",
    [[0, 5, 5, 11], [0, -1, 3, 7], [0, 3, 1, 7], [0, 3, 2**31 + 3, 2**31 + 5]],
    ids=["past_the_values", "negative", "overlapping", "int32_wrapping"],
)
def test_bad_offsets_data_is_refused_by_name(offsets: list[int]) -> None:
    v = torch.randn(7, 2).to(NPU)
    o = torch.tensor(offsets).to(NPU)
    for call in (
        lambda: F.jagged_softmax_forward(v, o, 4),
        lambda: F.jagged_softmax_backward(v, v, o, 4),
    ):
        with pytest.raises(RuntimeError, match="jagged_softmax.*x_offsets"):
            call()
            fbgemm_npu.check()  # the data check is queued: read it


def test_backward_checks_grad_output() -> None:
    y, o = _npu(torch.rand(7, 2), OFFS)
    for g in (torch.randn(6, 2), torch.randn(7, 2).half()):
        with pytest.raises(ValueError, match="jagged_softmax_backward.*grad_output"):
            F.jagged_softmax_backward(g.to(NPU), y, o, 2)
    with pytest.raises(RuntimeError, match="jagged_softmax_backward.*x_offsets"):
        F.jagged_softmax_backward(y, y, o.cpu(), 2)


def test_empty_and_negative_max_l_give_zeros() -> None:
    v, o = _npu(torch.randn(7, 2), OFFS)
    assert torch.equal(F.jagged_softmax_forward(v, o, -1).cpu(), torch.zeros(7, 2))
    assert F.jagged_softmax_forward(*_npu(torch.randn(0, 2), torch.tensor([0])), 3).shape == (0, 2)
