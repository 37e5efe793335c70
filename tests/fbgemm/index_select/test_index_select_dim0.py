"""``fbgemm::index_select_dim0`` on npu: parity with upstream's CPU kernel (forward, and the
gradient of ``index_select``: repeated indices add up), the hints ignored as upstream's CPU
kernel does, and the errors of bad input, each naming the op and the argument."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.native._pending import check

F = torch.ops.fbgemm
NPU = "npu"
G = torch.Generator().manual_seed(0)

VALID = {
    "float32 2-D": (torch.randn(6, 3, generator=G), torch.tensor([5, 0, 0, 2])),
    "int32 indices": (torch.randn(4, 2, 2, generator=G), torch.tensor([3, 1], dtype=torch.int32)),
    "float16 1-D": (torch.randn(5, generator=G).half(), torch.tensor([4, 4, 1])),
    "int64 values": (torch.arange(12).view(4, 3), torch.tensor([2, 3, 0])),
    "empty indices": (torch.randn(3, 2, generator=G), torch.zeros(0, dtype=torch.int64)),
    "empty input": (torch.zeros(0, 4), torch.zeros(0, dtype=torch.int64)),
    "transposed": (torch.randn(3, 5, generator=G).t(), torch.tensor([4, 1, 1])),
}


@pytest.mark.parametrize("name", list(VALID))
@pytest.mark.parametrize("hints", [(), (2, 5, True), (None, None, None)])
def test_equals_upstream_cpu(name: str, hints: tuple) -> None:
    x, i = VALID[name]
    want = F.index_select_dim0(x, i, *hints)
    got = F.index_select_dim0(x.to(NPU), i.to(NPU), *hints)
    check()
    assert got.device.type == NPU and got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradient_equals_upstream_cpu(dtype: torch.dtype) -> None:
    x = torch.randn(7, 4, generator=G).to(dtype)
    i = torch.tensor([6, 0, 6, 3, 6])
    w = torch.randn(5, 4, generator=G).to(dtype)
    xc = x.clone().requires_grad_()
    (F.index_select_dim0(xc, i) * w).sum().backward()
    xn = x.to(NPU).requires_grad_()
    out = F.index_select_dim0(xn, i.to(NPU))
    assert out.requires_grad
    (out * w.to(NPU)).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


def test_gradient_float64_reference() -> None:
    x = torch.randn(5, 3, dtype=torch.float64, generator=G)
    i = torch.tensor([1, 1, 4])
    xn = x.to(NPU).requires_grad_()
    g = torch.randn(3, 3, dtype=torch.float64, generator=G)
    (grad,) = torch.autograd.grad(F.index_select_dim0(xn, i.to(NPU)), xn, g.to(NPU))
    want = torch.zeros_like(x)
    for k, r in enumerate(i.tolist()):
        want[r] += g[k]
    torch.testing.assert_close(grad.cpu(), want)


BAD = {
    "index past the rows": (torch.randn(4, 2), torch.tensor([0, 4]), "indices"),
    "negative index": (torch.randn(4, 2), torch.tensor([-1]), "indices"),
    "float indices": (torch.randn(4, 2), torch.tensor([1.0]), "indices"),
    "2-D indices": (torch.randn(4, 2), torch.tensor([[1, 0]]), "indices"),
    "no rows": (torch.zeros(0, 2), torch.tensor([0]), "indices"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    x, i, arg = BAD[name]
    with pytest.raises(Exception) as upstream:  # upstream refuses each of them too
        F.index_select_dim0(x, i)
    assert upstream.type is not AssertionError
    with pytest.raises((RuntimeError, ValueError), match="index_select_dim0") as info:
        F.index_select_dim0(x.to(NPU), i.to(NPU))
        check()  # a queued data check is read here
    assert arg in str(info.value)


def test_mixed_devices_and_none_are_refused() -> None:
    with pytest.raises((RuntimeError, ValueError), match="index_select_dim0"):
        F.index_select_dim0(torch.randn(3, 2).to(NPU), torch.tensor([1]))
    with pytest.raises((RuntimeError, ValueError, TypeError), match="input|Tensor"):
        F.index_select_dim0(None, torch.tensor([1]).to(NPU))
