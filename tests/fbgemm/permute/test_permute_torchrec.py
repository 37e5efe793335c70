"""torchrec's ``KeyedJaggedTensor.permute`` on npu: it calls ``permute_2D_sparse_data`` with the
length sum given, which must land on our kernel and match the same KJT permuted on the CPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fbgemm_npu.testing.permute_inputs import sparse_batch

NPU = "npu"


def test_torchrec_kjt_permute_on_npu() -> None:
    """torchrec's KeyedJaggedTensor.permute (permute_2D_sparse_data with the length sum given)
    lands on our kernel and matches the same KJT permuted on the CPU."""
    jagged = pytest.importorskip("torchrec.sparse.jagged_tensor", reason="torchrec not installed")
    d = sparse_batch(5, 8, seed=3, weights=True)

    def kjt(dev: str) -> Any:
        return jagged.KeyedJaggedTensor.from_lengths_sync(
            keys=list("abcde"),
            values=d["values"].to(dev),
            lengths=d["lengths"].view(-1).to(dev),
            weights=d["weights"].to(dev),
        )

    order = [3, 1, 4, 0, 2, 2]
    got, expected = kjt(NPU).permute(order), kjt("cpu").permute(order)
    assert got.keys() == expected.keys() and got.values().device.type == "npu"
    for attr in ("values", "lengths", "weights"):
        assert torch.equal(getattr(got, attr)().cpu(), getattr(expected, attr)())
