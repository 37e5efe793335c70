"""``fbgemm::embedding_bag_rowwise_prune`` on npu against upstream's CPU kernel: the threshold
(float32 values against a double threshold, NaN), ``abs``, ``min_num_rows`` (upstream's keep
rule), ``min_save_ratio`` (the skip path, upstream's size estimate), both mapping dtypes, weight
dtypes, empty and non-contiguous inputs; and bad input, each a ``RuntimeError`` naming the op
and the argument, as upstream raises."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"


def _both(*args: object) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    want = F.embedding_bag_rowwise_prune(*args)
    placed = [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]
    return want, F.embedding_bag_rowwise_prune(*placed)


def _assert_equal(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.device.type == NPU and g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g.cpu(), w)


@pytest.mark.parametrize("seed", range(40))
def test_equals_upstream_on_random_calls(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    n, d = int(torch.randint(0, 30, (1,), generator=g)), int(torch.randint(1, 5, (1,), generator=g))
    weight = torch.randn(n, d, generator=g)
    indicator = torch.randn(n, generator=g)
    threshold = float(torch.rand(1, generator=g)) * 1.5
    rows = int(torch.randint(-2, n + 3, (1,), generator=g))
    ratio = [None, 1.0, 0.6, 2.0][seed % 4]
    dtype = (torch.int32, torch.int64)[seed % 3 % 2]
    want, got = _both(weight, indicator, threshold, dtype, bool(seed % 2), rows, ratio)
    _assert_equal(got, want)


def test_threshold_compared_as_upstream_in_double() -> None:
    """0.3 (double) lies between float32 neighbours: a float32 0.3 exceeds it."""
    indicator = torch.tensor([0.3, 0.30000001, 0.29999998, float("nan"), -0.5, float("inf")])
    for threshold in (0.3, 0.29999998, 0.0, 1e40, float("inf")):
        want, got = _both(torch.randn(6, 3), indicator, threshold, torch.int64, False, 0, None)
        _assert_equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32])
def test_weight_dtypes(dtype: torch.dtype) -> None:
    weight = (torch.randn(8, 3) * 5).to(dtype)
    want, got = _both(weight, torch.randn(8), 0.4, torch.int32)
    _assert_equal(got, want)


def test_skip_path_returns_a_copy_and_mapping_zero() -> None:
    weight = torch.randn(5, 1)  # D = 1: 4 n + 0 >= 1.0 * 4 n: never worth pruning
    want, got = _both(weight, torch.randn(5), 0.1, torch.int64)
    _assert_equal(got, want)
    dev = weight.to(NPU)
    out, _ = F.embedding_bag_rowwise_prune(dev, torch.randn(5).to(NPU), 0.1, torch.int64)
    assert out.data_ptr() != dev.data_ptr()  # upstream returns weight itself; ours a copy


def test_empty_and_two_dimensional_indicator() -> None:
    for ratio in (None, 1.0):
        want, got = _both(torch.randn(0, 3), torch.randn(0), 0.2, torch.int64, True, 0, ratio)
        _assert_equal(got, want)
    want, got = _both(torch.randn(6, 3), torch.randn(2, 3), 0.2, torch.int32)
    _assert_equal(got, want)


def test_non_contiguous_weight_is_read_by_value() -> None:
    """Upstream's _rowwise_prune reads a transposed weight as if contiguous; ours by value:
    equal to upstream on the contiguous copy."""
    weight = torch.randn(4, 7).t()
    indicator = torch.randn(7)
    want = F.embedding_bag_rowwise_prune(weight.contiguous(), indicator, 0.5, torch.int64)
    got = F.embedding_bag_rowwise_prune(weight.to(NPU), indicator.to(NPU), 0.5, torch.int64)
    _assert_equal(got, want)


BAD = {
    "3-D weight": ((torch.randn(2, 3, 3), torch.randn(2), 0.3, torch.int64), "weight"),
    "1-D weight": ((torch.randn(6), torch.randn(6), 0.3, torch.int64), "weight"),
    "indicator size": ((torch.randn(6, 3), torch.randn(5), 0.3, torch.int64), "indicator"),
    "negative threshold": ((torch.randn(6, 3), torch.randn(6), -0.1, torch.int64), "threshold"),
    "float mapping": ((torch.randn(6, 3), torch.randn(6), 0.3, torch.float32), "compressed"),
    "double indicator": (
        (torch.randn(6, 3), torch.randn(6).double(), 0.3, torch.int64),
        "indicator",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_raises_as_upstream_naming_the_argument(name: str) -> None:
    args, arg = BAD[name]
    with pytest.raises(RuntimeError):
        F.embedding_bag_rowwise_prune(*args)
    placed = [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(RuntimeError, match="embedding_bag_rowwise_prune") as info:
        F.embedding_bag_rowwise_prune(*placed)
    assert arg in str(info.value)


def test_mixed_devices_and_none() -> None:
    with pytest.raises(RuntimeError, match="embedding_bag_rowwise_prune.*indicator"):
        F.embedding_bag_rowwise_prune(torch.randn(6, 3).to(NPU), torch.randn(6), 0.3, torch.int64)
    with pytest.raises((RuntimeError, ValueError, TypeError), match="indicator|Tensor"):
        F.embedding_bag_rowwise_prune(torch.randn(6, 3).to(NPU), None, 0.3, torch.int64)


def test_huge_min_num_rows_keeps_every_row() -> None:
    """min_num_rows past the int32 range (the fuzz's 2**40): every row kept, as upstream."""
    for rows in (2**40, -(2**40)):
        want, got = _both(torch.randn(9, 3), torch.randn(9), 0.5, torch.int64, True, rows, None)
        _assert_equal(got, want)
