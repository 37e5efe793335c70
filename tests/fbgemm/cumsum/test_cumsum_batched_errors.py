"""``fbgemm::asynchronous_batched_complete_cumsum`` on npu: parity with upstream's CPU kernel
(int32 / int64 wrap, half types, empty rows and batches, views) and the errors of bad input
(ranks, dtypes, objects), each naming the op and ``values``."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"
I32MAX = torch.iinfo(torch.int32).max
I64MAX = torch.iinfo(torch.int64).max

VALID = {
    "int64": torch.tensor([[3, 0, 2, 7], [1, -4, 2, 9]]),
    "int32 wraps": torch.tensor([[I32MAX, 1, 5], [-I32MAX, -2, -3]], dtype=torch.int32),
    "int64 wraps": torch.tensor([[I64MAX, 1, 2**40], [2**33, 2**32 - 1, 1]]),
    "int64 carries": torch.tensor([[2**32 - 1, 2**32 - 1, 2**32 - 1, -5]]),
    "float32": torch.tensor([[0.5, -1.0, 2.0], [0.25, 0.0, 3.5]]),
    "float16": torch.tensor([[0.5, 1.0, 2.0]], dtype=torch.float16),
    "bfloat16": torch.tensor([[0.5, 1.0], [2.0, 4.0]], dtype=torch.bfloat16),
    "empty batch": torch.zeros(0, 3, dtype=torch.int64),
    "empty rows": torch.zeros(3, 0, dtype=torch.int64),
    "transposed": torch.arange(12).view(3, 4).t(),
    "expanded": torch.tensor([1, 2, 3], dtype=torch.int32).expand(4, 3),
    "sliced int64": torch.arange(40).view(4, 10)[:, ::3],
}


@pytest.mark.parametrize("name", list(VALID))
def test_equals_upstream_cpu(name: str) -> None:
    t = VALID[name]
    want = F.asynchronous_batched_complete_cumsum(t.contiguous())
    base = t.to(NPU) if t.is_contiguous() else None
    # keep the view's strides on npu: build it from the npu copy of its base
    if base is None:
        src = t._base if t._base is not None else t
        base = torch.as_strided(src.contiguous().to(NPU), t.shape, t.stride(), t.storage_offset())
    got = F.asynchronous_batched_complete_cumsum(base)
    assert got.device.type == NPU and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_long_int64_rows_past_2_31_exact() -> None:
    t = torch.full((2, 3000), 2**31 - 7, dtype=torch.int64)
    t[1] = -(2**33) + 3
    want = torch.cat([torch.zeros(2, 1, dtype=torch.int64), t.cumsum(1)], dim=1)
    assert torch.equal(F.asynchronous_batched_complete_cumsum(t.to(NPU)).cpu(), want)


BAD = {
    "1-D": torch.tensor([1, 2]),
    "3-D": torch.zeros(2, 2, 2, dtype=torch.int64),
    "0-D": torch.tensor(5),
    "float64": torch.ones(2, 3, dtype=torch.float64),
    "int8": torch.ones(2, 3, dtype=torch.int8),
    "bool": torch.ones(2, 3, dtype=torch.bool),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    with pytest.raises(Exception) as cpu_error:  # upstream refuses each of them too
        F.asynchronous_batched_complete_cumsum(BAD[name])
    assert cpu_error.type is not AssertionError
    with pytest.raises((RuntimeError, ValueError), match="asynchronous_batched_complete_cumsum"):
        F.asynchronous_batched_complete_cumsum(BAD[name].to(NPU))
    with pytest.raises((RuntimeError, ValueError), match="values"):
        F.asynchronous_batched_complete_cumsum(BAD[name].to(NPU))


def test_none_names_op_and_argument() -> None:
    with pytest.raises((RuntimeError, ValueError, TypeError), match="values|Tensor"):
        F.asynchronous_batched_complete_cumsum(None)
