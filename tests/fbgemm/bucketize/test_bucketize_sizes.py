"""Sizes the bucketize family cannot allocate: the error names the op and ``my_size`` (the
allocator's own error named neither)."""

from __future__ import annotations

import pytest
import torch

F = torch.ops.fbgemm
NPU = "npu"
I64 = torch.int64


@pytest.mark.parametrize("op", ["block_bucketize_sparse_features", "bucketize_sparse_features"])
def test_my_size_too_large_to_allocate(op: str) -> None:
    """new_lengths has lengths.numel() * my_size elements: past int64 a ValueError, past the
    device's memory a RuntimeError, both naming my_size (the allocator's errors did not)."""
    lengths, x = torch.tensor([0, 2, 1, 3, 2, 3, 3, 1], device=NPU), torch.arange(15, device=NPU)
    blocks = torch.zeros(4, dtype=I64, device=NPU)  # b * my_size fits for any my_size
    for my_size, exc, match in (
        (2**62, ValueError, r"'my_size' = 4611686018427387904 is too large: new_lengths of"),
        (
            2**42,
            RuntimeError,
            r"'my_size' = 4398046511104: new_lengths of lengths.numel\(\) "
            r"\* my_size = 8 \* 4398046511104 elements cannot be allocated",
        ),
    ):
        with pytest.raises(exc, match=rf"^fbgemm::{op}: argument {match}"):
            if op == "bucketize_sparse_features":
                F.bucketize_sparse_features(lengths, x, False, my_size)
            else:
                F.block_bucketize_sparse_features(lengths, x, False, False, blocks, my_size)
