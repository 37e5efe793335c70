"""``fbgemm::batch_index_select_dim0_tensor`` on npu: size tensors on the npu (one read) equal
upstream's CPU result, and bad size tensors are refused naming the op and the argument."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.testing.counters import count

F = torch.ops.fbgemm
OP = "batch_index_select_dim0_tensor"


def _args(device: str) -> tuple[torch.Tensor, ...]:
    tables = torch.arange(18.0).to(device)  # (3, 2) and (4, 3) tables back to back
    return tables, torch.tensor([2, 0, 1, 3, 3]).to(device)


def _sizes(device: str = "cpu", dtype: torch.dtype = torch.int64) -> list[torch.Tensor]:
    return [torch.tensor(v, dtype=dtype, device=device) for v in ([2, 3], [3, 4], [2, 3])]


def test_sizes_on_the_npu_are_read_once_and_equal_upstream() -> None:
    want = F.batch_index_select_dim0_tensor(*_args("cpu"), *_sizes())
    sizes = _sizes("npu")
    with count() as c:
        got = F.batch_index_select_dim0_tensor(*_args("npu"), *sizes)
    assert c.syncs == 1, c.summary()
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_gradient_equals_upstream() -> None:
    x = torch.arange(18.0, requires_grad=True)
    F.batch_index_select_dim0_tensor(x, _args("cpu")[1], *_sizes()).pow(2).sum().backward()
    xn = torch.arange(18.0, device="npu", requires_grad=True)
    F.batch_index_select_dim0_tensor(xn, _args("npu")[1], *_sizes()).pow(2).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("which", "bad", "name"),
    [
        (0, torch.tensor([2, 3], dtype=torch.int32), "input_num_indices"),  # upstream: Long only
        (1, torch.tensor([3.0, 4.0]), "input_rows"),
        (2, torch.tensor([[2, 3]]), "input_columns"),
        (2, torch.tensor([2, 3, 1]), "input_columns"),  # one entry per table each
        (1, None, "input_rows"),
    ],
)
def test_bad_sizes_are_refused_by_name(which: int, bad: object, name: str) -> None:
    sizes: list[object] = list(_sizes())
    sizes[which] = bad
    with pytest.raises((RuntimeError, ValueError), match=rf"{OP}.*{name}|{name}.*{OP}"):
        F.batch_index_select_dim0_tensor(*_args("npu"), *sizes)
