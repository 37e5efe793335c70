"""The eeg family on npu: upstream's index-distribution estimator / generator on npu tensors,
equal to upstream on the CPU, one sync and one upload each (``BUDGETS``), errors upstream's."""

from __future__ import annotations

import pytest
import torch

from fbgemm_npu.testing.budgets import assert_op_budget, family_ops
from fbgemm_npu.testing.op_samples_eeg import trace

F = torch.ops.fbgemm
EST, GEN = (
    "fbgemm::tbe_estimate_indices_distribution",
    "fbgemm::tbe_generate_indices_from_distribution",
)


def test_every_op_of_the_family_is_measured() -> None:
    assert family_ops("eeg") == {EST, GEN}


@pytest.mark.parametrize(("n", "rows"), [(2000, 300), (12000, 4000)])
def test_estimate_equals_upstream_within_budget(n: int, rows: int) -> None:
    x = trace(n, rows)
    want = F.tbe_estimate_indices_distribution(x)
    xn = x.to("npu")
    c = assert_op_budget(lambda: F.tbe_estimate_indices_distribution(xn), EST, exact=True)
    assert c.syncs == 1
    got = F.tbe_estimate_indices_distribution(xn)
    assert got[0].device.type == "npu"
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=0, atol=0)
    assert got[1:] == want[1:]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("num_indices", [64, 3000])
def test_generate_equals_upstream_with_one_seed(dtype: torch.dtype, num_indices: int) -> None:
    hitters = torch.tensor([0.2, 0.1, 0.05], dtype=dtype)
    args = (1.0, 1.2, 100, num_indices)
    torch.manual_seed(7)
    want = F.tbe_generate_indices_from_distribution(hitters, *args)
    hn = hitters.to("npu")
    assert_op_budget(lambda: F.tbe_generate_indices_from_distribution(hn, *args), GEN, exact=True)
    torch.manual_seed(7)
    got = F.tbe_generate_indices_from_distribution(hn, *args)
    assert got.device.type == "npu" and got.dtype == torch.int64
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda d: F.tbe_estimate_indices_distribution(
                torch.tensor([1, 2], dtype=torch.int32).to(d)
            ),
            "dtype",
        ),
        (
            lambda d: F.tbe_estimate_indices_distribution(torch.zeros(0, dtype=torch.int64).to(d)),
            "numel",
        ),
        (
            lambda d: F.tbe_generate_indices_from_distribution(
                torch.ones(2, 2).to(d), 1.0, 1.2, 9, 3
            ),
            "dim",
        ),
        (
            lambda d: F.tbe_generate_indices_from_distribution(
                torch.ones(2, dtype=torch.int64).to(d), 1.0, 1.2, 9, 3
            ),
            "dtype",
        ),
    ],
)
def test_errors_are_upstreams(call: object, match: str) -> None:
    with pytest.raises(RuntimeError, match=match) as want:
        call("cpu")
    with pytest.raises(RuntimeError, match=match) as got:
        call("npu")
    assert str(got.value) == str(want.value)


def test_a_non_tensor_is_refused_by_name() -> None:
    with pytest.raises((TypeError, RuntimeError, ValueError), match="indices"):
        F.tbe_estimate_indices_distribution(None)
