"""``fbgemm::repeat_arange`` on npu: parity with upstream's CPU kernel and an independent
reference (``cat(arange(l))``), and the errors of bad input, each naming the op and
``lengths``."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"

VALID = {
    "int64": torch.tensor([3, 0, 2, 1]),
    "int32": torch.tensor([0, 5, 0, 0, 1, 4], dtype=torch.int32),
    "zeros": torch.zeros(4, dtype=torch.int64),
    "empty": torch.zeros(0, dtype=torch.int32),
    "one long": torch.tensor([70000]),
    "many": torch.randint(0, 20, (2000,), generator=torch.Generator().manual_seed(0)),
    "sliced": torch.tensor([4, 9, 0, 9, 2, 9]),  # [::2] below
}


@pytest.mark.parametrize("name", list(VALID))
def test_equals_upstream_cpu_and_reference(name: str) -> None:
    t = VALID[name]
    dev = t.to(NPU)
    if name == "sliced":
        t, dev = t[::2], dev[::2]
    want = F.repeat_arange(t.contiguous())
    ref = torch.cat([torch.arange(int(n), dtype=t.dtype) for n in t] + [t.new_empty(0)])
    assert torch.equal(want, ref)
    got = F.repeat_arange(dev)
    assert got.device.type == NPU and got.dtype == t.dtype
    assert torch.equal(got.cpu(), ref)


BAD = {
    "float32": (torch.tensor([1.0, 2.0]), "lengths"),
    "bool": (torch.tensor([True]), "lengths"),
    "0-D": (torch.tensor(3), "lengths"),
    "2-D": (torch.tensor([[1, 2], [3, 0]]), "lengths"),
    "negative": (torch.tensor([2, -1, 3]), "lengths"),
    "int32 sum wraps": (torch.tensor([2**31 - 1, 2**31 - 1, 5], dtype=torch.int32), "lengths"),
    "huge": (torch.tensor([2**40]), "lengths"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_names_op_and_argument(name: str) -> None:
    t, arg = BAD[name]
    with pytest.raises((RuntimeError, ValueError), match="repeat_arange") as info:
        F.repeat_arange(t.to(NPU))
    assert arg in str(info.value)


def test_none_is_refused() -> None:
    with pytest.raises((RuntimeError, ValueError, TypeError), match="lengths|Tensor"):
        F.repeat_arange(None)


def test_negative_lengths_with_checks_off_stay_in_bounds(no_validation: None) -> None:
    """Checks off: a bad length gives some result of the read size, never a crash."""
    out = F.repeat_arange(torch.tensor([4, -1, 3]).to(NPU))
    assert out.numel() == 6
