"""Bad inputs of the bucketize family: each raises a ``ValueError`` / ``RuntimeError`` naming the
op and the argument, data errors upstream's CPU kernel does not detect (it reads or writes out of
bounds) included; with the data checks off, metadata is still checked.  A data check may be
deferred (``FBGEMM_NPU_VALIDATE``): each ``pytest.raises`` block reads the queue with
``fbgemm_npu.check()``, so a data error is raised there and never leaks into the next test.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fbgemm_npu
from fbgemm_npu.native.fbgemm.bucketize import bucketize as ours
from fbgemm_npu.testing.bucketize_inputs import docs_example, on_device

F = torch.ops.fbgemm
NPU = "npu"
I32, I64 = torch.int32, torch.int64


BAD_BLOCK: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    # data errors upstream's CPU kernel does not detect (it reads / writes out of bounds)
    (
        "negative length",
        {"lengths": torch.tensor([0, 2, -1, 3, 2, 3, 3, 3], dtype=I32)},
        RuntimeError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 15",
    ),
    (
        "lengths sum too small",
        {"indices": torch.arange(16, dtype=I32)},
        RuntimeError,
        r"block_bucketize_sparse_features: argument 'lengths' must be non-negative and sum to",
    ),
    (
        "lengths sum too large",
        {"indices": torch.arange(14, dtype=I32)},
        RuntimeError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 14",
    ),
    (
        "VBE sizes disagree",
        {"batch_size_per_feature": torch.tensor([1, 3, 2, 1], dtype=I32)},
        RuntimeError,
        r"'batch_size_per_feature' must be non-negative and sum to lengths.numel",
    ),
    (
        "VBE negative size",
        {"batch_size_per_feature": torch.tensor([3, 3, 3, -1], dtype=I32)},
        RuntimeError,
        r"'batch_size_per_feature' must be non-negative",
    ),
    (
        "total_num_blocks not multiples",
        {"total_num_blocks": torch.tensor([3, 4, 6, 2], dtype=I32)},
        RuntimeError,
        r"'total_num_blocks' must hold positive multiples of my_size = 2",
    ),
    (
        "total_num_blocks zero",
        {"total_num_blocks": torch.tensor([0, 4, 6, 2], dtype=I32)},
        RuntimeError,
        r"'total_num_blocks' must hold positive multiples",
    ),
    (
        "total_num_blocks zero, zero block, boundaries",
        {
            "total_num_blocks": torch.tensor([0, 4, 6, 2], dtype=I32),
            "block_sizes": torch.tensor([0, 15, 10, 20], dtype=I32),
            "block_bucketize_pos": [torch.tensor([0, 9, 40], dtype=I32)] * 4,
        },
        RuntimeError,
        r"'total_num_blocks' must be positive where block_sizes is 0",
    ),
    # found by tests/fuzz/test_fuzz_bucketize.py: int32 sums that wrap, block sizes upstream's
    # b * G overflows with (or that are negative), boundaries out of (unsigned) order
    (
        "int32 lengths wrap",
        {"lengths": torch.tensor([2**31 - 1, 2**31 - 1, 17, 0, 0, 0, 0, 0], dtype=I32)},
        RuntimeError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 15",
    ),
    (
        "block size negative",
        {"block_sizes": torch.tensor([5, -15, 10, 20], dtype=I32)},
        RuntimeError,
        r"block_bucketize_sparse_features: .*'block_sizes' must be in \[0, 1073741823\]",
    ),
    (
        "block size times my_size overflows",
        {"block_sizes": torch.tensor([5, 2**30, 10, 20], dtype=I32)},
        RuntimeError,
        r"'block_sizes' must be in \[0, 1073741823\] \(b \* my_size <= 2147483647\)",
    ),
    (
        "block size times total_num_blocks overflows",
        {
            "block_sizes": torch.tensor([5, 2**29, 10, 20], dtype=I32),
            "total_num_blocks": torch.tensor([2, 4, 2, 2], dtype=I32),
        },
        RuntimeError,
        r"'block_sizes' must be non-negative with b \* total_num_blocks <= 2147483647",
    ),
    (
        "boundaries unsorted",
        {"block_bucketize_pos": [torch.tensor(v, dtype=I32) for v in ([0, 9], [0, 9, 5]) * 2]},
        RuntimeError,
        r"'block_bucketize_pos' must hold each feature's boundaries sorted",
    ),
    (
        "boundaries unsorted as unsigned",  # -1 is the largest unsigned value
        {"block_bucketize_pos": [torch.tensor([0, -1, 5], dtype=I32)] * 4},
        RuntimeError,
        r"'block_bucketize_pos' must hold each feature's boundaries sorted",
    ),
    (
        "my_size past the index dtype",
        {"my_size": 2**31},
        ValueError,
        r"'my_size' must be at most 2147483647 with int32 indices, got 2147483648",
    ),
    # metadata errors
    (
        "lengths not a multiple of features",
        {"lengths": torch.tensor([1] * 7, dtype=I32), "indices": torch.arange(7, dtype=I32)},
        ValueError,
        r"'lengths' has 7 elements, not a multiple of block_sizes.numel\(\) = 4",
    ),
    (
        "no features",
        {"block_sizes": torch.zeros(0, dtype=I32)},
        ValueError,
        r"'lengths' has 8 elements, not a multiple of block_sizes.numel\(\) = 0",
    ),
    ("my_size 0", {"my_size": 0}, ValueError, r"'my_size' must be at least 1, got 0"),
    (
        "block_sizes dtype",
        {"block_sizes": torch.tensor([5, 15, 10, 20])},
        ValueError,
        r"arguments 'indices' \(int32\) and 'block_sizes' \(int64\) must have the same dtype",
    ),
    (
        "lengths float",
        {"lengths": torch.zeros(8)},
        ValueError,
        r"'lengths' must have dtype int32 or int64, got float32",
    ),
    (
        "indices int16",
        {"indices": torch.zeros(15, dtype=torch.int16)},
        ValueError,
        r"'indices' must have dtype int32 or int64, got int16",
    ),
    (
        "batch sizes dtype",
        {"batch_size_per_feature": torch.tensor([2, 2, 2, 2])},
        ValueError,
        r"'lengths' \(int32\) and 'batch_size_per_feature' \(int64\) must have the same dtype",
    ),
    (
        "batch sizes count",
        {"batch_size_per_feature": torch.tensor([4, 4], dtype=I32)},
        ValueError,
        r"'batch_size_per_feature' must have block_sizes.numel\(\) = 4 elements, got 2",
    ),
    (
        "weights dtype",
        {"weights": torch.ones(15, dtype=torch.float16)},
        ValueError,
        r"'weights' must have dtype float32 or float64, got float16",
    ),
    (
        "weights size",
        {"weights": torch.ones(14)},
        ValueError,
        r"'weights' must have indices.numel\(\) \* weights_dim = 15 \* 1 elements, got 14",
    ),
    (
        "keep flags dtype",
        {"keep_orig_idx_per_feature": torch.ones(4, dtype=I64)},
        ValueError,
        r"'keep_orig_idx_per_feature' must have dtype bool, got int64",
    ),
    (
        "keep flags count",
        {"keep_orig_idx_per_feature": torch.ones(1, dtype=torch.bool)},
        ValueError,
        r"'keep_orig_idx_per_feature' must have block_sizes.numel\(\) = 4 elements",
    ),
    (
        "total_num_blocks count",
        {"total_num_blocks": torch.tensor([2], dtype=I32)},
        ValueError,
        r"'total_num_blocks' must have block_sizes.numel\(\) = 4 elements, got 1",
    ),
    (
        "total_num_blocks dtype",
        {"total_num_blocks": torch.tensor([2, 2, 2, 2])},
        ValueError,
        r"'indices' \(int32\) and 'total_num_blocks' \(int64\) must have the same dtype",
    ),
    (
        "boundaries count",
        {"block_bucketize_pos": [torch.tensor([0, 9], dtype=I32)]},
        ValueError,
        r"'block_bucketize_pos' must hold block_sizes.numel\(\) = 4 tensors, got 1",
    ),
    (
        "boundaries empty",
        {"block_bucketize_pos": [torch.zeros(0, dtype=I32)] * 4},
        ValueError,
        r"'block_bucketize_pos\[0\]' must not be empty",
    ),
    (
        "boundaries dtype",
        {"block_bucketize_pos": [torch.tensor([0, 9])] * 4},
        ValueError,
        r"'indices' \(int32\) and 'block_bucketize_pos\[0\]' \(int64\) must have the same dtype",
    ),
    (  # from the shapes: no row can hold an index (the row ids would have no table to index)
        "no rows, some indices",
        {"lengths": torch.zeros(0, dtype=I32)},
        ValueError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 15, got no rows",
    ),
]


@pytest.mark.parametrize(
    ("over", "exc", "match"), [c[1:] for c in BAD_BLOCK], ids=[c[0] for c in BAD_BLOCK]
)
def test_block_bad_inputs(over: dict[str, Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        F.block_bucketize_sparse_features(**docs_example(**over))
        fbgemm_npu.check()


def test_bad_inputs_name_the_variant() -> None:
    kw = docs_example(lengths=torch.tensor([0, 2, -1, 3, 2, 3, 3, 3], dtype=I32))
    with pytest.raises(
        RuntimeError, match=r"^fbgemm::block_bucketize_sparse_features_inference: arg"
    ):
        F.block_bucketize_sparse_features_inference(**kw)
        fbgemm_npu.check()
    kw = docs_example(weights=torch.ones(15, 2))
    with pytest.raises(
        ValueError,
        match=r"_2d_weights: argument 'weights' must have indices"
        r".numel\(\) \* weights_dim = 15 \* 3 elements, got 30",
    ):
        F.block_bucketize_sparse_features_2d_weights(**{**kw, "weights_dim": 3})


def test_mixed_devices_are_refused() -> None:
    kw = docs_example()
    kw["block_sizes"] = kw["block_sizes"].cpu()
    with pytest.raises(
        RuntimeError,
        match=r"arguments 'lengths' \(npu:0\) and 'block_sizes' "
        r"\(cpu\) must be on the same device",
    ):
        F.block_bucketize_sparse_features(**kw)
    kw = docs_example(weights=torch.ones(15))
    kw["weights"] = kw["weights"].to("npu:1")
    with pytest.raises(RuntimeError, match=r"'weights' \(npu:1\) and 'lengths' \(npu:0\)"):
        F.block_bucketize_sparse_features(**kw)


BAD_CYCLIC: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    (
        "dtypes differ",
        {"lengths": torch.ones(3, dtype=I32)},
        ValueError,
        r"arguments 'lengths' \(int32\) and 'indices' \(int64\) must have the same dtype",
    ),
    (
        "weights dtype",
        {"weights": torch.ones(3, dtype=torch.float64)},
        ValueError,
        r"'weights' must have dtype float32, got float64",
    ),
    (
        "weights size",
        {"weights": torch.ones(4)},
        ValueError,
        r"'weights' must have indices.numel\(\) = 3 elements, got 4",
    ),
    (
        "lengths sum",
        {"lengths": torch.tensor([1, 1, 2])},
        RuntimeError,
        r"^fbgemm::bucketize_sparse_features: argument 'lengths' must be non-negative and sum to",
    ),
    ("negative length", {"lengths": torch.tensor([2, -1, 2])}, RuntimeError, r"'lengths'"),
    ("my_size", {"my_size": -2}, ValueError, r"'my_size' must be at least 1, got -2"),
    (
        "int64 lengths wrap",
        {"lengths": torch.tensor([2**63 - 1, 2**63 - 1, 5])},
        RuntimeError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 3",
    ),
    (
        "no rows, some indices",
        {"lengths": torch.zeros(0, dtype=I64)},
        ValueError,
        r"'lengths' must be non-negative and sum to indices.numel\(\) = 3, got no rows",
    ),
    (
        "my_size past the index dtype",
        {
            "lengths": torch.ones(3, dtype=I32),
            "indices": torch.tensor([5, -7, 9], dtype=I32),
            "my_size": 2**31,
        },
        ValueError,
        r"'my_size' must be at most 2147483647 with int32 indices",
    ),
]


@pytest.mark.parametrize(
    ("over", "exc", "match"), [c[1:] for c in BAD_CYCLIC], ids=[c[0] for c in BAD_CYCLIC]
)
def test_cyclic_bad_inputs(over: dict[str, Any], exc: type[Exception], match: str) -> None:
    kw = {
        "lengths": torch.ones(3, dtype=I64),
        "indices": torch.tensor([5, -7, 9]),
        "bucketize_pos": True,
        "my_size": 3,
        **over,
    }
    with pytest.raises(exc, match=match):
        F.bucketize_sparse_features(**{k: on_device(v, NPU) for k, v in kw.items()})
        fbgemm_npu.check()


def test_direct_call_rejects_non_tensors() -> None:
    with pytest.raises(
        ValueError,
        match=r"block_bucketize_sparse_features: argument 'lengths' "
        r"must be a Tensor, got list",
    ):
        ours.block_bucketize_sparse_features_npu(
            [1],
            torch.zeros(1),
            False,
            False,  # type: ignore[arg-type]
            torch.ones(1),
            2,
        )


def test_int64_counts_that_wrap_are_refused() -> None:
    """int64 lengths and VBE batch sizes at 2**63 - 1 sum to a wrapped value equal to the
    expected one; the kernel then read them as row counts (the batch sizes: a segfault)."""
    top = 2**63 - 1
    kw = docs_example(lengths=torch.tensor([top, top, 17, 0, 0, 0, 0, 0]))
    with pytest.raises(RuntimeError, match=r"'lengths' must be non-negative and sum to"):
        F.block_bucketize_sparse_features(**kw)
        fbgemm_npu.check()
    kw = docs_example(
        lengths=torch.tensor([0, 2, 1, 3, 2, 3, 3, 1]),
        batch_size_per_feature=torch.tensor([top, top, 10, 0]),
    )
    with pytest.raises(RuntimeError, match=r"'batch_size_per_feature' must be non-negative and"):
        F.block_bucketize_sparse_features(**kw)
        fbgemm_npu.check()


def test_validation_off_still_checks_metadata(no_validation: None) -> None:
    with pytest.raises(ValueError, match=r"'my_size' must be at least 1"):
        F.block_bucketize_sparse_features(**docs_example(my_size=0))
    # a data error is trusted: no check runs, and the call may fail however the backend does
    kw = docs_example(
        lengths=torch.tensor([0, 2, 1, 3, 2, 3, 3, 1], dtype=I32),
        indices=torch.arange(15, dtype=I32),
    )
    assert F.block_bucketize_sparse_features(**kw)[0].shape == (16,)
