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
    """Upstream refuses these too; ours name the op as well (upstream's words do not)."""
    with pytest.raises(RuntimeError, match=match):
        call("cpu")
    with pytest.raises((RuntimeError, ValueError), match=match) as got:
        call("npu")
    assert "fbgemm::tbe_" in str(got.value)


def test_a_non_tensor_is_refused_by_name() -> None:
    with pytest.raises((TypeError, RuntimeError, ValueError), match="indices"):
        F.tbe_estimate_indices_distribution(None)


def test_estimate_reads_a_strided_or_expanded_trace_by_its_values() -> None:
    """Upstream walks ``numel`` elements from ``data_ptr``: a strided trace was misread and a
    stride-0 one read past its storage (the fuzz suite's finding); the host copy is made
    contiguous first."""
    x = trace(2000, 300)
    want = F.tbe_estimate_indices_distribution(x)
    buf = torch.zeros(2 * x.numel(), dtype=torch.int64, device="npu")
    buf[::2] = x.to("npu")
    got = F.tbe_estimate_indices_distribution(buf[::2])
    assert torch.equal(got[0].cpu(), want[0]) and got[1:] == want[1:]
    t = x.view(2, -1).t().contiguous().t()  # transposed storage
    got = F.tbe_estimate_indices_distribution(t.to("npu"))
    assert got[1:] == F.tbe_estimate_indices_distribution(t.contiguous())[1:]
    flat = torch.tensor([3], device="npu").expand(500)
    with pytest.raises(RuntimeError, match="tbe_estimate_indices_distribution: argument 'indices'"):
        F.tbe_estimate_indices_distribution(flat)  # one distinct index: upstream cannot fit it


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((torch.tensor([0.2, 0.1]), 1.0, 1.2, 0, 5), "max_index"),  # upstream: never returns
        ((torch.tensor([0.2, 0.1]), float("nan"), 1.2, 100, 5), "zipf_q"),  # never returns
        ((torch.tensor([0.2, 0.1]), 1.0, float("inf"), 100, 5), "zipf_s"),  # never returns
        ((torch.tensor([0.2, 0.1, 0.1, 0.1]), 1.0, 1.2, 1, 5), "max_index"),  # SIGSEGV
        ((torch.tensor([0.2, 0.1]), -2.0, 1.2, 100, 5), "zipf_q"),  # asserts q > 0
        ((torch.tensor([0.2, 0.1]), 1.0, -3.0, 100, 5), "zipf_s"),  # asserts s >= 0
        ((torch.tensor([-0.7, 0.6]), 1.0, 1.2, 100, 5), "heavy_hitters"),
        ((torch.tensor([float("nan")]), 1.0, 1.2, 100, 5), "heavy_hitters"),
        ((torch.tensor([0.7, 0.6]), 1.0, 1.2, 100, 5), "heavy_hitters"),
        ((torch.tensor([0.2, 0.1]), 1.0, 1.2, 100, -5), "num_indices"),
        ((torch.tensor([0.2, 0.1]), 1.0, 1.2, 2**62, 5), "max_index"),  # std::vector's words
        ((torch.tensor([0.2, 0.1]), 1.0, 1.2, 100, 2**40), "num_indices"),  # std::bad_alloc
    ],
)
def test_generate_refuses_what_upstream_hangs_or_crashes_on_by_name(args: tuple, name: str) -> None:
    """Upstream's sampler contract is asserts compiled out: past them it loops for ever,
    writes out of bounds, or raises words that name neither op nor argument (the fuzz suite's
    findings, each one checked on upstream in a child process while writing this test)."""
    on_npu = (args[0].to("npu"), *args[1:])
    with pytest.raises((RuntimeError, ValueError), match=f"tbe_generate_indices.*'?{name}") as e:
        F.tbe_generate_indices_from_distribution(*on_npu)
    assert "tbe_generate_indices_from_distribution" in str(e.value)


def test_negative_indices_are_refused_by_name() -> None:
    """Upstream sizes its log table by the largest index and reads it by the count of distinct
    ones: negative indices read past it."""
    x = trace(2000, 300)
    x[7] = -5
    with pytest.raises(ValueError, match="tbe_estimate_indices_distribution: argument 'indices'"):
        F.tbe_estimate_indices_distribution(x.to("npu"))
